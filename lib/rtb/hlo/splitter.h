// The splitter of scan.h as a template over what receives the statements (a callable taking
// const Statement&), so that the hand-over is inlined into the scan loop: the single-threaded
// split_statements (scan.cc) and each scanning thread of the pipelined mode (pipeline.cc)
// instantiate it with their own sink. See scan.h for the rules that end a statement.
//
// The scan loop (scan_run) is the per-byte hot loop. On x86-64 its body is compiled twice, once
// for CPUs with AVX2/POPCNT/BMI (the AVX2 classification inlined, single instructions for the
// bit counting) and once for any x86-64; the choice is made once per splitter (cpu_has_avx2).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/text.h"
#include "rtb/hlo/chunk.h"
#include "rtb/hlo/scan.h"
#include "rtb/hlo/syntax.h"

namespace rtb::hlo {

inline constexpr std::size_t kChunk = 64;

inline int popcount64(std::uint64_t x) { return std::popcount(x); }

// Last visible character before `end` (blank lines skipped); 0 if none.
inline char last_visible(const char* begin, const char* end) {
  while (end > begin) {
    char c = end[-1];
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return c;
    --end;
  }
  return 0;
}

// Where a splitter stands between two chunks of a contiguous source: enough to resume the scan
// there. Offsets are from the start of the source; lines are counted from where the scan began.
struct ScanState {
  std::size_t statement_begin = 0;  // start of the pending statement
  std::size_t scan = 0;             // next byte to classify
  std::int64_t line = 0;            // newlines seen so far
  std::int64_t statement_line = 1;  // first line of the pending statement
  std::int64_t depth = 0;           // bracket depth at `scan`
  std::int64_t base_depth = 0;      // depth after the previous statement
  bool in_string = false;
  bool escape_carry = false;

  // What a piece guessed to start at `offset` assumes there (lines counted from it).
  static ScanState piece_start(std::size_t offset) {
    ScanState state;
    state.statement_begin = offset;
    state.scan = offset;
    return state;
  }
  // Whether this is what a piece starting here assumes: a top-level statement boundary.
  bool at_top_level_boundary() const {
    return statement_begin == scan && depth == 0 && base_depth == 0 && !in_string && !escape_carry;
  }
};

// A piece of a contiguous source for one splitter: from `start` to `end`; `final` when `end` is
// the end of the source (else the scan stops there without treating it as the end of the input,
// and the caller reads the splitter's state()).
struct PieceRange {
  ScanState start;
  std::size_t end = 0;
  bool final = true;
};

// `Sink` receives each statement (a callable taking const Statement&; a template parameter so
// that the pipeline's hand-over is inlined into the scan loop).
template <typename Sink>
class Splitter {
 public:
  // The whole source, or with `piece` a piece of a contiguous one (never released behind the
  // scan: in the pipelined mode the consumer does that).
  Splitter(ByteSource& source, const SplitOptions& options, Sink sink,
           const PieceRange* piece = nullptr)
      : source_(source), options_(options), sink_(std::move(sink)) {
    std::string_view whole = source_.contiguous();
    if (!whole.empty()) {
      // Zero-copy: scan the source's own bytes.
      base_ = whole.data();
      end_ = whole.size();
      eof_ = true;
      result_.bytes = whole.size();
      release_ = piece == nullptr;
      if (piece != nullptr) {
        end_ = piece->end;
        final_ = piece->final;
        const ScanState& start = piece->start;
        statement_begin_ = start.statement_begin;
        scan_ = start.scan;
        line_ = start.line;
        statement_line_ = start.statement_line;
        depth_ = start.depth;
        base_depth_ = start.base_depth;
        in_string_ = start.in_string;
        escape_carry_ = start.escape_carry;
        result_.bytes = end_ - scan_;
      }
      return;
    }
    std::size_t block = std::max<std::size_t>(options_.block_bytes, kChunk);
    buffer_.resize(block + kChunk);
    base_ = buffer_.data();
  }

