// Overlap analysis of a scheduled HLO module (the text XLA dumps as
// `*.after_optimizations.txt`): which collectives the schedule hides behind compute, and which
// are exposed.
//
// The module is streamed (scan.h): memory is bounded by the largest computation, not by the
// file. Within a scheduled computation the text order is the schedule order, so for every
// asynchronous pair (`*-start`/`*-done`, `async-start`/`async-update`/`async-done`,
// `copy-start`/`copy-done`, `send`/`recv` with their `*-done`) the instructions printed between
// the start and the done are what runs while the transfer is in flight. Pairs are matched
// through the done's operand (or an update's), never by name patterns.
//
// Definitions (the README of hlo-overlap repeats them for users):
// - compute: fusion, dot, convolution, custom-call, and while/call/conditional whose called
//   computations (transitively through while/call/conditional) contain compute. Resolved after
//   the whole file is read, since computations may be defined after their callers.
// - exposed: a pair with no compute between start and done; a synchronous collective is always
//   exposed. Unpaired starts and dones are reported with status unpaired and are neither.
// - bytes: the size of what the collective produces: the done's result (the async-done of an
//   async-start wrapping all-to-all, the all-gather-done's gathered array), the instruction's
//   result for synchronous collectives, and the data element of a send. Tuples are summed,
//   tokens and the u32/s32 context elements of start tuples are not counted for pairs.
// - executions: how often the computation runs per execution of the module: the product of
//   known_trip_count (from a while's backend_config) along the call chain, summed over call
//   sites. A while without known_trip_count counts as 1 and marks the result "at least".
//   A loop's condition runs trip count + 1 times. Computations nobody calls count once.
// - The collectives inside a computation run by async-start are that start's wrapped op (the
//   pair's kind), not separate synchronous collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/diagnostic.h"

namespace rtb::hlo {

enum class Status {
  kOverlapped,     // a pair with compute between start and done
  kExposed,        // a pair with no compute in its window, or a synchronous collective
  kUnpairedStart,  // a start whose done is not in the same computation (or the dump ends)
  kUnpairedDone,   // a done whose operand is not a start of the same computation
};
std::string_view status_name(Status status);  // "overlapped", "exposed", ...

// What an entry moves: a collective (incl. send/recv), a copy (copy-start/done: host offload,
// memory-space prefetch), or another asynchronous op (async slices, custom-call-start, ...).
enum class Category { kCollective, kCopy, kOther };
std::string_view category_name(Category category);  // "collective", "copy", "other"

struct Collective {
  std::string kind;  // the op itself: "all-gather", "all-to-all", "send", "copy", ...
  Category category = Category::kOther;
  std::string computation;  // where the start (or the synchronous op) is scheduled
  std::string start;        // start instruction (the op itself when synchronous); "" if unpaired
  std::string done;         // done instruction; "" for synchronous ops and unpaired starts
  std::string wrapper;      // opcode of the start, e.g. "async-start", "all-gather-start", ""
  std::int64_t start_line = 0;  // 1-based lines in the file; 0 = none
  std::int64_t done_line = 0;
  bool async = false;
  Status status = Status::kExposed;
  std::int64_t bytes = 0;                   // per execution; see the header comment
  bool bytes_known = true;                  // false: a shape could not be sized (bytes = 0)
  std::int64_t window_instructions = 0;     // instructions strictly between start and done
  std::int64_t window_compute = 0;          // compute instructions among them
  std::vector<std::string> compute_sample;  // the first few compute instructions in the window
  std::int64_t executions = 1;              // per module execution (trip-count weighted)
  bool executions_known = true;             // false: some enclosing loop has no known_trip_count
  std::string op_name;                      // metadata op_name of the start (or the done)
  bool in_truncated_computation = false;    // its computation was cut off by the end of the dump

