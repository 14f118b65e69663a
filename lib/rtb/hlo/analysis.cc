#include "rtb/hlo/analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <regex>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/memory.h"
#include "rtb/base/text.h"
#include "rtb/hlo/proto.h"
#include "rtb/hlo/scan.h"
#include "rtb/hlo/syntax.h"

namespace rtb::hlo {

std::string_view status_name(Status status) {
  switch (status) {
    case Status::kOverlapped:
      return "overlapped";
    case Status::kExposed:
      return "exposed";
    case Status::kUnpairedStart:
      return "unpaired-start";
    case Status::kUnpairedDone:
      return "unpaired-done";
  }
  return "exposed";
}

std::string_view category_name(Category category) {
  switch (category) {
    case Category::kCollective:
      return "collective";
    case Category::kCopy:
      return "copy";
    case Category::kOther:
      return "other";
  }
  return "other";
}

namespace {

constexpr std::int64_t kMaxCount = std::numeric_limits<std::int64_t>::max();
constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

std::int64_t sat_add(std::int64_t a, std::int64_t b) {
  return a > kMaxCount - b ? kMaxCount : a + b;
}
std::int64_t sat_mul(std::int64_t a, std::int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kMaxCount / b ? kMaxCount : a * b;
}

}  // namespace

void Totals::add(const Collective& c) {
  ++instances;
  if (!c.executions_known) ++executions_unknown;
  if (!c.paired_or_sync()) {
    ++unpaired;
    return;
  }
  executions = sat_add(executions, c.executions);
  std::int64_t weighted = sat_mul(c.bytes, c.executions);
  bytes = sat_add(bytes, weighted);
  if (c.status == Status::kOverlapped) {
    overlapped = sat_add(overlapped, c.executions);
  } else {
    exposed = sat_add(exposed, c.executions);
    exposed_bytes = sat_add(exposed_bytes, weighted);
  }
}

namespace {

// ---- opcode roles -------------------------------------------------------------------------------

enum class Role : std::uint8_t { kOther, kCompute, kCall, kSync, kStart, kUpdate, kDone };

inline bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         std::memcmp(text.data() + text.size() - suffix.size(), suffix.data(), suffix.size()) == 0;
}

inline bool starts_with(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() &&
         std::memcmp(text.data(), prefix.data(), prefix.size()) == 0;
}

inline bool is_comment(std::string_view body) {
  return body.size() >= 2 && body[0] == '/' && body[1] == '/';
}

// `text` == `literal`, with the length a constant: the compiler compares in a few loads where
// std::string_view's == calls memcmp (this runs for every instruction of the dump).
template <std::size_t N>
inline bool equals(std::string_view text, const char (&literal)[N]) {
  return text.size() == N - 1 && std::memcmp(text.data(), literal, N - 1) == 0;
}

Role classify(std::string_view op) {
  switch (op.size()) {
    case 3:
      if (equals(op, "dot")) return Role::kCompute;
      break;
    case 4:
      if (equals(op, "call")) return Role::kCall;
      if (equals(op, "send") || equals(op, "recv")) return Role::kStart;
      break;
    case 5:
      if (equals(op, "while")) return Role::kCall;
      break;
    case 6:
      if (equals(op, "fusion")) return Role::kCompute;
      break;
    case 10:
      if (equals(op, "all-gather") || equals(op, "all-reduce") || equals(op, "all-to-all"))
        return Role::kSync;
      break;
    case 11:
      if (equals(op, "custom-call") || equals(op, "convolution")) return Role::kCompute;
      if (equals(op, "conditional")) return Role::kCall;
      break;
    case 14:
      if (equals(op, "reduce-scatter")) return Role::kSync;
      break;
    case 17:
      if (equals(op, "ragged-all-to-all")) return Role::kSync;
      break;
    case 18:
      if (equals(op, "collective-permute")) return Role::kSync;
      break;
    case 20:
      if (equals(op, "collective-broadcast")) return Role::kSync;
      break;
    default:
      break;
  }
  if (op.size() > 5 && op.back() == 't' && ends_with(op, "-start")) return Role::kStart;
  if (op.size() > 4 && op.back() == 'e') {
    if (ends_with(op, "-done")) return Role::kDone;
    if (ends_with(op, "-update")) return Role::kUpdate;
  }
  return Role::kOther;
}

// XLA's opcodes that play no role here (Role::kOther), sorted. The scanning thread drops a ROOT
// with one of these opcodes (about one instruction in eight) and hands over only its index + 1
// (StatementNote::tag) with the next statement it passes on; the analysis needs a computation's
// root opcode only to name what an async-start wrapping the computation runs. A ROOT whose
// opcode is not in the table is passed on as before.
constexpr std::string_view kPlainOpcodes[] = {
    "abs",
    "add",
    "add-dependency",
    "after-all",
    "and",
    "atan2",
    "batch-norm-grad",
    "batch-norm-inference",
    "batch-norm-training",
    "bitcast",
    "bitcast-convert",
    "broadcast",
    "cbrt",
    "ceil",
    "cholesky",
    "clamp",
    "clz",
    "compare",
    "complex",
    "concatenate",
    "constant",
    "convert",
    "copy",
    "cosine",
    "divide",
    "domain",
    "dynamic-reshape",
    "dynamic-slice",
    "dynamic-update-slice",
    "erf",
    "exponential",
    "exponential-minus-one",
    "fft",
    "floor",
    "gather",
    "get-dimension-size",
    "get-tuple-element",
    "imag",
    "infeed",
    "iota",
    "is-finite",
    "log",
    "log-plus-one",
    "logistic",
    "map",
    "maximum",
    "minimum",
    "multiply",
    "negate",
    "not",
    "opt-barrier",
    "or",
    "outfeed",
    "pad",
    "parameter",
    "partition-id",
    "popcnt",
    "power",
    "real",
    "reduce",
    "reduce-precision",
    "reduce-window",
    "remainder",
    "replica-id",
    "reshape",
    "reverse",
    "rng",
    "rng-bit-generator",
    "rng-get-and-update-state",
    "round-nearest-afz",
    "round-nearest-even",
    "rsqrt",
    "scatter",
    "select",
    "select-and-scatter",
    "set-dimension-size",
    "shift-left",
    "shift-right-arithmetic",
    "shift-right-logical",
    "sign",
    "sine",
    "slice",
    "sort",
    "sqrt",
    "stochastic-convert",
    "subtract",
    "tan",
    "tanh",
    "topk",
    "transpose",
    "triangular-solve",
    "tuple",
    "xor",
};

// Index + 1 of `opcode` in kPlainOpcodes, 0 if it is not there: an open-addressing table built
// at compile time (about one probe per lookup; a binary search cost 1.5% of the CPU time).
constexpr std::size_t kTagSlots = 256;

constexpr std::size_t opcode_slot(std::string_view op) {
  if (op.empty()) return 0;
  auto byte = [&](std::size_t i) {
    return static_cast<std::size_t>(static_cast<unsigned char>(op[i]));
  };
  return (op.size() * 37 + byte(0) * 5 + byte(op.size() / 2) + byte(op.size() - 1) * 11) %
         kTagSlots;
}

constexpr std::array<std::uint8_t, kTagSlots> make_tag_slots() {
  static_assert(std::size(kPlainOpcodes) < kTagSlots / 2);
  std::array<std::uint8_t, kTagSlots> slots{};
  for (std::size_t i = 0; i < std::size(kPlainOpcodes); ++i) {
    std::size_t slot = opcode_slot(kPlainOpcodes[i]);
    while (slots[slot] != 0) slot = (slot + 1) % kTagSlots;
    slots[slot] = static_cast<std::uint8_t>(i + 1);
  }
  return slots;
}

constexpr std::array<std::uint8_t, kTagSlots> kTagSlotTable = make_tag_slots();

constexpr std::uint16_t plain_opcode_tag(std::string_view opcode) {
  for (std::size_t slot = opcode_slot(opcode);; slot = (slot + 1) % kTagSlots) {
    std::uint8_t tag = kTagSlotTable[slot];
    if (tag == 0) return 0;
    // A byte loop: opcodes are short, and std::string_view's == calls memcmp.
    std::string_view candidate = kPlainOpcodes[tag - 1];
    if (candidate.size() == opcode.size()) {
      std::size_t i = 0;
      while (i < opcode.size() && candidate[i] == opcode[i]) ++i;
      if (i == opcode.size()) return tag;
    }
  }
}

constexpr bool every_plain_opcode_found() {
  for (std::size_t i = 0; i < std::size(kPlainOpcodes); ++i) {
    if (plain_opcode_tag(kPlainOpcodes[i]) != i + 1) return false;
  }
  return plain_opcode_tag("fusion") == 0 && plain_opcode_tag("all-gather-start") == 0;
}
static_assert(every_plain_opcode_found());

bool is_collective_kind(std::string_view kind) {
  static constexpr std::string_view kKinds[] = {"all-gather",
                                                "all-reduce",
                                                "reduce-scatter",
                                                "all-to-all",
                                                "ragged-all-to-all",
                                                "collective-permute",
                                                "collective-broadcast",
                                                "send",
                                                "recv"};
  return std::find(std::begin(kKinds), std::end(kKinds), kind) != std::end(kKinds);
}

Category category_of(std::string_view kind) {
  if (kind == "copy") return Category::kCopy;
  bool any = false;
  while (!kind.empty()) {
    std::size_t plus = kind.find('+');
    if (!is_collective_kind(kind.substr(0, plus))) return Category::kOther;
    any = true;
    if (plus == std::string_view::npos) break;
    kind.remove_prefix(plus + 1);
  }
  return any ? Category::kCollective : Category::kOther;
}

// The op a `*-start` / `*-done` / `*-update` stands for: "all-gather-start" -> "all-gather".
std::string_view sugar_kind(std::string_view opcode) {
  if (opcode == "send" || opcode == "recv") return opcode;
  if (opcode == "send-done") return "send";
  if (opcode == "recv-done") return "recv";
  for (std::string_view suffix : {"-start", "-done", "-update"}) {
    if (ends_with(opcode, suffix) && opcode.size() > suffix.size()) {
      return opcode.substr(0, opcode.size() - suffix.size());
    }
  }
  return opcode.empty() ? std::string_view("async") : opcode;
}

// Never 0, which notes use for "no hash" (the name table maps 0 to 1 anyway).
std::uint64_t hash_name(std::string_view name) {
  std::uint64_t hash = std::hash<std::string_view>{}(name);
  return hash == 0 ? 1 : hash;
}

// Computation name hash -> record index. An open-addressing table: a dump has one entry per
// computation (hundreds of thousands in a large one), and a node-based map spent more time in
// malloc and cache misses than the rest of the reader. A slot keeps the hash's high 32 bits and
// the value (8 bytes: half the fresh memory and cache misses of a full key); the caller confirms
// a match against the rest of the key, which it keeps with the value.
class FlatIndex {
 public:
  // Starts loading the slot where `key` would be (the lookups land at random places of a large
  // table: with the hash known a few statements ahead, the cache miss overlaps other work).
  void prefetch(std::uint64_t key) const {
    if (slots_.size() == 0) return;
    __builtin_prefetch(&slots_[fingerprint(key) & (slots_.size() - 1)]);
  }