  SplitEnd run() {
    // Slices of 256 KiB between checks of the buffer (or releases of the mapping).
    constexpr std::size_t kSliceChunks = (std::size_t{256} << 10) / kChunk;
    for (;;) {
      if (!fill()) break;
      while (end_ - scan_ >= kChunk) {
        if (!scan_run(std::min((end_ - scan_) / kChunk, kSliceChunks))) {
          return too_long_ ? too_long() : finish_error();
        }
        if (release_) source_.release(statement_begin_);
      }
      if (eof_) break;
    }
    // The tail (< 64 bytes), scanned from a blank-padded copy so no byte past it is read.
    std::size_t tail = end_ - scan_;
    if (tail > 0) {
      char padded[kChunk];
      std::memset(padded, ' ', kChunk);
      std::memcpy(padded, base_ + scan_, tail);
      if (!scan_masks(classify_chunk(padded), tail)) {
        return too_long_ ? too_long() : finish_error();
      }
      scan_ = end_;
      if (past_limit(scan_)) return too_long();
    }
    if (!final_) {
      result_.lines = line_;
      result_.depth = depth_;
      return result_;
    }
    if (depth_ < 0) {  // after the last newline (see scan_masks)
      error_line_ = line_ + 1;
      error_ = "unbalanced closing bracket";
      return finish_error();
    }
    result_.lines = line_ + (end_ > statement_begin_ ? 1 : 0);
    result_.depth = depth_;
    // A last statement without a final newline.
    if (end_ > statement_begin_) {
      std::string_view text(base_ + statement_begin_, end_ - statement_begin_);
      bool blank = trim(text).empty();
      bool instruction_end = depth_ == 1 && !in_string_ && base_depth_ == 1;
      bool complete = depth_ == 0 || (instruction_end && instruction_reached_opcode(text));
      if (!blank && complete) {
        emit(text, depth_, nullptr);
      } else if (!blank) {
        result_.partial_statement = true;
      }
    }
    if (in_string_ || depth_ > base_depth_) result_.partial_statement = true;
    return result_;
  }

  // Where the scan stands (after run(): at the end of the piece, or where it stopped).
  ScanState state() const {
    return ScanState{statement_begin_, scan_,       line_,      statement_line_,
                     depth_,           base_depth_, in_string_, escape_carry_};
  }

 private:
  // Makes sure at least one full chunk (or everything that is left) is buffered. Returns false
  // when there is nothing more to scan.
  bool fill() {
    if (end_ - scan_ >= kChunk) return true;
    if (eof_) return end_ > scan_;
    // Keep the current statement and the unscanned bytes; drop everything before.
    if (statement_begin_ > 0) {
      std::size_t keep = end_ - statement_begin_;
      std::memmove(buffer_.data(), base_ + statement_begin_, keep);
      scan_ -= statement_begin_;
      end_ = keep;
      statement_begin_ = 0;
    }
    while (!eof_ && end_ - scan_ < kChunk) {
      std::size_t room = buffer_.size() - end_;
      if (room < options_.block_bytes / 2 + kChunk) {
        // The statement fills the buffer: grow it, bounded by the statement limit.
        buffer_.resize(buffer_.size() * 2);
        base_ = buffer_.data();
        room = buffer_.size() - end_;
      }
      std::size_t n = source_.read(buffer_.data() + end_, room);
      if (n == 0) {
        eof_ = true;
        break;
      }
      end_ += n;
      result_.bytes += n;
    }
    return end_ > scan_;
  }

  // Scans `chunks` full chunks from scan_, advancing it. False on an error (error_ or too_long_).
  bool scan_run(std::size_t chunks) {
#if defined(RTB_HLO_HAVE_AVX2)
    if (avx2_) return scan_run_avx2(chunks);
#endif
    return scan_run_body<false>(chunks);
  }

#if defined(RTB_HLO_HAVE_AVX2)
  RTB_HLO_TARGET_AVX2 bool scan_run_avx2(std::size_t chunks) { return scan_run_body<true>(chunks); }
#endif

