// A line diff of two multi-line values (an xpk `command[2]` script, a config file in a ConfigMap),
// in hunks of changed lines with a little context, as `diff -u` shows them.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rtb::k8s {

struct DiffLine {
  enum class Kind { kContext, kRemoved, kAdded };
  Kind kind;
  std::string_view text;  // the line without its newline, a view into the compared value
};

struct LineHunk {
  std::size_t old_start = 0, old_count = 0;  // 1-based first line and count in the old value
  std::size_t new_start = 0, new_count = 0;  // likewise in the new value
  std::vector<DiffLine> lines;
};

// One step of an edit script: a kept item (kContext), a removed one or an added one, with its
// index in each sequence (for kRemoved and kAdded, the other index is where it stands between).
struct SequenceEdit {
  DiffLine::Kind kind;
  std::size_t old_index, new_index;
};

struct EditScript {
  std::vector<SequenceEdit> edits;
  // false: the middle between the common ends was too large to align (over `max_cells` table
  // cells) and stands as all removed, then all added.
  bool aligned = true;
};

// A shortest edit script that turns `a` into `b`: the common prefix and suffix kept, the middle
// aligned along a longest common subsequence (dynamic programming over suffixes, memory (n+1)(m+1)
// cells), a removal before an addition where both are shortest. Shared by line_diff and the
// element diff of config values (bench/config_elements.h).
EditScript edit_script(const std::vector<std::string_view>& a,
                       const std::vector<std::string_view>& b, std::size_t max_cells);

// The hunks that turn `old_text` into `new_text`: a shortest edit by lines (longest common
// subsequence) with up to `context` unchanged lines around each change; hunks whose context would
// touch are merged. Empty when the texts have the same lines. Memory is bounded: past about a
// million line pairs between the first and the last changed line, that whole middle is shown as
// removed then added rather than searched for common lines.
std::vector<LineHunk> line_diff(std::string_view old_text, std::string_view new_text,
                                std::size_t context = 2);

// `@@ -a,n +b,m @@` then one line per DiffLine: `  kept`, `- removed`, `+ added`.
std::vector<std::string> format_line_diff(const std::vector<LineHunk>& hunks);

}  // namespace rtb::k8s