  // The value stored for `key`, or `value` after inserting it; `inserted` tells which.
  // `same_key(v)` tells whether the entry stored with value v has this key (asked only when the
  // high 32 bits agree).
  template <typename SameKey>
  std::uint32_t find_or_insert(std::uint64_t key, std::uint32_t value, bool& inserted,
                               SameKey same_key) {
    const std::uint32_t print = fingerprint(key);
    if (slots_.size() == 0) slots_ = Slots(1024, PageAdvice::kHugePages);
    if ((size_ + 1) * 2 > slots_.size()) grow();
    std::size_t mask = slots_.size() - 1;
    for (std::size_t i = print & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];  // fingerprint and value side by side: one cache miss per probe
      if (slot.print == print && same_key(slot.value)) {
        inserted = false;
        return slot.value;
      }
      if (slot.print == 0) {
        slot = Slot{print, value};
        ++size_;
        inserted = true;
        return value;
      }
    }
  }

 private:
  struct Slot {
    std::uint32_t print = 0;  // 0 marks an empty slot
    std::uint32_t value = 0;
  };

  // The high 32 bits (never 0); the slot index comes from them too, so growing the table needs
  // nothing but the slots.
  static std::uint32_t fingerprint(std::uint64_t key) {
    std::uint32_t print = static_cast<std::uint32_t>(key >> 32);
    return print == 0 ? 1 : print;
  }

