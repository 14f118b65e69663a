#include "rtb/hlo/analyzer.h"

#include <fmt/format.h>

#include <algorithm>

#include "rtb/base/error.h"
#include "rtb/base/text.h"
#include "rtb/hlo/prefilter.h"

namespace rtb::hlo {

namespace {

// Checks the first bytes: HLO text starts with `HloModule`.
class HeaderCheckSource : public ByteSource {
 public:
  explicit HeaderCheckSource(ByteSource& inner) : inner_(inner) {}
  const std::string& name() const override { return inner_.name(); }
  std::size_t read(char* buffer, std::size_t capacity) override {
    std::size_t n = inner_.read(buffer, capacity);
    if (!checked_) check(std::string_view(buffer, n), n == 0);
    return n;
  }
  std::string_view contiguous() override {
    std::string_view whole = inner_.contiguous();
    if (!whole.empty() && !checked_) check(whole.substr(0, 4096), true);
    return whole;
  }
  void release(std::size_t offset) override { inner_.release(offset); }

 private:
  void check(std::string_view bytes, bool at_end) {
    for (char c : bytes) {
      if (seen_.empty() && is_space(c)) {
        if (c == '\n') ++line_;
        continue;
      }
      seen_ += c;
      if (seen_.size() == kWord.size()) break;
    }
    if (seen_.size() < kWord.size() && !at_end) {
      if (seen_ == kWord.substr(0, seen_.size())) return;
    }
    checked_ = true;
    if (seen_ != kWord) {
      if (seen_.empty()) fail_at({}, 0, "empty input: no HLO module");
      fail_at({}, line_, "not an HLO module: the text does not start with 'HloModule'");
    }
  }

