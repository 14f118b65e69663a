// The analyser behind analyze_file / analyze_text (analysis.h): a state machine over the
// statements of the splitter (scan.h), fed by the prefilter (prefilter.h), that turns every
// collective, copy and asynchronous op into a draft with its overlap window. analyzer.cc reads
// the statements (the hot path); analyzer_finish.cc resolves what needs the whole dump (the call
// graph's compute and executions) and builds the Analysis.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rtb/hlo/analysis.h"
#include "rtb/hlo/block_vector.h"
#include "rtb/hlo/call_graph.h"
#include "rtb/hlo/opcodes.h"
#include "rtb/hlo/scan.h"
#include "rtb/hlo/syntax.h"

namespace rtb::hlo {

struct CallSite {
  std::uint32_t computation;  // record of the caller
  std::uint32_t instruction;  // index in the caller
  std::uint32_t edge_begin;   // its edges (call-like kinds only)
  std::uint32_t edge_end;
  std::size_t name_begin;  // its name in the analyser's callsite_names_ (one string, not one
  std::size_t name_size;   // allocation per call site)
};

struct Draft {
  std::uint32_t record = kNone;       // computation record
  std::uint32_t computation = kNone;  // index into names_
  std::string kind;                   // empty: resolve through async_callee
  std::uint32_t async_callee = kNone;
  std::string start;
  std::string done;
  std::string wrapper;
  std::string op_name;
  std::int64_t start_line = 0;
  std::int64_t done_line = 0;
  std::int64_t start_instruction = -1;
  std::int64_t done_instruction = -1;
  std::uint32_t compute_at_start = 0;
  Status status = Status::kExposed;
  bool async = false;
  bool done_seen = false;
  std::int64_t bytes = 0;
  bool bytes_known = true;
  std::int64_t window_instructions = 0;
  std::int64_t window_compute = 0;
  std::uint32_t callsite_begin = 0;
  std::uint32_t callsite_end = 0;
  std::vector<std::string> sample;
  bool truncated = false;
};

struct OpenComputation {
  std::uint32_t record = kNone;
  std::string_view name;  // into the source's text when it stays put, else name_copy
  std::string name_copy;
  std::int64_t line = 0;
  std::uint32_t instructions = 0;
  std::uint32_t compute = 0;
  std::uint32_t first_callsite = 0;
  std::size_t first_draft = 0;
  std::unordered_map<std::string, std::uint32_t> open;  // start/update name -> draft
  // Drafts whose window is open and whose compute sample is not full yet: the compute
  // instructions met now are theirs (so compute names are read only while someone needs them).
  std::vector<std::uint32_t> sampling;
  std::vector<std::string> kinds;  // collective kinds seen, in order (for async wrappers)
  std::string root_opcode;         // the ROOT's opcode, unless root_tag says it
  std::uint16_t root_tag =
      0;  // a dropped ROOT's plain opcode (see kTagRootMask, prefilter.h), 0 = none
  std::vector<ScheduledInstruction> schedule;  // Options::keep_schedule only
  std::vector<std::uint32_t> schedule_callsites;

  void reset() {
    // clear() zeroes every bucket, and the bucket array never shrinks: after one computation
    // with many open windows, that was a memset per computation.
    if (!open.empty()) open.clear();
    sampling.clear();
    kinds.clear();
    root_opcode.clear();
    root_tag = 0;
    schedule.clear();
    schedule_callsites.clear();
    instructions = 0;
    compute = 0;
  }
};

class Analyzer {
 public:
  Analyzer(std::string name, const Options& options);
  // Reads `raw` to its end and returns the analysis (see analyze_file).
  Analysis run(ByteSource& raw);

 private:
  // The methods declared inline are defined and used in one file only (analyzer.cc, or
  // analyzer_finish.cc for summarize and build_schedule). The inline keeps the inliner's budget
  // they had when they were defined in the class, on the per-statement path.

  // ---- statements (analyzer.cc) ---------------------------------------------------------------

  // A statement a few places on: start loading the name table's slot it will need (lookups
  // land at random places of a large table; the filter hashed the name of a header or callee).
  inline void look_ahead(const StatementNote& note) const;
  // Applies what the filter dropped before a statement, in text order: instructions only
  // counted, a ROOT among them (see kPlainOpcodes) and the computation's closing `}`. Nothing
  // reads the root opcode before the close, and nothing happens between the `}` and the next
  // statement, so this gives what seeing the dropped statements themselves would have.
  inline void apply_dropped(std::uint32_t dropped, std::uint16_t tag);
  inline void on_statement(const Statement& st);
  inline void module_header(std::string_view body, std::int64_t line);
  inline void top_level(std::string_view body, std::int64_t line, std::int64_t depth_after);
  inline void open_computation(std::string_view body, std::int64_t line);
  inline void open_computation(std::string_view name, std::uint64_t hash, std::int64_t line);
  inline void close_computation(std::string_view body, std::int64_t line);
  // Ends the open computation (at its '}' or, truncated, at the end of the dump).
  inline void finish_computation(bool truncated);
  // `note`, when not null, is the filter's: for a fusion it names the callee (key, hash).
  inline void instruction(const InstructionHead& head, OpcodeRole role, std::int64_t line,
                          const StatementNote* note = nullptr);

