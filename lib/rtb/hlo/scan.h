// The streaming layer of the HLO reader: cuts HLO module text into statements (the module
// header, computation headers, instructions, closing braces) without ever holding more than one
// statement plus one read block in memory.
//
// An instruction may span several lines (operands and attributes on following lines, multi-line
// backend_config), so statements are found by bracket depth, not by newlines alone: the scanner
// tracks (), [] and {} outside double-quoted strings (with backslash escapes) 64 bytes at a time
// (SSE2 where available, the same rules in portable C++ elsewhere) and looks at each newline:
//   - outside a computation, a newline ends a statement at depth 0, or at depth 1 when the line
//     ends with '{' (a computation header such as `ENTRY %main (p: f32[]) -> f32[] {`);
//   - inside a computation, a newline at depth 1 ends an instruction unless the line ends with
//     ',' or '=' or the instruction has not reached its `opcode(` yet (a shape alone on its
//     line); a newline at depth 0 ends the computation's closing `}` line.
// The pieces: chunk.h (the per-byte classification), splitter.h (the scan), pipeline.h (the
// threads of the pipelined mode). See analysis.h for what is done with the statements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "rtb/base/io.h"

namespace rtb::hlo {

struct InstructionHead;

// What a statement filter (see split_statements) learnt about a statement it kept. The splitter
// only carries it from the filter to the callback; the meaning of the fields is the filter's.
struct StatementNote {
  std::uint8_t kind = 0;    // the filter's classification
  std::uint32_t count = 0;  // e.g. statements the filter dropped since the previous kept one
  std::uint64_t hash = 0;   // e.g. of `key`; 0 = none
  std::uint16_t tag = 0;    // a small value, e.g. an index into the filter's table; 0 = none
  std::string_view key;     // a slice of the statement's text
};

// One statement: its text (leading and trailing whitespace kept, no final newline), the number
// of its first line (1-based) and the bracket depth after it (0 = top level, 1 = inside a
// computation's braces). When the splitter already parsed the statement as an instruction to
// decide where it ends, `head` points at that parse (valid during the callback), else null.
// With a filter, `note` is what the filter wrote for this statement and `ahead`, when not null,
// the note of a statement a few places later (for prefetching): the callback may change that
// one (e.g. store a hash it computed while starting a prefetch) and sees it again with that
// statement. Both are null without a filter.
struct Statement {
  std::string_view text;
  std::int64_t line = 0;
  std::int64_t depth_after = 0;
  const InstructionHead* head = nullptr;
  const StatementNote* note = nullptr;
  StatementNote* ahead = nullptr;
};

// Sees every statement first, on the scanning thread that cut it, and decides which reach the
// callback of split_statements. The per-statement work that needs no state of the consumer
// belongs here: the text is still in the scanning core's cache, and it balances the threads of
// the pipelined mode. None of the methods may throw.
//
// In the pipelined mode the text is cut into pieces scanned in parallel, each by its own filter:
// the caller's filter gets the first piece, fork() makes one for each other piece. A piece
// starts at a top-level statement boundary after the module's first statement. What a filter
// holds back after the last statement it kept (say, a count of the statements it dropped since)
// is its pending() note; merge_pending folds it into a note of the next piece (its first kept
// statement's, or that piece's own pending note), so the callback sees the notes a single filter
// would have written. split_statements returns the pending note of the whole input in SplitEnd.
// fork() and merge_pending() run on other threads while keep() runs: they must not read what
// keep() changes.
class StatementFilter {
 public:
  virtual ~StatementFilter() = default;
  // False: drop the statement. True: pass it on with `note` filled in.
  virtual bool keep(const Statement& statement, StatementNote& note) = 0;
  // A filter in its state at a top-level statement boundary after the module's first statement.
  virtual std::unique_ptr<StatementFilter> fork() const = 0;
  // What this filter holds back after its last kept statement, as a note.
  virtual StatementNote pending() const = 0;
  // Folds `earlier` (a pending note) into `later`, a note of the statements that follow it.
  virtual void merge_pending(const StatementNote& earlier, StatementNote& later) const = 0;
};

struct SplitOptions {
  std::size_t block_bytes = std::size_t{256} << 10;         // bytes per read
  std::size_t max_statement_bytes = std::size_t{16} << 20;  // longer = error (bounded memory)
  // 1: one thread. N >= 2 (only for contiguous sources, e.g. mapped files): the pipelined mode,
  // where N threads scan pieces of the text in parallel while the callback runs on the caller's
  // thread. 0: automatic: the machine's cores (at most 4) for contiguous sources of 4 MiB or
  // more on a machine with two or more cores, else 1. The callback always runs on the calling
  // thread and sees the same statements in the same order either way.
  int threads = 0;
  // Pipelined mode: bytes per piece (a piece runs on to the next computation's end); 0 =
  // automatic. Tests make it small to cut the text in many places.
  std::size_t piece_bytes = 0;
};

// What ended the input: the end of the bytes, or a statement that could not be cut.
struct SplitEnd {
  bool clean = true;               // false: stopped at an error (see line and message)
  std::int64_t line = 0;           // line of the problem
  std::string message;             // what is wrong
  std::int64_t lines = 0;          // lines read in total
  std::uint64_t bytes = 0;         // bytes read in total
  std::int64_t depth = 0;          // bracket depth at the end of a clean split (> 0: a
                                   // computation is unterminated)
  bool partial_statement = false;  // the input ended inside a statement (dropped)
  StatementNote pending;           // the filter's pending() note at the end (see StatementFilter)
};

// Reads `source` to its end, calling `on_statement` for each statement in order. Structural
// problems (a statement longer than max_statement_bytes, unbalanced closing brackets, NUL bytes)
// stop the split and are returned in SplitEnd, not thrown, so that callers can keep what they
// have. Exceptions thrown by `on_statement` propagate. Read errors throw rtb::Error. `filter`
// (optional, may be null) sees every statement first and decides which reach `on_statement`.
SplitEnd split_statements(ByteSource& source, const SplitOptions& options,
                          const std::function<void(const Statement&)>& on_statement,
                          StatementFilter* filter = nullptr);

// For the splitter and the parser: whether an instruction statement is complete, i.e. it is
// not an instruction cut after its name, '=' or shape. Anything that is not an instruction
// prefix counts as complete (the parser reports it).
bool instruction_reached_opcode(std::string_view text);

}  // namespace rtb::hlo