  // The slots live in an anonymous mapping (zero-filled: all empty) with transparent huge pages
  // requested: a dump of a few hundred thousand computations makes the table tens of MiB, and
  // probes at random positions then missed the TLB as well as the cache with 4 KiB pages.
  using Slots = LargeArray<Slot>;

  void grow() {
    Slots old = std::move(slots_);
    slots_ = Slots(old.size() * 2, PageAdvice::kHugePages);
    std::size_t mask = slots_.size() - 1;
    for (std::size_t k = 0; k < old.size(); ++k) {
      const Slot& slot = old[k];
      if (slot.print == 0) continue;
      std::size_t i = slot.print & mask;
      while (slots_[i].print != 0) i = (i + 1) & mask;
      slots_[i] = slot;
    }
  }

  Slots slots_;
  std::size_t size_ = 0;
};

// ---- state --------------------------------------------------------------------------------------

enum class EdgeKind : std::uint8_t { kBody, kCondition, kCall, kBranch, kAsync, kFusion, kOther };

struct Edge {
  std::uint32_t caller;
  std::uint32_t callee;
  EdgeKind kind;
  std::int64_t trip_count;  // body/condition: -1 = unknown
};

// One per computation (defined or referenced): 20 bytes, as a dump can have very many.
struct ComputationRecord {
  std::uint32_t hash_low = 0;  // the low 32 bits of the name's hash (the name table has the rest)
  bool defined = false;
  bool relevant = false;  // has entries or edges (matters for executions)
  bool direct_compute = false;
  std::uint8_t compute_state = 0;  // resolution: 0 = not yet, 1 = visiting, 2 = yes, 3 = no
  bool async_wrapped = false;
  bool executions_known = true;        // set by compute_executions
  std::uint32_t wrapped_kind = kNone;  // interned kind an async-start of this runs
  std::uint32_t name_index = kNone;    // into names_ (computations with entries or callees)
};
static_assert(sizeof(ComputationRecord) <= 20, "one per computation: keep it small");

struct CallSite {
  std::uint32_t computation;  // record of the caller
  std::uint32_t instruction;  // index in the caller
  std::uint32_t edge_begin;   // its edges (call-like kinds only)
  std::uint32_t edge_end;
  std::size_t name_begin;  // its name in the analyser's callsite_names_ (one string, not one
  std::size_t name_size;   // allocation per call site)
};

// A growing sequence in blocks of kPerBlock elements that never move: growing it neither copies
// the elements nor touches memory twice, and it allocates once per block (a std::deque of a
// type this large allocates once per element).
template <typename T, std::size_t kPerBlock>
class BlockVector {
 public:
  BlockVector() = default;
  BlockVector(const BlockVector&) = delete;
  BlockVector& operator=(const BlockVector&) = delete;
  ~BlockVector() {
    for (std::size_t i = 0; i < size_; ++i) at(i)->~T();
  }

  T& emplace_back() {
    if (size_ == blocks_.size() * kPerBlock) blocks_.push_back(std::make_unique<Slot[]>(kPerBlock));
    T* element = new (at(size_)) T();
    ++size_;
    return *element;
  }
  T& operator[](std::size_t i) { return *std::launder(at(i)); }
  const T& operator[](std::size_t i) const { return *std::launder(at(i)); }
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    alignas(T) std::byte bytes[sizeof(T)];
  };
  T* at(std::size_t i) const {
    return reinterpret_cast<T*>(blocks_[i / kPerBlock][i % kPerBlock].bytes);
  }

  std::vector<std::unique_ptr<Slot[]>> blocks_;
  std::size_t size_ = 0;
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
  std::uint16_t root_tag = 0;      // a dropped ROOT's plain opcode (see kTagRootMask), 0 = none
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

// Checks the first bytes: HLO text starts with `HloModule`.
class HeaderCheckSource : public ByteSource {
 public:
  explicit HeaderCheckSource(ByteSource& inner) : inner_(inner) {}
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

// The name of the computation a computation header opens (`ENTRY %main (...) -> ... {`), empty
// if there is none.
std::string_view header_name(std::string_view body) {
  if (starts_with(body, "ENTRY") && body.size() > 5 && is_space(body[5])) {
    body = trim(body.substr(5));
  }
  return strip_percent(body.substr(0, header_token_length(body)));
}

// The computation a fusion calls (`calls=%fused_computation.3`), empty if not found. XLA prints
// `calls=` before any quoted attribute (metadata, backend_config), so a plain search up to the
// first quote finds it without walking the attributes.
std::string_view fusion_callee(std::string_view call) {
  std::size_t quote = call.find('"');
  std::size_t at = call.substr(0, quote).find("calls=");
  if (at == std::string_view::npos || at == 0 || (call[at - 1] != ' ' && call[at - 1] != ',')) {
    return {};
  }
  std::string_view rest = call.substr(at + 6);
  std::size_t end = 0;
  while (end < rest.size() && rest[end] != ',' && !is_space(rest[end])) ++end;
  std::string_view value = rest.substr(0, end);
  if (value.empty() || value.front() == '{') return {};
  return strip_percent(value);
}

// What the filter tells the analyser about a statement (StatementNote::kind).
enum NoteKind : std::uint8_t {
  kNoteNone = 0,     // nothing known: the analyser reads the statement itself
  kNoteHeader,       // a computation header starting on the statement's first line; key =
                     // its name and hash its hash (hash 0: key is the text, without a name)
  kNoteInstruction,  // an instruction with the splitter's head, starting on the statement's
                     // first line; + Role. A fusion's key and hash: the computation it calls.
};

// StatementNote::tag: the index + 1 of a dropped ROOT's opcode in kPlainOpcodes (low bits), and
// whether a computation's closing `}` line was dropped before the statement.
constexpr std::uint16_t kTagRootMask = 0x7fff;
constexpr std::uint16_t kTagClosed = 0x8000;

// The statement filter of the pipelined reader (hlo_scan.h), run on the scanning thread. It
// follows the analyser's state machine (module header, computations) and does the stateless
// part of the work while the text is hot in that core's cache: trimming, the opcode's role, the
// names and hashes of computation headers and fusion callees. Instructions that matter to
// nobody (role kOther: most of a dump) are dropped and only counted, so that the analysing
// thread does not touch their text at all; so are a computation's plain `}` line and its ROOT
// when the opcode is in kPlainOpcodes. StatementNote::count carries the number of instructions
// dropped since the previous statement passed on, StatementNote::tag the ROOT and the `}`.
//
// The pending note (see StatementFilter) is the count and tag not yet passed on; merging adds
// the counts and joins the tags (a piece starts at top level, so at most one side has a ROOT
// and a `}` flag that matter for the same computation).
class Prefilter final : public StatementFilter {
 public:
  explicit Prefilter(bool keep_all, bool header_seen = false)
      : keep_all_(keep_all), header_seen_(header_seen) {}

