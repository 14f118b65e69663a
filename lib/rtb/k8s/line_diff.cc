#include "rtb/k8s/line_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "rtb/base/text.h"

namespace rtb::k8s {
namespace {

constexpr std::size_t kMaxTableCells = std::size_t{1} << 20;

// The edit script of the middle parts a[lo_a, hi_a) and b[lo_b, hi_b): a longest common
// subsequence by dynamic programming over suffixes, or, when too large, all removed then added.
bool middle_edits(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b,
                  std::size_t lo_a, std::size_t hi_a, std::size_t lo_b, std::size_t hi_b,
                  std::size_t max_cells, std::vector<SequenceEdit>& out) {
  std::size_t n = hi_a - lo_a, m = hi_b - lo_b;
  bool too_large = (n + 1) * (m + 1) > max_cells;
  if (n == 0 || m == 0 || too_large) {
    for (std::size_t i = lo_a; i < hi_a; ++i) out.push_back({DiffLine::Kind::kRemoved, i, lo_b});
    for (std::size_t j = lo_b; j < hi_b; ++j) out.push_back({DiffLine::Kind::kAdded, hi_a, j});
    return !too_large;
  }
  // common[i][j]: length of the longest common subsequence of a[lo_a+i..] and b[lo_b+j..].
  std::vector<std::uint32_t> common((n + 1) * (m + 1), 0);
  auto at = [&](std::size_t i, std::size_t j) -> std::uint32_t& { return common[i * (m + 1) + j]; };
  for (std::size_t i = n; i-- > 0;) {
    for (std::size_t j = m; j-- > 0;) {
      at(i, j) =
          a[lo_a + i] == b[lo_b + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
    }
  }
  std::size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[lo_a + i] == b[lo_b + j]) {
      out.push_back({DiffLine::Kind::kContext, lo_a + i++, lo_b + j++});
    } else if (j < m && (i == n || at(i, j + 1) > at(i + 1, j))) {
      out.push_back({DiffLine::Kind::kAdded, lo_a + i, lo_b + j++});
    } else {
      out.push_back({DiffLine::Kind::kRemoved, lo_a + i++, lo_b + j});
    }
  }
  return true;
}

}  // namespace

EditScript edit_script(const std::vector<std::string_view>& a,
                       const std::vector<std::string_view>& b, std::size_t max_cells) {
  std::size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  std::size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) {
    ++suffix;
  }
  EditScript script;
  for (std::size_t i = 0; i < prefix; ++i) script.edits.push_back({DiffLine::Kind::kContext, i, i});
  script.aligned = middle_edits(a, b, prefix, a.size() - suffix, prefix, b.size() - suffix,
                                max_cells, script.edits);
  for (std::size_t k = suffix; k > 0; --k)
    script.edits.push_back({DiffLine::Kind::kContext, a.size() - k, b.size() - k});
  return script;
}

std::vector<LineHunk> line_diff(std::string_view old_text, std::string_view new_text,
                                std::size_t context) {
  std::vector<std::string_view> a = split_lines(old_text), b = split_lines(new_text);
  std::vector<SequenceEdit> edits = edit_script(a, b, kMaxTableCells).edits;

  // Hunks: each change with `context` kept lines either side, merged when they overlap.
  std::vector<LineHunk> hunks;
  std::size_t e = 0;
  while (e < edits.size()) {
    if (edits[e].kind == DiffLine::Kind::kContext) {
      ++e;
      continue;
    }
    std::size_t first = e >= context ? e - context : 0;
    // Extend past changes until `2 * context` kept lines in a row (or the end) separate them.
    std::size_t last = e;  // last changed edit
    for (std::size_t k = e + 1; k < edits.size() && k <= last + 2 * context; ++k) {
      if (edits[k].kind != DiffLine::Kind::kContext) last = k;
    }
    std::size_t end = std::min(edits.size(), last + context + 1);
    LineHunk hunk;
    hunk.old_start = edits[first].old_index + 1;
    hunk.new_start = edits[first].new_index + 1;
    for (std::size_t k = first; k < end; ++k) {
      const SequenceEdit& edit = edits[k];
      switch (edit.kind) {
        case DiffLine::Kind::kContext:
          hunk.lines.push_back({edit.kind, a[edit.old_index]});
          ++hunk.old_count;
          ++hunk.new_count;
          break;
        case DiffLine::Kind::kRemoved:
          hunk.lines.push_back({edit.kind, a[edit.old_index]});
          ++hunk.old_count;
          break;
        case DiffLine::Kind::kAdded:
          hunk.lines.push_back({edit.kind, b[edit.new_index]});
          ++hunk.new_count;
          break;
      }
    }
    // `diff -u` numbers an empty side by the line before it.
    if (hunk.old_count == 0) --hunk.old_start;
    if (hunk.new_count == 0) --hunk.new_start;
    hunks.push_back(std::move(hunk));
    e = end;
  }
  return hunks;
}

std::vector<std::string> format_line_diff(const std::vector<LineHunk>& hunks) {
  std::vector<std::string> out;
  for (const LineHunk& hunk : hunks) {
    out.push_back(fmt::format("@@ -{},{} +{},{} @@", hunk.old_start, hunk.old_count, hunk.new_start,
                              hunk.new_count));
    for (const DiffLine& line : hunk.lines) {
      char sign = line.kind == DiffLine::Kind::kAdded     ? '+'
                  : line.kind == DiffLine::Kind::kRemoved ? '-'
                                                          : ' ';
      out.push_back(fmt::format("{} {}", sign, line.text));
    }
  }
  return out;
}

}  // namespace rtb::k8s