  template <bool kAvx2>
  [[gnu::always_inline]] inline bool scan_run_body(std::size_t chunks) {
    for (std::size_t k = 0; k < chunks; ++k) {
      ChunkMasks masks;
#if defined(RTB_HLO_HAVE_AVX2)
      if constexpr (kAvx2) {
        masks = classify_chunk_avx2(base_ + scan_);
      } else {
        masks = classify_chunk_sse2(base_ + scan_);
      }
#elif defined(__SSE2__)
      masks = classify_chunk_sse2(base_ + scan_);
#else
      masks = classify_chunk_portable(base_ + scan_);
#endif
      if (!scan_masks<kAvx2>(masks, kChunk)) return false;
      scan_ += kChunk;
      if (past_limit(scan_)) {
        too_long_ = true;
        return false;
      }
    }
    return true;
  }

  // Handles the masks of the chunk at scan_, of which the first `valid` bytes are input.
  // kClmul: the caller is compiled for PCLMULQDQ (the AVX2 variant), which computes the prefix
  // XOR in one carry-less multiplication by all ones.
  template <bool kClmul = false>
  [[gnu::always_inline]] inline bool scan_masks(const ChunkMasks& m, std::size_t valid) {
    // A NUL byte: not text. Statements before it still count; stop at its line.
    std::uint64_t input = valid >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << valid) - 1;
    bool binary = false;
    int nul_at = 0;
    if ((m.zero & input) != 0) {
      nul_at = std::countr_zero(m.zero & input);
      input = (std::uint64_t{1} << nul_at) - 1;
      binary = true;
    }
    // Escaped characters: the byte after an unescaped backslash.
    std::uint64_t escaped = escape_carry_ ? 1 : 0;
    escape_carry_ = false;
    if (m.backslash != 0) {
      std::uint64_t bits = m.backslash;
      while (bits != 0) {
        int at = std::countr_zero(bits);
        bits &= bits - 1;
        if ((escaped >> at) & 1) continue;  // this backslash is itself escaped
        if (at == 63) {
          escape_carry_ = true;
        } else {
          escaped |= std::uint64_t{1} << (at + 1);
        }
      }
    }
    std::uint64_t quotes = m.quote & ~escaped;
    std::uint64_t inside = 0;
#if defined(RTB_HLO_HAVE_AVX2)
    if constexpr (kClmul) {
      inside = prefix_xor_clmul(quotes);
    } else {
      inside = prefix_xor(quotes);
    }
#else
    inside = prefix_xor(quotes);
#endif
    std::uint64_t in_string = inside ^ (in_string_ ? ~std::uint64_t{0} : 0);
    in_string_ = (in_string >> 63) != 0;
    const std::uint64_t open = m.open & ~in_string;
    const std::uint64_t close = m.close & ~in_string;

    std::uint64_t newlines = m.newline & input;
    while (newlines != 0) {
      int at = std::countr_zero(newlines);
      newlines &= newlines - 1;
      ++line_;
      if ((in_string >> at) & 1) continue;
      // Past the limit, the statement is too long whatever this line end means (see
      // past_limit).
      std::size_t position = scan_ + static_cast<std::size_t>(at);
      if (past_limit(position)) {
        too_long_ = true;
        return false;
      }
      std::uint64_t below = (std::uint64_t{1} << at) - 1;
      std::int64_t depth = depth_ + popcount64(open & below) - popcount64(close & below);
      if (depth < 0) {
        error_line_ = line_;
        error_ = "unbalanced closing bracket";
        return false;
      }
      if (ends_statement(position, depth)) {
        std::string_view text(base_ + statement_begin_, position - statement_begin_);
        emit(text, depth, head_valid_ ? &head_ : nullptr);
        statement_begin_ = position + 1;
        statement_line_ = line_ + 1;
        base_depth_ = depth;
      }
    }
    if (binary) {
      if (past_limit(scan_ + static_cast<std::size_t>(nul_at))) {
        too_long_ = true;  // the statement passed the limit before the NUL (see past_limit)
        return false;
      }
      error_line_ = line_ + 1;
      error_ = "binary data (NUL byte): not HLO text";
      return false;
    }
    // A negative depth is an error where a line ends (above) or where the input does (run()),
    // not at the end of a chunk: what the reader accepts must not depend on where the 64-byte
    // chunks fall (the pieces of the pipelined mode start at other offsets).
    depth_ += popcount64(open) - popcount64(close);
    return true;
  }