  std::unique_ptr<StatementFilter> fork() const override {
    return std::make_unique<Prefilter>(keep_all_, true);
  }

  StatementNote pending() const override {
    StatementNote note;
    note.count = dropped_;
    note.tag = tag();
    return note;
  }

  void merge_pending(const StatementNote& earlier, StatementNote& later) const override {
    later.count += earlier.count;
    // The ROOT tag belongs to the computation the earlier statements were in; a later note of
    // a new piece has none of its own before its first header.
    if ((later.tag & kTagRootMask) == 0) later.tag |= earlier.tag & kTagRootMask;
    later.tag |= earlier.tag & kTagClosed;
  }

  bool keep(const Statement& s, StatementNote& note) override {
    std::string_view text = s.text;
    std::size_t i = 0;
    bool newline = false;  // the statement starts with blank lines
    while (i < text.size() && is_space(text[i])) {
      newline = newline || text[i] == '\n';
      ++i;
    }
    std::string_view body = text.substr(i);
    while (!body.empty() && is_space(body.back())) body.remove_suffix(1);
    if (body.empty() || is_comment(body)) return false;  // the analyser ignores them
    if (!header_seen_) {
      header_seen_ = true;
      return pass(note);
    }
    if (!in_computation_) {
      if (s.depth_after != 1) return pass(note);
      in_computation_ = true;
      // The name and its hash, found here: the scanning threads have time to spare, the
      // analysing one has not. (A header without a name goes on as text: the analyser reports.)
      if (!newline) {
        note.kind = kNoteHeader;
        note.key = body;
        if (std::string_view name = header_name(body); !name.empty()) {
          note.key = name;
          note.hash = hash_name(name);
        }
      }
      return pass(note);
    }
    if (s.depth_after == 0) {
      in_computation_ = false;
      // A plain `}` (one per computation) is only flagged on the next statement passed on.
      if (body.size() == 1 && body[0] == '}' && !keep_all_) {
        closed_ = true;
        return false;
      }
      return pass(note);
    }
    if (s.head == nullptr || newline) return pass(note);
    Role role = classify(s.head->opcode);
    if (role == Role::kOther && !keep_all_) {
      if (!s.head->root) {
        ++dropped_;
        return false;
      }
      if (std::uint16_t tag = plain_opcode_tag(s.head->opcode); tag != 0) {
        ++dropped_;
        dropped_root_ = tag;
        return false;
      }
    }
    note.kind = static_cast<std::uint8_t>(kNoteInstruction + static_cast<std::uint8_t>(role));
    if (role == Role::kCompute && equals(s.head->opcode, "fusion")) {
      // The fused computation it calls, for the analyser's call graph (key and hash).
      if (std::string_view callee = fusion_callee(s.head->call); !callee.empty()) {
        note.key = callee;
        note.hash = hash_name(callee);
      }
    }
    return pass(note);
  }

 private:
  std::uint16_t tag() const { return dropped_root_ | (closed_ ? kTagClosed : 0); }

  bool pass(StatementNote& note) {
    note.count = dropped_;
    note.tag = tag();
    dropped_ = 0;
    dropped_root_ = 0;
    closed_ = false;
    return true;
  }

  bool keep_all_;
  bool header_seen_ = false;
  bool in_computation_ = false;
  std::uint32_t dropped_ = 0;
  std::uint16_t dropped_root_ = 0;  // the tag of a ROOT dropped since the last pass
  bool closed_ = false;             // a `}` dropped since the last pass
};

// Edges grouped by caller in flat arrays (compressed rows over the callers only): a dump has
// hundreds of thousands of computations, most without edges, and arrays per computation cost
// more in fresh memory (page faults) than the rest of the finishing work.
struct Adjacency {
  std::vector<std::uint32_t> callers;  // sorted: the records with at least one kept edge
  std::vector<std::uint32_t> begin;    // per caller: its first item; one more at the end
  std::vector<std::uint32_t> items;    // edge indices (or what the owner replaces them with)

  template <typename Keep>
  void build(const std::vector<Edge>& edges, Keep keep) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> kept;  // (caller, edge), edge order
    for (std::uint32_t e = 0; e < edges.size(); ++e) {
      if (keep(edges[e])) kept.emplace_back(edges[e].caller, e);
    }
    std::sort(kept.begin(), kept.end());
    callers.clear();
    begin.clear();
    items.clear();
    items.reserve(kept.size());
    for (const auto& [caller, e] : kept) {
      if (callers.empty() || callers.back() != caller) {
        callers.push_back(caller);
        begin.push_back(static_cast<std::uint32_t>(items.size()));
      }
      items.push_back(e);
    }
    begin.push_back(static_cast<std::uint32_t>(items.size()));
  }