  // ---- instruction kinds ----------------------------------------------------------------------

  inline void on_compute(const InstructionHead& head, const StatementNote* note);
  // A compute instruction in the windows of the drafts in current_.sampling.
  inline void sample_compute(std::string_view name);
  inline std::uint32_t on_call(const InstructionHead& head, std::uint32_t index, std::int64_t line);
  inline void on_sync(const InstructionHead& head, std::uint32_t index, std::int64_t line);
  inline void on_start(const InstructionHead& head, std::uint32_t index, std::int64_t line);
  inline void on_update(const InstructionHead& head, std::int64_t line);
  inline void on_done(const InstructionHead& head, std::uint32_t index, std::int64_t line);

  // ---- helpers --------------------------------------------------------------------------------

  inline Draft& new_draft();
  inline void note_kind(std::string_view kind);
  // The kind of an async start or done and its op_name. `generic_opcode` (async-start or
  // async-done) takes the kind its called computation runs, resolved at the end ("async" when
  // it names none); the others are named by their opcode. Returns the kind that the computation
  // of the instruction runs for note_kind ("" when unknown).
  inline std::string_view read_async_kind(Draft& draft, const InstructionHead& head,
                                          std::int64_t line, std::string_view generic_opcode);
  inline void set_bytes(Draft& draft, std::optional<std::int64_t> bytes, std::string_view shape,
                        std::int64_t line);
  // metadata op_name and (for async ops) calls= of a start/done/collective.
  inline void read_attributes(const InstructionHead& head, std::int64_t line, std::string* op_name,
                              std::string* callee);
  // An edge from the open computation.
  void add_edge(std::string_view callee_name, EdgeKind kind, std::int64_t trip_count) {
    graph_.add_edge(current_.record, callee_name, hash_name(callee_name), kind, trip_count);
  }
  // intern() of a plain opcode by its tag, remembered (every computation needs one of these).
  inline std::uint32_t plain_kind(std::uint16_t tag);
  inline std::uint32_t intern(std::string_view kind);
  bool matches(std::string_view computation) const;
  void warn(std::int64_t line, std::string message);
  inline void stop_at(std::int64_t line, const std::string& reason);

  // ---- after the last statement (analyzer_finish.cc) ------------------------------------------

  void finalize();
  // `name_of_collective`: each collective's computation as a name index of the call graph (a
  // computation's collectives are found by index, not by hashing its name once per collective).
  inline void summarize(const std::vector<std::uint32_t>& name_of_collective);
  inline void build_schedule(const std::vector<std::int64_t>& collective_of);
  bool callsite_has_compute(const CallSite& site) {
    return graph_.calls_compute(site.edge_begin, site.edge_end);
  }

  const Options& options_;
  std::optional<std::regex> filter_;
  Analysis result_;
  bool header_seen_ = false;
  bool stable_text_ = false;  // statements' text stays valid to the end (a contiguous source)
  std::int64_t last_line_ = 0;
  bool in_computation_ = false;
  std::int64_t closed_computations_ = 0;
  OpenComputation current_;
  CallGraph graph_;
  std::vector<CallSite> callsites_;
  std::string callsite_names_;
  BlockVector<Draft, 1024> drafts_;
  std::deque<std::string> kinds_;
  std::unordered_map<std::string_view, std::uint32_t> kind_ids_;
  std::array<std::uint32_t, std::size(kPlainOpcodes) + 1> plain_kinds_ = make_plain_kinds();

  static std::array<std::uint32_t, std::size(kPlainOpcodes) + 1> make_plain_kinds() {
    std::array<std::uint32_t, std::size(kPlainOpcodes) + 1> ids;
    ids.fill(kNone);
    return ids;
  }
  std::size_t best_schedule_entries_ = 0;
  std::vector<ScheduledInstruction> best_schedule_;
  std::vector<std::uint32_t> best_schedule_callsites_;
  std::string best_schedule_name_;
  std::pair<std::size_t, std::size_t> best_schedule_drafts_{0, 0};
};

}  // namespace rtb::hlo