  static constexpr std::string_view kWord = "HloModule";
  ByteSource& inner_;
  bool checked_ = false;
  std::string seen_;
  std::int64_t line_ = 1;
};

}  // namespace

Analyzer::Analyzer(std::string name, const Options& options) : options_(options) {
  result_.file = std::move(name);
  if (!options_.computation_regex.empty()) {
    try {
      filter_.emplace(options_.computation_regex, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      fail("bad --computation regex '{}': {}", options_.computation_regex, e.what());
    }
  }
}

Analysis Analyzer::run(ByteSource& raw) {
  HeaderCheckSource source(raw);
  stable_text_ = !source.contiguous().empty();
  SplitOptions split;
  split.block_bytes = options_.block_bytes;
  split.max_statement_bytes = options_.max_statement_bytes;
  split.threads = options_.threads;
  split.piece_bytes = options_.piece_bytes;
  Prefilter prefilter(options_.keep_schedule);
  SplitEnd end;
  std::optional<Error> stopped;
  try {
    end = split_statements(
        source, split, [this](const Statement& s) { on_statement(s); }, &prefilter);
  } catch (const Error& e) {
    stopped = e;
  }
  // Instructions the filter dropped after the last statement it passed on (a dump that ends
  // inside a computation).
  if (!stopped) apply_dropped(end.pending.count, end.pending.tag);
  if (stopped) {
    stop_at(stopped->line(), stopped->message());
  } else if (!end.clean) {
    stop_at(end.line, end.message);
  } else if (in_computation_) {
    stop_at(end.lines, fmt::format("the dump ends inside computation {} (opened at line {})",
                                   current_.name, current_.line));
  } else if (end.partial_statement) {
    stop_at(end.lines, "the dump ends inside a statement");
  }
  result_.lines = std::max({end.lines, last_line_, result_.truncated_line});
  result_.bytes_read = end.bytes;
  if (!header_seen_ && !stopped) fail_at(result_.file, 1, "empty input: no HLO module");
  if (result_.computations == 0) {
    fail_at(result_.file, result_.lines, "no computation in the module '{}'", result_.module);
  }
  finalize();
  return std::move(result_);
}

// A statement a few places on: start loading the name table's slot it will need (lookups
// land at random places of a large table; the filter hashed the name of a header or callee).
void Analyzer::look_ahead(const StatementNote& note) const {
  if (note.hash != 0) graph_.prefetch(note.hash);
}

// Applies what the filter dropped before a statement, in text order: instructions only
// counted, a ROOT among them (see kPlainOpcodes) and the computation's closing `}`. Nothing
// reads the root opcode before the close, and nothing happens between the `}` and the next
// statement, so this gives what seeing the dropped statements themselves would have.
void Analyzer::apply_dropped(std::uint32_t dropped, std::uint16_t tag) {
  if (!in_computation_) return;
  current_.instructions += dropped;
  result_.instructions += dropped;
  std::uint16_t root_tag = tag & kTagRootMask;
  if (root_tag != 0) {
    current_.root_tag = root_tag;
    current_.root_opcode.clear();
  }
  if ((tag & kTagClosed) != 0) finish_computation(false);
}

void Analyzer::on_statement(const Statement& st) {
  if (st.ahead != nullptr) look_ahead(*st.ahead);
  if (st.note != nullptr) {
    const StatementNote& note = *st.note;
    apply_dropped(note.count, note.tag);
    if (note.kind == kNoteHeader) {
      last_line_ = st.line;
      if (note.hash == 0) return open_computation(note.key, st.line);
      return open_computation(note.key, note.hash, st.line);
    }
    if (note.kind >= kNoteInstruction && in_computation_ && st.depth_after == 1) {
      last_line_ = st.line;
      return instruction(*st.head, static_cast<OpcodeRole>(note.kind - kNoteInstruction), st.line,
                         &note);
    }
  }
  std::string_view text = st.text;
  std::int64_t line = st.line;
  // Point at the first visible line of the statement.
  std::size_t i = 0;
  while (i < text.size() && is_space(text[i])) {
    if (text[i] == '\n') ++line;
    ++i;
  }
  std::string_view body = text.substr(i);
  while (!body.empty() && is_space(body.back())) body.remove_suffix(1);
  last_line_ = line;
  if (body.empty() || is_comment(body)) return;
  if (!header_seen_) return module_header(body, line);
  if (!in_computation_) return top_level(body, line, st.depth_after);
  if (st.depth_after == 0) return close_computation(body, line);
  InstructionHead head;
  if (st.head != nullptr) {
    head = *st.head;
  } else if (parse_instruction_head(body, head) != HeadStatus::kOk) {
    std::string_view first = body.substr(0, std::min<std::size_t>(body.find('\n'), 60));
    fail_at({}, line, "expected an instruction 'name = shape opcode(...)', got '{}'", first);
  }
  instruction(head, opcode_role(head.opcode), line);
}

void Analyzer::module_header(std::string_view body, std::int64_t line) {
  if (!starts_with(body, "HloModule")) {
    fail_at({}, line, "not an HLO module: expected 'HloModule'");
  }
  std::string_view rest = trim(body.substr(9));
  std::size_t end = 0;
  while (end < rest.size() && rest[end] != ',' && !is_space(rest[end])) ++end;
  result_.module = std::string(rest.substr(0, end));
  result_.scheduled = body.find("is_scheduled=true") != std::string_view::npos;
  if (!result_.scheduled) {
    warn(line,
         "the module is not scheduled (no is_scheduled=true): text order is not a schedule, so "
         "overlap windows are only indicative");
  }
  header_seen_ = true;
}

void Analyzer::top_level(std::string_view body, std::int64_t line, std::int64_t depth_after) {
  if (depth_after == 1) return open_computation(body, line);
  if (starts_with(body, "HloModule")) fail_at({}, line, "a second HloModule in the same file");
  // Module-level sections of TPU dumps: FileNames, FunctionNames, FileLocations, StackFrames
  // and their numbered entries.
  if (body == "FileNames" || body == "FunctionNames" || body == "FileLocations" ||
      body == "StackFrames" || (body[0] >= '0' && body[0] <= '9')) {
    return;
  }
  if (body[0] == '}') fail_at({}, line, "'}}' outside a computation");
  std::string_view first = body.substr(0, std::min<std::size_t>(body.find('\n'), 60));
  warn(line, fmt::format("ignored text outside computations: '{}'", first));
}

void Analyzer::open_computation(std::string_view body, std::int64_t line) {
  std::string_view name = header_name(body);
  if (name.empty()) fail_at({}, line, "computation header without a name");
  open_computation(name, hash_name(name), line);
}

void Analyzer::open_computation(std::string_view name, std::uint64_t hash, std::int64_t line) {
  current_.reset();
  // The text of a mapped or in-memory dump stays readable to the end: a view saves copying
  // every computation's name (most are never needed again).
  if (stable_text_) {
    current_.name = name;
  } else {
    current_.name_copy.assign(name);
    current_.name = current_.name_copy;
  }
  current_.line = line;
  current_.record = graph_.record_for(hash);
  ComputationRecord& record = graph_.record(current_.record);
  if (record.defined) warn(line, fmt::format("computation {} is defined twice", name));
  record.defined = true;
  current_.first_callsite = static_cast<std::uint32_t>(callsites_.size());
  current_.first_draft = drafts_.size();
  in_computation_ = true;
  ++result_.computations;
}

void Analyzer::close_computation(std::string_view body, std::int64_t line) {
  if (body[0] != '}') fail_at({}, line, "expected '}}' closing computation {}", current_.name);
  finish_computation(false);
}

// Ends the open computation (at its '}' or, truncated, at the end of the dump).
void Analyzer::finish_computation(bool truncated) {
  ComputationRecord& record = graph_.record(current_.record);
  if (truncated) {
    for (std::size_t d = current_.first_draft; d < drafts_.size(); ++d) drafts_[d].truncated = true;
  }
  // What an async-start of this computation runs: its collectives, else its root op.
  if (current_.kinds.empty()) {
    record.wrapped_kind = current_.root_tag != 0
                              ? plain_kind(current_.root_tag)
                              : intern(current_.root_opcode.empty() ? std::string_view("async")
                                                                    : current_.root_opcode);
  } else {
    std::string wrapped;
    for (const std::string& kind : current_.kinds) {
      if (!wrapped.empty()) wrapped += '+';
      wrapped += kind;
    }
    record.wrapped_kind = intern(wrapped);
  }
  std::size_t entries = drafts_.size() - current_.first_draft;
  record.relevant = record.relevant || entries > 0;
  if (options_.keep_schedule && entries > 0 && entries > best_schedule_entries_ &&
      matches(current_.name)) {
    best_schedule_entries_ = entries;
    best_schedule_.swap(current_.schedule);
    best_schedule_callsites_.swap(current_.schedule_callsites);
    best_schedule_name_ = std::string(current_.name);
    best_schedule_drafts_ = {current_.first_draft, drafts_.size()};
  }
  in_computation_ = false;
  ++closed_computations_;
}

// `note`, when not null, is the filter's: for a fusion it names the callee (key, hash).
void Analyzer::instruction(const InstructionHead& head, OpcodeRole role, std::int64_t line,
                           const StatementNote* note) {
  std::uint32_t index = current_.instructions++;
  ++result_.instructions;
  if (head.root) {
    current_.root_opcode.assign(head.opcode);
    current_.root_tag = 0;
  }
  std::uint32_t callsite = kNone;
  switch (role) {
    case OpcodeRole::kOther:
      break;
    case OpcodeRole::kCompute:
      on_compute(head, note);
      break;
    case OpcodeRole::kCall:
      callsite = on_call(head, index, line);
      break;
    case OpcodeRole::kSync:
      on_sync(head, index, line);
      break;
    case OpcodeRole::kStart:
      on_start(head, index, line);
      break;
    case OpcodeRole::kUpdate:
      on_update(head, line);
      break;
    case OpcodeRole::kDone:
      on_done(head, index, line);
      break;
  }
  if (options_.keep_schedule) {
    using R = ScheduledInstruction::Role;
    static constexpr R kRoles[] = {R::kOther, R::kCompute, R::kCall, R::kSyncCollective,
                                   R::kStart, R::kUpdate,  R::kDone};
    ScheduledInstruction entry;
    entry.name = std::string(head.name);
    entry.opcode = std::string(head.opcode);
    entry.role = kRoles[static_cast<int>(role)];
    current_.schedule.push_back(std::move(entry));
    current_.schedule_callsites.push_back(callsite);
  }
}

void Analyzer::on_compute(const InstructionHead& head, const StatementNote* note) {
  if (!current_.sampling.empty()) sample_compute(head.name);
  ++current_.compute;
  graph_.record(current_.record).direct_compute = true;
  // A fusion's computation matters only if it holds collectives: keep the edge for executions.
  if (note != nullptr) {
    // The filter gives a fusion's callee (never hash 0) and nothing for other compute ops; so
    // the opcode's text, scanned on another core, is not read here.
    if (note->hash != 0)
      graph_.add_edge(current_.record, note->key, note->hash, EdgeKind::kFusion, -1);
    return;
  }
  if (!equals(head.opcode, "fusion")) return;
  std::string_view callee = fusion_callee(head.call);
  if (!callee.empty()) add_edge(callee, EdgeKind::kFusion, -1);
}

// A compute instruction in the windows of the drafts in current_.sampling.
void Analyzer::sample_compute(std::string_view name) {
  std::size_t kept = 0;
  for (std::uint32_t d : current_.sampling) {
    Draft& draft = drafts_[d];
    if (draft.done_seen) continue;
    if (draft.sample.size() < options_.compute_sample) draft.sample.emplace_back(name);
    if (draft.sample.size() < options_.compute_sample) current_.sampling[kept++] = d;
  }
  current_.sampling.resize(kept);
}

std::uint32_t Analyzer::on_call(const InstructionHead& head, std::uint32_t index,
                                std::int64_t line) {
  std::string_view operands;
  std::string_view attributes;
  if (!split_call(head.call, operands, attributes)) {
    fail_at({}, line, "unbalanced operand list of {}", head.name);
  }
  std::vector<std::pair<std::string_view, EdgeKind>> callees;
  std::optional<std::int64_t> trips;
  std::string_view key;
  std::string_view value;
  while (next_attribute(attributes, key, value)) {
    if (key == "body") {
      for (auto c : computation_refs(value)) callees.emplace_back(c, EdgeKind::kBody);
    } else if (key == "condition") {
      for (auto c : computation_refs(value)) callees.emplace_back(c, EdgeKind::kCondition);
    } else if (key == "to_apply") {
      for (auto c : computation_refs(value)) callees.emplace_back(c, EdgeKind::kCall);
    } else if (key == "branch_computations" || key == "true_computation" ||
               key == "false_computation") {
      for (auto c : computation_refs(value)) callees.emplace_back(c, EdgeKind::kBranch);
    } else if (key == "backend_config") {
      trips = known_trip_count(value);
    }
  }
  CallSite site;
  site.computation = current_.record;
  site.instruction = index;
  site.edge_begin = static_cast<std::uint32_t>(graph_.edges().size());
  site.name_begin = callsite_names_.size();
  site.name_size = head.name.size();
  callsite_names_.append(head.name);
  std::int64_t trip_count = head.opcode == "while" ? (trips ? *trips : -1) : 0;
  for (auto& [callee, kind] : callees) add_edge(callee, kind, trip_count);
  site.edge_end = static_cast<std::uint32_t>(graph_.edges().size());
  callsites_.push_back(std::move(site));
  graph_.record(current_.record).relevant = true;
  return static_cast<std::uint32_t>(callsites_.size() - 1);
}

void Analyzer::on_sync(const InstructionHead& head, std::uint32_t index, std::int64_t line) {
  Draft& draft = new_draft();
  draft.kind = std::string(head.opcode);
  draft.start = std::string(head.name);
  draft.start_line = line;
  draft.start_instruction = index;
  draft.status = Status::kExposed;
  set_bytes(draft, shape_bytes(head.shape), head.shape, line);
  read_attributes(head, line, &draft.op_name, nullptr);
  note_kind(draft.kind);
}

void Analyzer::on_start(const InstructionHead& head, std::uint32_t index, std::int64_t line) {
  std::uint32_t draft_index = static_cast<std::uint32_t>(drafts_.size());
  Draft& draft = new_draft();
  draft.async = true;
  draft.wrapper = std::string(head.opcode);
  draft.start = std::string(head.name);
  draft.start_line = line;
  draft.start_instruction = index;
  draft.compute_at_start = current_.compute;
  if (options_.compute_sample > 0) current_.sampling.push_back(draft_index);
  draft.status = Status::kUnpairedStart;
  std::string_view ran = read_async_kind(draft, head, line, "async-start");
  if (!ran.empty()) note_kind(ran);
  // Until a done is seen, the size comes from the start: a non-tuple start is its result; in a
  // tuple the destination of a copy or the data of a send/recv is element 0, and the result
  // of other starts element 1 (after the operands).
  std::optional<std::int64_t> guess;
  if (head.shape.front() != '(') {
    guess = shape_bytes(head.shape);
  } else if (auto elements = tuple_element_bytes(head.shape); elements && !elements->empty()) {
    bool first = head.opcode == "copy-start" || head.opcode == "send" || head.opcode == "recv" ||
                 elements->size() == 1;
    guess = first ? elements->front() : (*elements)[1];
  }
  set_bytes(draft, guess, head.shape, line);
  auto [it, inserted] = current_.open.emplace(std::string(head.name), draft_index);
  if (!inserted) {
    warn(line, fmt::format("{} is defined twice in computation {}", head.name, current_.name));
    it->second = draft_index;
  }
}

void Analyzer::on_update(const InstructionHead& head, std::int64_t line) {
  std::string_view operands;
  std::string_view attributes;
  if (!split_call(head.call, operands, attributes)) return;
  std::string operand(first_operand_name(operands));
  auto it = current_.open.find(operand);
  if (it == current_.open.end()) {
    warn(line, fmt::format("{} updates {}, which is not an open start in {}", head.name, operand,
                           current_.name));
    return;
  }
  std::uint32_t draft = it->second;
  current_.open[std::string(head.name)] = draft;
}

void Analyzer::on_done(const InstructionHead& head, std::uint32_t index, std::int64_t line) {
  std::string_view operands;
  std::string_view attributes;
  if (!split_call(head.call, operands, attributes)) {
    fail_at({}, line, "unbalanced operand list of {}", head.name);
  }
  std::string operand(first_operand_name(operands));
  auto it = current_.open.find(operand);
  std::optional<std::int64_t> done_bytes = shape_bytes(head.shape);
  if (it != current_.open.end() && !drafts_[it->second].done_seen) {
    Draft& draft = drafts_[it->second];
    draft.done_seen = true;
    draft.done = std::string(head.name);
    draft.done_line = line;
    draft.done_instruction = index;
    draft.status = Status::kExposed;  // until windows are resolved
    draft.window_instructions = index - draft.start_instruction - 1;
    draft.window_compute = current_.compute - draft.compute_at_start;
    // Call sites in the window, resolved after the whole file is read.
    auto first = callsites_.begin() + current_.first_callsite;
    auto lower = std::upper_bound(first, callsites_.end(), draft.start_instruction,
                                  [](std::int64_t value, const CallSite& site) {
                                    return value < static_cast<std::int64_t>(site.instruction);
                                  });
    draft.callsite_begin = static_cast<std::uint32_t>(lower - callsites_.begin());
    draft.callsite_end = static_cast<std::uint32_t>(callsites_.size());
    if (done_bytes && *done_bytes > 0) {
      draft.bytes = *done_bytes;
      draft.bytes_known = true;
    } else if (!done_bytes && draft.bytes == 0) {
      set_bytes(draft, done_bytes, head.shape, line);
    }
    if (draft.op_name.empty()) read_attributes(head, line, &draft.op_name, nullptr);
    current_.open.erase(it);
    return;
  }
  // A done without its start in this computation (pipelined across loop iterations, or the
  // start is missing): reported, not fatal.
  Draft& draft = new_draft();
  draft.async = true;
  draft.done = std::string(head.name);
  draft.done_line = line;
  draft.done_instruction = index;
  draft.done_seen = true;
  draft.status = Status::kUnpairedDone;
  read_async_kind(draft, head, line, "async-done");
  set_bytes(draft, done_bytes, head.shape, line);
}

Draft& Analyzer::new_draft() {
  Draft& draft = drafts_.emplace_back();
  draft.record = current_.record;
  draft.computation = graph_.name_record(current_.record, current_.name);
  return draft;
}

void Analyzer::note_kind(std::string_view kind) {
  if (std::find(current_.kinds.begin(), current_.kinds.end(), kind) == current_.kinds.end()) {
    current_.kinds.emplace_back(kind);
  }
}

std::string_view Analyzer::read_async_kind(Draft& draft, const InstructionHead& head,
                                           std::int64_t line, std::string_view generic_opcode) {
  std::string callee;
  read_attributes(head, line, &draft.op_name, &callee);
  if (head.opcode != generic_opcode) {
    draft.kind = std::string(sugar_kind(head.opcode));
    return draft.kind;
  }
  if (callee.empty()) {
    draft.kind = "async";
    return {};
  }
  draft.async_callee = graph_.record_for(callee);
  return "async";
}

void Analyzer::set_bytes(Draft& draft, std::optional<std::int64_t> bytes, std::string_view shape,
                         std::int64_t line) {
  if (bytes) {
    draft.bytes = *bytes;
    draft.bytes_known = true;
    return;
  }
  draft.bytes = 0;
  draft.bytes_known = false;
  warn(line, fmt::format("cannot size shape '{}'", shape.substr(0, 80)));
}

// metadata op_name and (for async ops) calls= of a start/done/collective.
void Analyzer::read_attributes(const InstructionHead& head, std::int64_t line, std::string* op_name,
                               std::string* callee) {
  std::string_view operands;
  std::string_view attributes;
  if (!split_call(head.call, operands, attributes)) {
    fail_at({}, line, "unbalanced operand list of {}", head.name);
  }
  std::string_view key;
  std::string_view value;
  while (next_attribute(attributes, key, value)) {
    if (key == "metadata") {
      if (op_name != nullptr) *op_name = metadata_op_name(value);
      return;  // metadata comes after calls= and before backend_config
    }
    if (key == "calls" && callee != nullptr) {
      auto refs = computation_refs(value);
      if (!refs.empty()) *callee = std::string(refs.front());
    }
  }
}

// intern() of a plain opcode by its tag, remembered (every computation needs one of these).
std::uint32_t Analyzer::plain_kind(std::uint16_t tag) {
  std::uint32_t& id = plain_kinds_[tag];
  if (id == kNone) id = intern(kPlainOpcodes[tag - 1]);
  return id;
}

std::uint32_t Analyzer::intern(std::string_view kind) {
  auto it = kind_ids_.find(kind);
  if (it != kind_ids_.end()) return it->second;
  const std::string& stored = kinds_.emplace_back(kind);  // a deque: views stay valid
  auto id = static_cast<std::uint32_t>(kinds_.size() - 1);
  kind_ids_.emplace(stored, id);
  return id;
}

bool Analyzer::matches(std::string_view computation) const {
  return !filter_ || std::regex_search(computation.begin(), computation.end(), *filter_);
}

void Analyzer::warn(std::int64_t line, std::string message) {
  if (result_.diagnostics.size() >= options_.max_warnings) {
    ++result_.warnings_dropped;
    return;
  }
  result_.diagnostics.push_back(
      {Severity::kNote, where_of(result_.file, line), std::move(message)});
}

void Analyzer::stop_at(std::int64_t line, const std::string& reason) {
  if (closed_computations_ == 0) {
    // Nothing usable (not one complete computation): the whole input is an error.
    throw Error(result_.file, line, reason);
  }
  if (in_computation_) finish_computation(true);
  result_.truncated = true;
  result_.truncated_line = line;
  result_.truncation_reason = reason;
}

}  // namespace rtb::hlo