  bool exposed() const { return status == Status::kExposed; }
  bool paired_or_sync() const {
    return status == Status::kOverlapped || status == Status::kExposed;
  }
};

// Totals over a group of collectives (a kind, a computation, everything). All counts except
// `instances` and `unpaired` are weighted by executions.
struct Totals {
  std::int64_t instances = 0;   // entries in the text
  std::int64_t executions = 0;  // weighted count
  std::int64_t bytes = 0;       // weighted bytes
  std::int64_t overlapped = 0;  // weighted count of overlapped pairs
  std::int64_t exposed = 0;     // weighted count of exposed pairs and synchronous ops
  std::int64_t exposed_bytes = 0;
  std::int64_t unpaired = 0;            // unpaired starts and dones (instances)
  std::int64_t executions_unknown = 0;  // instances whose executions are a lower bound

  void add(const Collective& collective);
};

struct KindTotals {
  std::string kind;
  Category category = Category::kOther;
  Totals totals;
};

struct ComputationTotals {
  std::string computation;
  std::int64_t executions = 1;
  bool executions_known = true;
  Totals totals;
};

// The schedule of one computation, kept for drawing (Options::keep_schedule).
struct ScheduledInstruction {
  enum class Role { kOther, kCompute, kStart, kUpdate, kDone, kSyncCollective, kCall };
  std::string name;
  std::string opcode;
  Role role = Role::kOther;
  bool compute = false;  // resolved: compute ops and while/call/conditional containing compute
};
struct Schedule {
  std::string computation;
  std::vector<ScheduledInstruction> instructions;
  // Indices into Analysis::collectives of the entries of this computation, and for each the
  // positions of its start and done in `instructions` (-1 = none).
  struct Window {
    std::size_t collective = 0;
    std::int64_t start = -1;
    std::int64_t done = -1;
  };
  std::vector<Window> windows;
};

struct Analysis {
  std::string file;    // as given (display name)
  std::string module;  // HloModule name
  bool scheduled = false;
  bool truncated = false;           // the dump ends early or breaks off at an error
  std::int64_t truncated_line = 0;  // where
  std::string truncation_reason;    // why
  std::int64_t computations = 0;    // computations read (complete or not)
  std::int64_t instructions = 0;
  std::int64_t lines = 0;
  std::uint64_t bytes_read = 0;
  std::vector<Collective> collectives;            // in file order
  std::vector<KindTotals> by_kind;                // sorted by kind
  std::vector<ComputationTotals> by_computation;  // computations with entries, file order
  Totals total;                                   // all entries
  Totals total_collectives;                       // category collective only
  // What the analysis skipped or could not read, each a note at "file:line" or "file" (logged at
  // info, as before they became Diagnostics); capped, see warnings_dropped. JSON `warnings`.
  std::vector<Diagnostic> diagnostics;
  std::int64_t warnings_dropped = 0;
  std::optional<Schedule> schedule;
};

struct Options {
  std::size_t block_bytes = std::size_t{256} << 10;         // bytes per read
  std::size_t max_statement_bytes = std::size_t{16} << 20;  // longer statements are an error
  std::string computation_regex;   // report only computations whose name matches (search); "" = all
  bool keep_schedule = false;      // fill Analysis::schedule (for --svg)
  std::size_t compute_sample = 4;  // compute names kept per window
  std::size_t max_warnings = 50;
  int threads = 0;              // see SplitOptions::threads (scan.h): 0 = automatic
  std::size_t piece_bytes = 0;  // see SplitOptions::piece_bytes: 0 = automatic (tests cut finer)
};

// Analyses `path` ("-" = stdin). Throws rtb::Error (with file and line) when nothing usable
// was read: not HLO text, no computation, unreadable. A dump that ends inside a computation or
// breaks off at bad text after complete computations is analysed up to there and returned
// with `truncated` set.
Analysis analyze_file(const std::string& path, const Options& options = {});
// The same on text in memory; `max_read` limits each read (tests of block boundaries).
Analysis analyze_text(std::string_view text, const std::string& name, const Options& options = {},
                      std::size_t max_read = SIZE_MAX);

}  // namespace rtb::hlo