  // Whether the pending statement, still open at `position` (the offset of the next byte to
  // scan, a line end or a NUL), is longer than the limit. Every check of the limit goes through
  // here and depends on the position alone: chunk ends (scan_run) fall elsewhere in the pieces
  // of the pipelined mode, so which error a long statement meets first must not depend on them.
  bool past_limit(std::size_t position) const {
    return position - statement_begin_ > options_.max_statement_bytes;
  }

  // Whether the newline at `newline` (bracket depth `depth` there) ends the pending statement.
  // Inside a computation this parses the instruction head; the parse is handed to the callback.
  bool ends_statement(std::size_t newline, std::int64_t depth) {
    head_valid_ = false;
    if (depth == 0) return true;
    if (depth > 1) return false;
    const char* begin = base_ + statement_begin_;
    const char* end = base_ + newline;
    char last = last_visible(begin, end);
    if (base_depth_ == 0) return last == '{';  // a computation header
    if (last == ',' || last == '=') return false;
    HeadStatus status = parse_instruction_head(
        std::string_view(begin, static_cast<std::size_t>(end - begin)), head_);
    head_valid_ = status == HeadStatus::kOk;
    return status != HeadStatus::kIncomplete;
  }

  void emit(std::string_view text, std::int64_t depth_after, const InstructionHead* head) {
    sink_(Statement{text, statement_line_, depth_after, head});
  }

  // At an error, `lines` is the line of the problem: the newlines scanned by then depend on
  // where the chunks fall.
  SplitEnd too_long() {
    result_.clean = false;
    result_.line = statement_line_;
    std::size_t limit = options_.max_statement_bytes;
    std::string size = limit % (std::size_t{1} << 20) == 0 ? fmt::format("{} MiB", limit >> 20)
                                                           : fmt::format("{} bytes", limit);
    result_.message = fmt::format(
        "statement longer than {} (an unterminated string or bracket, or not HLO text?)", size);
    result_.lines = statement_line_;
    result_.depth = depth_;
    return result_;
  }

  SplitEnd finish_error() {
    result_.clean = false;
    result_.line = error_line_;
    result_.message = error_;
    result_.lines = error_line_;
    result_.depth = depth_;
    return result_;
  }

  ByteSource& source_;
  const SplitOptions& options_;
  Sink sink_;
  std::vector<char> buffer_;         // read() mode: the bytes being scanned
  const char* base_ = nullptr;       // buffer_.data(), or the source's contiguous bytes
  bool release_ = false;             // release the source behind the scan
  bool final_ = true;                // the scan runs to the end of the input
  std::size_t statement_begin_ = 0;  // start of the pending statement (offset from base_)
  std::size_t scan_ = 0;             // next byte to classify
  std::size_t end_ = 0;              // end of the buffered bytes
  bool eof_ = false;
  std::int64_t line_ = 0;            // newlines seen so far
  std::int64_t statement_line_ = 1;  // first line of the pending statement
  std::int64_t depth_ = 0;           // bracket depth at scan_
  std::int64_t base_depth_ = 0;      // depth after the previous statement
  bool in_string_ = false;
  bool escape_carry_ = false;
  InstructionHead head_;  // the last instruction head parsed by ends_statement
  bool head_valid_ = false;
  bool too_long_ = false;
  const bool avx2_ = cpu_has_avx2();
  std::int64_t error_line_ = 0;
  std::string error_;
  SplitEnd result_;
};

}  // namespace rtb::hlo