  std::span<const std::uint32_t> list(std::uint32_t record) const {
    auto it = std::lower_bound(callers.begin(), callers.end(), record);
    if (it == callers.end() || *it != record) return {};
    std::size_t k = static_cast<std::size_t>(it - callers.begin());
    return std::span<const std::uint32_t>(items).subspan(begin[k], begin[k + 1] - begin[k]);
  }
};

class Analyzer {
 public:
  Analyzer(std::string name, const Options& options) : options_(options) {
    result_.file = std::move(name);
    if (!options_.computation_regex.empty()) {
      try {
        filter_.emplace(options_.computation_regex, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        fail("bad --computation regex '{}': {}", options_.computation_regex, e.what());
      }
    }
  }

  Analysis run(ByteSource& raw) {
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

 private:
  // ---- statements -------------------------------------------------------------------------------

  // A statement a few places on: start loading the name table's slot it will need (lookups
  // land at random places of a large table; the filter hashed the name of a header or callee).
  void look_ahead(const StatementNote& note) const {
    if (note.hash != 0) record_index_.prefetch(note.hash);
  }

  // Applies what the filter dropped before a statement, in text order: instructions only
  // counted, a ROOT among them (see kPlainOpcodes) and the computation's closing `}`. Nothing
  // reads the root opcode before the close, and nothing happens between the `}` and the next
  // statement, so this gives what seeing the dropped statements themselves would have.
  void apply_dropped(std::uint32_t dropped, std::uint16_t tag) {
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

  void on_statement(const Statement& st) {
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
        return instruction(*st.head, static_cast<Role>(note.kind - kNoteInstruction), st.line,
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
    instruction(head, classify(head.opcode), line);
  }

  void module_header(std::string_view body, std::int64_t line) {
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

  void top_level(std::string_view body, std::int64_t line, std::int64_t depth_after) {
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

  void open_computation(std::string_view body, std::int64_t line) {
    std::string_view name = header_name(body);
    if (name.empty()) fail_at({}, line, "computation header without a name");
    open_computation(name, hash_name(name), line);
  }

  void open_computation(std::string_view name, std::uint64_t hash, std::int64_t line) {
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
    current_.record = record_for(hash);
    ComputationRecord& record = records_[current_.record];
    if (record.defined) warn(line, fmt::format("computation {} is defined twice", name));
    record.defined = true;
    current_.first_callsite = static_cast<std::uint32_t>(callsites_.size());
    current_.first_draft = drafts_.size();
    in_computation_ = true;
    ++result_.computations;
  }

  void close_computation(std::string_view body, std::int64_t line) {
    if (body[0] != '}') fail_at({}, line, "expected '}}' closing computation {}", current_.name);
    finish_computation(false);
  }

  // Ends the open computation (at its '}' or, truncated, at the end of the dump).
  void finish_computation(bool truncated) {
    ComputationRecord& record = records_[current_.record];
    if (truncated) {
      for (std::size_t d = current_.first_draft; d < drafts_.size(); ++d)
        drafts_[d].truncated = true;
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
  void instruction(const InstructionHead& head, Role role, std::int64_t line,
                   const StatementNote* note = nullptr) {
    std::uint32_t index = current_.instructions++;
    ++result_.instructions;
    if (head.root) {
      current_.root_opcode.assign(head.opcode);
      current_.root_tag = 0;
    }
    std::uint32_t callsite = kNone;
    switch (role) {
      case Role::kOther:
        break;
      case Role::kCompute:
        on_compute(head, note);
        break;
      case Role::kCall:
        callsite = on_call(head, index, line);
        break;
      case Role::kSync:
        on_sync(head, index, line);
        break;
      case Role::kStart:
        on_start(head, index, line);
        break;
      case Role::kUpdate:
        on_update(head, line);
        break;
      case Role::kDone:
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

  // ---- instruction kinds ------------------------------------------------------------------------

  void on_compute(const InstructionHead& head, const StatementNote* note) {
    if (!current_.sampling.empty()) sample_compute(head.name);
    ++current_.compute;
    records_[current_.record].direct_compute = true;
    // A fusion's computation matters only if it holds collectives: keep the edge for executions.
    if (note != nullptr) {
      // The filter gives a fusion's callee (never hash 0) and nothing for other compute ops; so
      // the opcode's text, scanned on another core, is not read here.
      if (note->hash != 0) add_edge(note->key, note->hash, EdgeKind::kFusion, -1);
      return;
    }
    if (!equals(head.opcode, "fusion")) return;
    std::string_view callee = fusion_callee(head.call);
    if (!callee.empty()) add_edge(callee, EdgeKind::kFusion, -1);
  }

  // A compute instruction in the windows of the drafts in current_.sampling.
  void sample_compute(std::string_view name) {
    std::size_t kept = 0;
    for (std::uint32_t d : current_.sampling) {
      Draft& draft = drafts_[d];
      if (draft.done_seen) continue;
      if (draft.sample.size() < options_.compute_sample) draft.sample.emplace_back(name);
      if (draft.sample.size() < options_.compute_sample) current_.sampling[kept++] = d;
    }
    current_.sampling.resize(kept);
  }

  std::uint32_t on_call(const InstructionHead& head, std::uint32_t index, std::int64_t line) {
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
    site.edge_begin = static_cast<std::uint32_t>(edges_.size());
    site.name_begin = callsite_names_.size();
    site.name_size = head.name.size();
    callsite_names_.append(head.name);
    std::int64_t trip_count = head.opcode == "while" ? (trips ? *trips : -1) : 0;
    for (auto& [callee, kind] : callees) add_edge(callee, kind, trip_count);
    site.edge_end = static_cast<std::uint32_t>(edges_.size());
    callsites_.push_back(std::move(site));
    records_[current_.record].relevant = true;
    return static_cast<std::uint32_t>(callsites_.size() - 1);
  }

  void on_sync(const InstructionHead& head, std::uint32_t index, std::int64_t line) {
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

  void on_start(const InstructionHead& head, std::uint32_t index, std::int64_t line) {
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
    std::string callee;
    read_attributes(head, line, &draft.op_name, &callee);
    if (head.opcode == "async-start") {
      if (callee.empty()) {
        draft.kind = "async";
      } else {
        draft.async_callee = record_for(callee);
        note_kind("async");
      }
    } else {
      draft.kind = std::string(sugar_kind(head.opcode));
      note_kind(draft.kind);
    }
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

  void on_update(const InstructionHead& head, std::int64_t line) {
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

  void on_done(const InstructionHead& head, std::uint32_t index, std::int64_t line) {
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
    std::string callee;
    read_attributes(head, line, &draft.op_name, &callee);
    if (head.opcode == "async-done") {
      if (callee.empty()) {
        draft.kind = "async";
      } else {
        draft.async_callee = record_for(callee);
      }
    } else {
      draft.kind = std::string(sugar_kind(head.opcode));
    }
    set_bytes(draft, done_bytes, head.shape, line);
  }

  // ---- helpers ----------------------------------------------------------------------------------

  Draft& new_draft() {
    Draft& draft = drafts_.emplace_back();
    draft.record = current_.record;
    ComputationRecord& record = records_[current_.record];
    if (record.name_index == kNone) {
      record.name_index = static_cast<std::uint32_t>(names_.size());
      names_.emplace_back(current_.name);
    }
    draft.computation = record.name_index;
    return draft;
  }

  void note_kind(const std::string& kind) {
    if (std::find(current_.kinds.begin(), current_.kinds.end(), kind) == current_.kinds.end()) {
      current_.kinds.push_back(kind);
    }
  }

  void set_bytes(Draft& draft, std::optional<std::int64_t> bytes, std::string_view shape,
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
  void read_attributes(const InstructionHead& head, std::int64_t line, std::string* op_name,
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

  std::uint32_t record_for(std::string_view name) { return record_for(hash_name(name)); }

  std::uint32_t record_for(std::uint64_t hash) {
    bool inserted = false;
    const auto low = static_cast<std::uint32_t>(hash);
    std::uint32_t index = record_index_.find_or_insert(
        hash, static_cast<std::uint32_t>(records_.size()), inserted,
        [&](std::uint32_t record) { return records_[record].hash_low == low; });
    if (inserted) records_.emplace_back().hash_low = low;
    return index;
  }

  void add_edge(std::string_view callee_name, EdgeKind kind, std::int64_t trip_count) {
    add_edge(callee_name, hash_name(callee_name), kind, trip_count);
  }

  void add_edge(std::string_view callee_name, std::uint64_t hash, EdgeKind kind,
                std::int64_t trip_count) {
    std::uint32_t callee = record_for(hash);
    const ComputationRecord& target = records_[callee];
    // Fusion computations normally come first and hold no collectives: no edge is needed.
    if (kind == EdgeKind::kFusion && target.defined && !target.relevant) return;
    if (!target.defined && kind != EdgeKind::kFusion) {
      std::uint32_t& index = records_[callee].name_index;
      if (index == kNone) {
        index = static_cast<std::uint32_t>(names_.size());
        names_.emplace_back(callee_name);
      }
    }
    edges_.push_back(Edge{current_.record, callee, kind, trip_count});
    records_[current_.record].relevant = true;
  }

  // intern() of a plain opcode by its tag, remembered (every computation needs one of these).
  std::uint32_t plain_kind(std::uint16_t tag) {
    std::uint32_t& id = plain_kinds_[tag];
    if (id == kNone) id = intern(kPlainOpcodes[tag - 1]);
    return id;
  }

  std::uint32_t intern(std::string_view kind) {
    auto it = kind_ids_.find(kind);
    if (it != kind_ids_.end()) return it->second;
    const std::string& stored = kinds_.emplace_back(kind);  // a deque: views stay valid
    auto id = static_cast<std::uint32_t>(kinds_.size() - 1);
    kind_ids_.emplace(stored, id);
    return id;
  }

  bool matches(std::string_view computation) const {
    return !filter_ || std::regex_search(computation.begin(), computation.end(), *filter_);
  }

  void warn(std::int64_t line, std::string message) {
    if (result_.warnings.size() >= options_.max_warnings) {
      ++result_.warnings_dropped;
      return;
    }
    result_.warnings.push_back(Warning{line, std::move(message)});
  }

  void stop_at(std::int64_t line, const std::string& reason) {
    if (closed_computations_ == 0) {
      // Nothing usable (not one complete computation): the whole input is an error.
      throw Error(result_.file, line, reason);
    }
    if (in_computation_) finish_computation(true);
    result_.truncated = true;
    result_.truncated_line = line;
    result_.truncation_reason = reason;
  }

  // ---- after the last statement -----------------------------------------------------------------

  // Whether a computation contains compute, directly or through while/call/conditional.
  // Iterative depth-first search, memoised in compute_state (2 = yes, 3 = no).
  bool contains_compute(std::uint32_t root) {
    if (records_[root].compute_state >= 2) return records_[root].compute_state == 2;
    if (!callees_built_) build_call_lists();
    struct Frame {
      std::uint32_t node;
      std::span<const std::uint32_t> callees;
      std::size_t next;
      bool found;
    };
    std::vector<Frame> stack{{root, call_lists_.list(root), 0, records_[root].direct_compute}};
    records_[root].compute_state = 1;
    while (!stack.empty()) {
      Frame& frame = stack.back();
      if (!frame.found && frame.next < frame.callees.size()) {
        std::uint32_t child = frame.callees[frame.next++];
        std::uint8_t state = records_[child].compute_state;
        if (state == 2) {
          frame.found = true;
        } else if (state == 0) {
          records_[child].compute_state = 1;
          stack.push_back(Frame{child, call_lists_.list(child), 0, records_[child].direct_compute});
        }
        continue;  // state 1 (a cycle) or 3 (no compute): nothing to learn
      }
      bool found = frame.found;
      records_[frame.node].compute_state = found ? 2 : 3;
      stack.pop_back();
      if (found && !stack.empty()) stack.back().found = true;
    }
    return records_[root].compute_state == 2;
  }

  void build_call_lists() {
    call_lists_.build(edges_, [](const Edge& edge) {
      return edge.kind == EdgeKind::kBody || edge.kind == EdgeKind::kCondition ||
             edge.kind == EdgeKind::kCall || edge.kind == EdgeKind::kBranch;
    });
    // Callees rather than edge indices.
    for (std::uint32_t& item : call_lists_.items) item = edges_[item].callee;
    callees_built_ = true;
  }

  // Executions per module execution of the computations in the call graph, in topological order
  // from the roots. Only computations with edges take part (a few in a hundred: fused
  // computations without collectives get none); every other one runs once.
  void compute_executions() {
    std::vector<std::uint32_t>& nodes = execution_nodes_;
    nodes.clear();
    nodes.reserve(edges_.size() * 2);
    for (const Edge& edge : edges_) {
      nodes.push_back(edge.caller);
      nodes.push_back(edge.callee);
    }
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    auto node_of = [&](std::uint32_t record) {
      return static_cast<std::size_t>(std::lower_bound(nodes.begin(), nodes.end(), record) -
                                      nodes.begin());
    };
    std::vector<std::uint32_t> indegree(nodes.size(), 0);
    for (const Edge& edge : edges_) ++indegree[node_of(edge.callee)];
    Adjacency out;
    out.build(edges_, [](const Edge&) { return true; });
    std::vector<std::uint32_t> ready;  // nodes, a queue: `next` is its front
    executions_.assign(nodes.size(), 0);
    for (std::uint32_t n = 0; n < nodes.size(); ++n) {
      if (indegree[n] == 0) {
        executions_[n] = 1;
        ready.push_back(n);
      }
    }
    std::size_t processed = 0;
    for (std::size_t next = 0; next < ready.size(); ++next) {
      std::uint32_t n = ready[next];
      std::uint32_t r = nodes[n];
      ++processed;
      for (std::uint32_t e : out.list(r)) {
        const Edge& edge = edges_[e];
        std::int64_t factor = 1;
        bool known = records_[r].executions_known;
        if (edge.kind == EdgeKind::kBody || edge.kind == EdgeKind::kCondition) {
          if (edge.trip_count < 0) {
            known = false;
          } else {
            factor = edge.kind == EdgeKind::kBody ? edge.trip_count : sat_add(edge.trip_count, 1);
          }
        }
        std::size_t callee_node = node_of(edge.callee);
        ComputationRecord& callee = records_[edge.callee];
        executions_[callee_node] =
            sat_add(executions_[callee_node], sat_mul(executions_[n], factor));
        callee.executions_known = callee.executions_known && known;
        if (--indegree[callee_node] == 0) ready.push_back(static_cast<std::uint32_t>(callee_node));
      }
    }
    if (processed < nodes.size()) {
      warn(0, "the call graph has a cycle; executions of the computations on it count as 1");
      for (std::uint32_t n = 0; n < nodes.size(); ++n) {
        if (indegree[n] != 0) {
          executions_[n] = std::max<std::int64_t>(executions_[n], 1);
          records_[nodes[n]].executions_known = false;
        }
      }
    }
  }

  std::int64_t executions_of(std::uint32_t record) const {
    auto it = std::lower_bound(execution_nodes_.begin(), execution_nodes_.end(), record);
    if (it == execution_nodes_.end() || *it != record) return 1;
    return executions_[static_cast<std::size_t>(it - execution_nodes_.begin())];
  }

  void finalize() {
    for (const Edge& edge : edges_) {
      if (edge.kind == EdgeKind::kAsync) records_[edge.callee].async_wrapped = true;
    }
    for (std::size_t d = 0; d < drafts_.size(); ++d) {
      const Draft& draft = drafts_[d];
      if (draft.async_callee != kNone) records_[draft.async_callee].async_wrapped = true;
    }
    for (const Edge& edge : edges_) {
      if (!records_[edge.callee].defined && edge.kind != EdgeKind::kFusion &&
          records_[edge.callee].name_index != kNone && !result_.truncated) {
        warn(0, fmt::format("computation {} is called but never defined",
                            names_[records_[edge.callee].name_index]));
      }
    }
    compute_executions();
    std::vector<std::int64_t> collective_of(drafts_.size(), -1);
    result_.collectives.reserve(drafts_.size());
    std::vector<std::uint32_t> name_of_collective;  // its computation's index in names_
    name_of_collective.reserve(drafts_.size());
    std::vector<std::int8_t> name_matches(names_.size(), -1);
    for (std::size_t d = 0; d < drafts_.size(); ++d) {
      Draft& draft = drafts_[d];
      const ComputationRecord& record = records_[draft.record];
      if (record.async_wrapped) continue;  // the wrapped op of an async-start, reported there
      std::int8_t& match = name_matches[draft.computation];
      if (match < 0) match = matches(names_[draft.computation]) ? 1 : 0;
      if (match == 0) continue;
      Collective c;
      if (draft.kind.empty()) {
        c.kind = "async";
        if (draft.async_callee != kNone) {
          const ComputationRecord& callee = records_[draft.async_callee];
          if (callee.defined && callee.wrapped_kind != kNone) c.kind = kinds_[callee.wrapped_kind];
        }
      } else {
        c.kind = draft.kind;
      }
      c.category = category_of(c.kind);
      c.computation = names_[draft.computation];
      c.start = std::move(draft.start);
      c.done = std::move(draft.done);
      c.wrapper = std::move(draft.wrapper);
      c.start_line = draft.start_line;
      c.done_line = draft.done_line;
      c.async = draft.async;
      c.bytes = draft.bytes;
      c.bytes_known = draft.bytes_known;
      c.op_name = std::move(draft.op_name);
      c.executions = executions_of(draft.record);
      c.executions_known = record.executions_known;
      c.in_truncated_computation = draft.truncated;
      c.status = draft.status;
      if (draft.async && draft.done_seen && draft.status != Status::kUnpairedDone) {
        c.window_instructions = draft.window_instructions;
        c.window_compute = draft.window_compute;
        c.compute_sample = std::move(draft.sample);
        for (std::uint32_t s = draft.callsite_begin; s < draft.callsite_end; ++s) {
          const CallSite& site = callsites_[s];
          if (site.computation != draft.record) continue;
          if (static_cast<std::int64_t>(site.instruction) >= draft.done_instruction) break;
          if (!callsite_has_compute(site)) continue;
          ++c.window_compute;
          if (c.compute_sample.size() < options_.compute_sample)
            c.compute_sample.emplace_back(callsite_names_, site.name_begin, site.name_size);
        }
        c.status = c.window_compute > 0 ? Status::kOverlapped : Status::kExposed;
      }
      collective_of[d] = static_cast<std::int64_t>(result_.collectives.size());
      result_.collectives.push_back(std::move(c));
      name_of_collective.push_back(draft.computation);
    }
    summarize(name_of_collective);
    if (options_.keep_schedule && !best_schedule_.empty()) build_schedule(collective_of);
  }

  bool callsite_has_compute(const CallSite& site) {
    for (std::uint32_t e = site.edge_begin; e < site.edge_end; ++e) {
      if (records_[edges_[e].callee].defined && contains_compute(edges_[e].callee)) return true;
    }
    return false;
  }

  static constexpr std::size_t kNoIndex = static_cast<std::size_t>(-1);

  // `name_of_collective`: each collective's computation as an index into names_ (a computation's
  // collectives are found by index, not by hashing its name once per collective).
  void summarize(const std::vector<std::uint32_t>& name_of_collective) {
    std::vector<std::size_t> computation_index(names_.size(), kNoIndex);
    // Views of the collectives' own strings, which stay put from here on; a dump has a few
    // kinds, mostly in runs, so the last one is tried first.
    std::unordered_map<std::string_view, std::size_t> kind_index;
    std::string_view last_kind;
    std::size_t last_kind_index = kNoIndex;
    for (std::size_t i = 0; i < result_.collectives.size(); ++i) {
      const Collective& c = result_.collectives[i];
      if (last_kind_index == kNoIndex || c.kind != last_kind) {
        auto [k, new_kind] = kind_index.emplace(c.kind, result_.by_kind.size());
        if (new_kind) result_.by_kind.push_back(KindTotals{c.kind, c.category, {}});
        last_kind = c.kind;
        last_kind_index = k->second;
      }
      result_.by_kind[last_kind_index].totals.add(c);
      std::size_t& p = computation_index[name_of_collective[i]];
      if (p == kNoIndex) {
        p = result_.by_computation.size();
        result_.by_computation.push_back(
            ComputationTotals{c.computation, c.executions, c.executions_known, {}});
      }
      result_.by_computation[p].totals.add(c);
      result_.total.add(c);
      if (c.category == Category::kCollective) result_.total_collectives.add(c);
    }
    std::sort(result_.by_kind.begin(), result_.by_kind.end(),
              [](const KindTotals& a, const KindTotals& b) { return a.kind < b.kind; });
  }

  void build_schedule(const std::vector<std::int64_t>& collective_of) {
    Schedule schedule;
    schedule.computation = best_schedule_name_;
    schedule.instructions = std::move(best_schedule_);
    for (std::size_t i = 0; i < schedule.instructions.size(); ++i) {
      ScheduledInstruction& instruction = schedule.instructions[i];
      if (instruction.role == ScheduledInstruction::Role::kCompute) {
        instruction.compute = true;
      } else if (instruction.role == ScheduledInstruction::Role::kCall &&
                 best_schedule_callsites_[i] != kNone) {
        instruction.compute = callsite_has_compute(callsites_[best_schedule_callsites_[i]]);
      }
    }
    for (std::size_t d = best_schedule_drafts_.first; d < best_schedule_drafts_.second; ++d) {
      if (collective_of[d] < 0) continue;
      Schedule::Window window;
      window.collective = static_cast<std::size_t>(collective_of[d]);
      window.start = drafts_[d].start.empty() && drafts_[d].status == Status::kUnpairedDone
                         ? -1
                         : drafts_[d].start_instruction;
      window.done = drafts_[d].done_instruction;
      schedule.windows.push_back(window);
    }
    result_.schedule = std::move(schedule);
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
  std::vector<ComputationRecord> records_;
  std::vector<std::uint32_t> execution_nodes_;  // sorted: the records with edges
  std::vector<std::int64_t> executions_;        // per execution node, from compute_executions
  FlatIndex record_index_;
  std::vector<std::string> names_;
  std::vector<Edge> edges_;
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
  Adjacency call_lists_;
  bool callees_built_ = false;
  std::size_t best_schedule_entries_ = 0;
  std::vector<ScheduledInstruction> best_schedule_;
  std::vector<std::uint32_t> best_schedule_callsites_;
  std::string best_schedule_name_;
  std::pair<std::size_t, std::size_t> best_schedule_drafts_{0, 0};
};

}  // namespace

Analysis analyze_file(const std::string& path, const Options& options) {
  Analyzer analyzer(display_name(path), options);
  try {
    HloInput input = open_hlo_input(path);  // HLO text, or a binary HloProto rendered as text
    Analysis analysis = analyzer.run(*input.source);
    if (input.format == InputFormat::kBinaryProto) analysis.bytes_read = input.proto_bytes;
    return analysis;
  } catch (const Error& e) {
    throw e.in_file(display_name(path));
  }
}

Analysis analyze_text(std::string_view text, const std::string& name, const Options& options,
                      std::size_t max_read) {
  MemorySource source(text, max_read);
  Analyzer analyzer(name, options);
  try {
    return analyzer.run(source);
  } catch (const Error& e) {
    throw e.in_file(name);
  }
}

}  // namespace rtb::hlo
