// Field numbers (facts read from openxla/xla; no schema text is copied):
//   xla/service/hlo.proto @ 0b8fa9f2834ac7c177e5684dcfa587c6bec08b29 (HloProto, HloModuleProto,
//   HloComputationProto, HloInstructionProto, HloScheduleProto),
//   xla/xla_data.proto @ 011b7582cb7d1ef78d66a0742e528eb50f61e32f (ShapeProto, LayoutProto,
//   TileProto, OpMetadata, PrimitiveType values),
//   xla/hlo/ir/hlo_instruction.h @ 001918b7024cf5f020051a9d25d2dd57a5896aaa (a while's called
//   computations are [body, condition]; select-and-scatter's [select, scatter]).
// See also tests/hlo/hlo_module.proto, the schema the tests encode their fixtures with.
#include "rtb/hlo/proto.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/proto_wire.h"

namespace rtb::hlo {

namespace {

using wire::Field;
using wire::Reader;
using wire::WireType;

// What every error message of the wire reader starts with.
constexpr std::string_view kFormat = "binary HloProto";

// HloProto
constexpr std::uint32_t kProtoModule = 1;
// HloModuleProto
constexpr std::uint32_t kModuleName = 1;
constexpr std::uint32_t kModuleEntryName = 2;
constexpr std::uint32_t kModuleComputations = 3;
constexpr std::uint32_t kModuleEntryId = 6;
constexpr std::uint32_t kModuleSchedule = 7;
// HloComputationProto
constexpr std::uint32_t kComputationName = 1;
constexpr std::uint32_t kComputationInstructions = 2;
constexpr std::uint32_t kComputationId = 5;
constexpr std::uint32_t kComputationRootId = 6;
// HloScheduleProto: map<int64, InstructionSequence> sequences = 1 (entry: key 1, value 2);
// InstructionSequence: repeated int64 instruction_ids = 1.
constexpr std::uint32_t kScheduleSequences = 1;
constexpr std::uint32_t kMapKey = 1;
constexpr std::uint32_t kMapValue = 2;
constexpr std::uint32_t kSequenceInstructionIds = 1;
// HloInstructionProto
constexpr std::uint32_t kInstructionName = 1;
constexpr std::uint32_t kInstructionOpcode = 2;
constexpr std::uint32_t kInstructionShape = 3;
constexpr std::uint32_t kInstructionMetadata = 7;
constexpr std::uint32_t kInstructionParameterNumber = 9;
constexpr std::uint32_t kInstructionTupleIndex = 13;
constexpr std::uint32_t kInstructionChannelId = 26;
constexpr std::uint32_t kInstructionCustomCallTarget = 28;
constexpr std::uint32_t kInstructionId = 35;
constexpr std::uint32_t kInstructionOperandIds = 36;
constexpr std::uint32_t kInstructionCalledComputationIds = 38;
constexpr std::uint32_t kInstructionBackendConfig = 43;
constexpr std::uint32_t kInstructionIsHostTransfer = 47;
// ShapeProto
constexpr std::uint32_t kShapeElementType = 2;
constexpr std::uint32_t kShapeDimensions = 3;
constexpr std::uint32_t kShapeTupleShapes = 4;
constexpr std::uint32_t kShapeLayout = 5;
constexpr std::uint32_t kShapeIsDynamicDimension = 6;
// LayoutProto and TileProto
constexpr std::uint32_t kLayoutMinorToMajor = 1;
constexpr std::uint32_t kLayoutTiles = 6;
constexpr std::uint32_t kLayoutElementSizeInBits = 7;
constexpr std::uint32_t kLayoutMemorySpace = 8;
constexpr std::uint32_t kTileDimensions = 1;
// OpMetadata
constexpr std::uint32_t kMetadataOpType = 1;
constexpr std::uint32_t kMetadataOpName = 2;

// PrimitiveType values -> the type names of HLO text (index = enum value).
constexpr int kTupleType = 13;
constexpr std::array<std::string_view, 35> kElementTypes = {
    "invalid",    "pred",       "s8",    "s16",    "s32",      "s64",    "u8",     "u16",
    "u32",        "u64",        "f16",   "f32",    "f64",      "tuple",  "opaque", "c64",
    "bf16",       "token",      "c128",  "f8e5m2", "f8e4m3fn", "s4",     "u4",     "f8e4m3b11fnuz",
    "f8e5m2fnuz", "f8e4m3fnuz", "s2",    "u2",     "f8e4m3",   "f8e3m4", "s1",     "u1",
    "f4e2m1fn",   "f8e8m0fnu",  "buffer"};

// Tuples nest this deep at most (real shapes: a handful of levels); deeper is refused so that
// hostile input cannot exhaust the stack.
constexpr int kMaxShapeDepth = 64;

// The characters XLA allows in module, computation and instruction names. Anything else could
// change how the rendered text is cut into statements, so it is refused.
bool is_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Opcodes are lower-case words joined by '-' ("all-gather-start").
bool is_opcode(std::string_view opcode) {
  if (opcode.empty()) return false;
  for (char c : opcode) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return false;
  }
  return true;
}

std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 60)) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  if (text.size() > 60) out += "...";
  return out;
}

// Appends `text` as the inside of a double-quoted HLO string: \" \' \\ \n \r \t and three-digit
// octal escapes for other bytes below 0x20 or from 0x7f, as XLA escapes strings in its text.
void append_escaped(std::string_view text, std::string& out) {
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\'':
        out += "\\'";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      default:
        break;
    }
    if (byte < 0x20 || byte >= 0x7f) {
      out += '\\';
      out += static_cast<char>('0' + (byte >> 6));
      out += static_cast<char>('0' + ((byte >> 3) & 7));
      out += static_cast<char>('0' + (byte & 7));
    } else {
      out += c;
    }
  }
}

void append_int(std::int64_t value, std::string& out) {
  fmt::format_to(std::back_inserter(out), "{}", value);
}

// A repeated int64 field (packed or not): its values appended to `out`.
void append_ints(const Field& field, std::string_view what, std::string_view name,
                 std::vector<std::int64_t>& out) {
  wire::for_each_varint(field, what, name,
                        [&](std::uint64_t v) { out.push_back(static_cast<std::int64_t>(v)); });
}

struct ComputationEntry {
  std::string_view name;
  std::int64_t id = 0;
  std::int64_t root_id = 0;
  bool has_root = false;
  std::string_view bytes;  // the HloComputationProto
  std::size_t instructions = 0;
};

struct InstructionEntry {
  std::int64_t id = 0;
  std::string_view name;
  std::string_view bytes;  // the HloInstructionProto
};

class ProtoTextSource : public ByteSource {
 public:
  ProtoTextSource(std::string_view proto, std::shared_ptr<const void> keep_alive,
                  std::string name = "<HloProto>")
      : input_(proto), keep_alive_(std::move(keep_alive)), name_(std::move(name)) {
    index_module();
  }

  const std::string& name() const override { return name_; }

  std::size_t read(char* buffer, std::size_t capacity) override {
    while (pending_at_ == pending_.size()) {
      pending_.clear();
      pending_at_ = 0;
      if (!produce()) return 0;
    }
    std::size_t n = std::min(capacity, pending_.size() - pending_at_);
    std::memcpy(buffer, pending_.data() + pending_at_, n);
    pending_at_ += n;
    return n;
  }

 private:
  // ---- the module's structure (at construction) ----

  void index_module() {
    Reader top(input_, input_, "HloProto", kFormat);
    Field field;
    std::string_view module;
    bool has_module = false;
    while (top.next(field)) {
      if (field.number != kProtoModule) continue;
      if (has_module) fail("binary HloProto: more than one hlo_module (field 1)");
      module = wire::bytes_of(field, "HloProto", "hlo_module");
      has_module = true;
    }
    if (!has_module) fail("binary HloProto: no hlo_module (field 1)");

    Reader reader(input_, module, "HloModuleProto", kFormat);
    std::string_view entry_name;
    bool has_entry_id = false;
    std::int64_t entry_id = 0;
    while (reader.next(field)) {
      switch (field.number) {
        case kModuleName:
          module_name_ = wire::bytes_of(field, "HloModuleProto", "name");
          break;
        case kModuleEntryName:
          entry_name = wire::bytes_of(field, "HloModuleProto", "entry_computation_name");
          break;
        case kModuleComputations:
          index_computation(reader.nested(field, "HloComputationProto", "computations"));
          break;
        case kModuleEntryId:
          entry_id = wire::int64_of(field, "HloModuleProto", "entry_computation_id");
          has_entry_id = true;
          break;
        case kModuleSchedule:
          scheduled_ = true;
          index_schedule(reader.nested(field, "HloScheduleProto", "schedule"));
          break;
        default:
          break;
      }
    }
    if (!is_name(module_name_)) {
      fail("binary HloProto: the module's name '{}' is not an HLO name ([A-Za-z0-9_.-]+)",
           printable(module_name_));
    }
    entry_ = computations_.size();  // none
    if (has_entry_id) {
      auto found = computation_by_id_.find(entry_id);
      if (found == computation_by_id_.end()) {
        fail("binary HloProto: entry_computation_id {} is not the id of a computation", entry_id);
      }
      entry_ = found->second;
    } else if (!entry_name.empty()) {
      for (std::size_t i = 0; i < computations_.size(); ++i) {
        if (computations_[i].name == entry_name) entry_ = i;
      }
      if (entry_ == computations_.size()) {
        fail("binary HloProto: entry_computation_name '{}' is not the name of a computation",
             printable(entry_name));
      }
    } else if (!computations_.empty()) {
      entry_ = computations_.size() - 1;  // XLA stores callees before callers
    }
  }

  void index_computation(Reader reader) {
    ComputationEntry entry;
    entry.bytes = reader.data();
    bool has_id = false;
    Field field;
    while (reader.next(field)) {
      switch (field.number) {
        case kComputationName:
          entry.name = wire::bytes_of(field, "HloComputationProto", "name");
          break;
        case kComputationInstructions:
          wire::expect_type(field, WireType::kLength, "HloComputationProto", "instructions");
          ++entry.instructions;
          break;
        case kComputationId:
          entry.id = wire::int64_of(field, "HloComputationProto", "id");
          has_id = true;
          break;
        case kComputationRootId:
          entry.root_id = wire::int64_of(field, "HloComputationProto", "root_id");
          entry.has_root = true;
          break;
        default:
          break;
      }
    }
    if (!is_name(entry.name)) {
      fail("binary HloProto: computation {}: name '{}' is not an HLO name ([A-Za-z0-9_.-]+)",
           computations_.size(), printable(entry.name));
    }
    if (!has_id) fail("binary HloProto: computation {} has no id", entry.name);
    auto [at, inserted] =
        computation_by_id_.emplace(entry.id, static_cast<std::uint32_t>(computations_.size()));
    if (!inserted) {
      fail("binary HloProto: computations {} and {} have the same id {}",
           computations_[at->second].name, entry.name, entry.id);
    }
    computations_.push_back(entry);
  }

  void index_schedule(Reader reader) {
    Field field;
    while (reader.next(field)) {
      if (field.number != kScheduleSequences) continue;
      Reader map_entry = reader.nested(field, "HloScheduleProto.SequencesEntry", "sequences");
      std::int64_t key = 0;
      std::string_view value;
      Field part;
      while (map_entry.next(part)) {
        if (part.number == kMapKey)
          key = wire::int64_of(part, "HloScheduleProto.SequencesEntry", "key");
        if (part.number == kMapValue) {
          value = wire::bytes_of(part, "HloScheduleProto.SequencesEntry", "value");
        }
      }
      schedule_[key] = value;  // a map: the last entry for a key wins
    }
  }

  // ---- rendering, one statement per produce() ----

  bool produce() {
    switch (stage_) {
      case Stage::kHeader:
        pending_ += "HloModule ";
        pending_ += module_name_;
        if (scheduled_) pending_ += ", is_scheduled=true";
        pending_ += "\n\n";
        stage_ = Stage::kComputationHeader;
        return true;
      case Stage::kComputationHeader: {
        if (computation_ == computations_.size()) {
          stage_ = Stage::kDone;
          return false;
        }
        const ComputationEntry& c = computations_[computation_];
        index_instructions(c);
        if (computation_ == entry_) pending_ += "ENTRY ";
        pending_ += "%";
        pending_ += c.name;
        pending_ += " {\n";
        next_instruction_ = 0;
        stage_ = Stage::kInstructions;
        return true;
      }
      case Stage::kInstructions:
        if (next_instruction_ == order_.size()) {
          pending_ += "}\n\n";  // XLA ends every computation with a blank line
          ++computation_;
          stage_ = Stage::kComputationHeader;
          return true;
        }
        render_instruction(instructions_[order_[next_instruction_++]]);
        return true;
      case Stage::kDone:
        return false;
    }
    return false;
  }

  void index_instructions(const ComputationEntry& computation) {
    instructions_.clear();
    instruction_by_id_.clear();
    local_by_id_.clear();
    order_.clear();
    instructions_.reserve(computation.instructions);
    Reader reader(input_, computation.bytes, "HloComputationProto", kFormat);
    Field field;
    while (reader.next(field)) {
      if (field.number != kComputationInstructions) continue;
      InstructionEntry entry;
      entry.bytes = field.bytes;
      Reader instruction(input_, field.bytes, "HloInstructionProto", kFormat);
      Field part;
      while (instruction.next(part)) {
        if (part.number == kInstructionName) {
          entry.name = wire::bytes_of(part, "HloInstructionProto", "name");
        }
        if (part.number == kInstructionId)
          entry.id = wire::int64_of(part, "HloInstructionProto", "id");
      }
      if (!is_name(entry.name)) {
        fail(
            "binary HloProto: computation {}: instruction name '{}' is not an HLO name "
            "([A-Za-z0-9_.-]+)",
            computation.name, printable(entry.name));
      }
      auto [at, inserted] =
          instruction_by_id_.emplace(entry.id, static_cast<std::uint32_t>(instructions_.size()));
      if (!inserted) {
        fail("binary HloProto: computation {}: instructions {} and {} have the same id {}",
             computation.name, instructions_[at->second].name, entry.name, entry.id);
      }
      instructions_.push_back(entry);
    }

    auto sequence = schedule_.find(computation.id);
    if (sequence == schedule_.end()) {
      order_.resize(instructions_.size());
      for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<std::uint32_t>(i);
      return;
    }
    std::vector<bool> seen(instructions_.size(), false);
    Reader ids(input_, sequence->second, "HloScheduleProto.InstructionSequence", kFormat);
    while (ids.next(field)) {
      if (field.number != kSequenceInstructionIds) continue;
      wire::for_each_varint(field, "InstructionSequence", "instruction_ids", [&](std::uint64_t v) {
        auto id = static_cast<std::int64_t>(v);
        std::uint32_t index = lookup_instruction(id, computation, "its schedule lists");
        if (seen[index]) {
          fail("binary HloProto: the schedule of computation {} lists instruction {} twice",
               computation.name, instructions_[index].name);
        }
        seen[index] = true;
        order_.push_back(index);
      });
    }
    if (order_.size() != instructions_.size()) {
      fail("binary HloProto: the schedule of computation {} lists {} of its {} instructions",
           computation.name, order_.size(), instructions_.size());
    }
  }

  // The index of instruction `id` of the current computation. Ids are matched exactly, else by
  // their low 32 bits (the per-computation part of XLA's unique ids), when that is unambiguous.
  std::uint32_t lookup_instruction(std::int64_t id, const ComputationEntry& computation,
                                   std::string_view who) {
    auto found = instruction_by_id_.find(id);
    if (found != instruction_by_id_.end()) return found->second;
    if (id >= 0 && id <= 0xffffffff) {
      if (local_by_id_.empty()) {
        for (std::size_t i = 0; i < instructions_.size(); ++i) {
          auto local = instructions_[i].id & 0xffffffff;
          auto [at, inserted] = local_by_id_.emplace(local, static_cast<std::uint32_t>(i));
          if (!inserted) at->second = kAmbiguous;
        }
      }
      auto local = local_by_id_.find(id);
      if (local != local_by_id_.end() && local->second != kAmbiguous) return local->second;
    }
    fail("binary HloProto: computation {}: {} instruction id {}, which it does not have",
         computation.name, who, id);
  }

  std::string_view computation_name(std::int64_t id, std::string_view instruction) {
    auto found = computation_by_id_.find(id);
    if (found == computation_by_id_.end()) {
      fail(
          "binary HloProto: instruction {} calls computation id {}, which the module does not "
          "have",
          instruction, id);
    }
    return computations_[found->second].name;
  }

  void render_instruction(const InstructionEntry& entry) {
    const ComputationEntry& computation = computations_[computation_];
    constexpr std::string_view kWhat = "HloInstructionProto";
    std::string_view opcode;
    std::string_view shape;
    bool has_shape = false;
    std::string_view custom_call_target;
    std::string_view backend_config;
    std::string_view op_name;
    std::string_view op_type;
    bool has_metadata = false;
    std::optional<std::int64_t> parameter_number;
    std::optional<std::int64_t> tuple_index;
    std::int64_t channel_id = 0;
    bool host_transfer = false;
    operands_.clear();
    callees_.clear();
    Reader reader(input_, entry.bytes, kWhat, kFormat);
    Field field;
    while (reader.next(field)) {
      switch (field.number) {
        case kInstructionOpcode:
          opcode = wire::bytes_of(field, kWhat, "opcode");
          break;
        case kInstructionShape:
          shape = wire::bytes_of(field, kWhat, "shape");
          has_shape = true;
          break;
        case kInstructionMetadata: {
          Reader metadata = reader.nested(field, "OpMetadata", "metadata");
          has_metadata = true;
          Field part;
          while (metadata.next(part)) {
            if (part.number == kMetadataOpType)
              op_type = wire::bytes_of(part, "OpMetadata", "op_type");
            if (part.number == kMetadataOpName)
              op_name = wire::bytes_of(part, "OpMetadata", "op_name");
          }
          break;
        }
        case kInstructionParameterNumber:
          parameter_number = wire::int64_of(field, kWhat, "parameter_number");
          break;
        case kInstructionTupleIndex:
          tuple_index = wire::int64_of(field, kWhat, "tuple_index");
          break;
        case kInstructionChannelId:
          channel_id = wire::int64_of(field, kWhat, "channel_id");
          break;
        case kInstructionCustomCallTarget:
          custom_call_target = wire::bytes_of(field, kWhat, "custom_call_target");
          break;
        case kInstructionOperandIds:
          append_ints(field, kWhat, "operand_ids", operands_);
          break;
        case kInstructionCalledComputationIds:
          append_ints(field, kWhat, "called_computation_ids", callees_);
          break;
        case kInstructionBackendConfig:
          backend_config = wire::bytes_of(field, kWhat, "backend_config");
          break;
        case kInstructionIsHostTransfer:
          host_transfer = wire::int64_of(field, kWhat, "is_host_transfer") != 0;
          break;
        default:
          break;
      }
    }
    if (!is_opcode(opcode)) {
      fail("binary HloProto: computation {}: instruction {} has opcode '{}', not an HLO opcode",
           computation.name, entry.name, printable(opcode));
    }
    if (!has_shape) {
      fail("binary HloProto: computation {}: instruction {} has no shape", computation.name,
           entry.name);
    }

    std::string& out = pending_;
    out += "  ";
    if (computation.has_root && entry.id == computation.root_id) out += "ROOT ";
    out += "%";
    out += entry.name;
    out += " = ";
    render_shape(Reader(input_, shape, "ShapeProto", kFormat), 0, entry.name, out);
    out += ' ';
    out += opcode;
    out += '(';
    if (opcode == "parameter") append_int(parameter_number.value_or(0), out);
    for (std::size_t i = 0; i < operands_.size(); ++i) {
      if (i > 0) out += ", ";
      out += '%';
      std::uint32_t index = lookup_instruction(
          operands_[i], computation, fmt::format("instruction {} has operand", entry.name));
      out += instructions_[index].name;
    }
    out += ')';
    if (tuple_index) {
      out += ", index=";
      append_int(*tuple_index, out);
    }
    if (channel_id > 0) {
      out += ", channel_id=";
      append_int(channel_id, out);
    }
    render_callees(opcode, entry.name, out);
    if (!custom_call_target.empty()) {
      out += ", custom_call_target=\"";
      append_escaped(custom_call_target, out);
      out += '"';
    }
    if (host_transfer) out += ", is_host_transfer=true";
    // The analysis reads metadata after calls= and stops there, then backend_config.
    if (has_metadata && (!op_type.empty() || !op_name.empty())) {
      out += ", metadata={";
      if (!op_type.empty()) {
        out += "op_type=\"";
        append_escaped(op_type, out);
        out += op_name.empty() ? "\"" : "\" ";
      }
      if (!op_name.empty()) {
        out += "op_name=\"";
        append_escaped(op_name, out);
        out += '"';
      }
      out += '}';
    }
    if (!backend_config.empty()) {
      out += ", backend_config=\"";
      append_escaped(backend_config, out);
      out += '"';
    }
    out += '\n';
  }

  // The called computations under the attribute names XLA prints for `opcode`.
  void render_callees(std::string_view opcode, std::string_view instruction, std::string& out) {
    if (callees_.empty()) return;
    auto one = [&](std::string_view key, std::int64_t id) {
      out += ", ";
      out += key;
      out += "=%";
      out += computation_name(id, instruction);
    };
    auto list = [&](std::string_view key) {
      out += ", ";
      out += key;
      out += "={";
      for (std::size_t i = 0; i < callees_.size(); ++i) {
        out += i == 0 ? "%" : ", %";
        out += computation_name(callees_[i], instruction);
      }
      out += '}';
    };
    if (opcode == "while" || opcode == "select-and-scatter") {
      if (callees_.size() != 2) {
        fail("binary HloProto: {} {} calls {} computations, expected 2", opcode, instruction,
             callees_.size());
      }
      if (opcode == "while") {
        one("condition", callees_[1]);
        one("body", callees_[0]);
      } else {
        one("select", callees_[0]);
        one("scatter", callees_[1]);
      }
    } else if (opcode == "conditional") {
      list("branch_computations");
    } else if (opcode == "custom-call") {
      list("called_computations");
    } else if (opcode == "fusion" || opcode.substr(0, 6) == "async-") {
      if (callees_.size() == 1) {
        one("calls", callees_[0]);
      } else {
        list("calls");
      }
    } else if (callees_.size() == 1) {
      one("to_apply", callees_[0]);
    } else {
      list("called_computations");
    }
  }

  // ShapeProto -> `type[dims]{layout}` or `(shape, ...)`.
  void render_shape(Reader reader, int depth, std::string_view instruction, std::string& out) {
    if (depth > kMaxShapeDepth) {
      fail("binary HloProto: the shape of instruction {} nests tuples deeper than {} levels",
           instruction, kMaxShapeDepth);
    }
    constexpr std::string_view kWhat = "ShapeProto";
    std::int64_t element_type = 0;
    std::vector<std::int64_t> dimensions;
    std::vector<bool> dynamic;
    std::vector<std::string_view> tuple;
    std::string_view layout;
    bool has_layout = false;
    Field field;
    while (reader.next(field)) {
      switch (field.number) {
        case kShapeElementType:
          element_type = wire::int64_of(field, kWhat, "element_type");
          break;
        case kShapeDimensions:
          append_ints(field, kWhat, "dimensions", dimensions);
          break;
        case kShapeTupleShapes:
          tuple.push_back(wire::bytes_of(field, kWhat, "tuple_shapes"));
          break;
        case kShapeLayout:
          layout = wire::bytes_of(field, kWhat, "layout");
          has_layout = true;
          break;
        case kShapeIsDynamicDimension:
          wire::for_each_varint(field, kWhat, "is_dynamic_dimension",
                                [&](std::uint64_t v) { dynamic.push_back(v != 0); });
          break;
        default:
          break;
      }
    }
    if (element_type == kTupleType) {
      out += '(';
      for (std::size_t i = 0; i < tuple.size(); ++i) {
        if (i > 0) out += ", ";
        render_shape(Reader(input_, tuple[i], kWhat, kFormat), depth + 1, instruction, out);
      }
      out += ')';
      return;
    }
    if (element_type >= 0 && element_type < static_cast<std::int64_t>(kElementTypes.size())) {
      out += kElementTypes[static_cast<std::size_t>(element_type)];
    } else {
      out += "type";  // a type this reader does not know: the analysis cannot size it
      append_int(element_type, out);
    }
    out += '[';
    for (std::size_t i = 0; i < dimensions.size(); ++i) {
      if (i > 0) out += ',';
      if (i < dynamic.size() && dynamic[i]) out += "<=";
      append_int(dimensions[i], out);
    }
    out += ']';
    if (has_layout) render_layout(Reader(input_, layout, "LayoutProto", kFormat), out);
  }

  // LayoutProto -> `{1,0:T(8,128)(2,1)E(4)S(1)}`; nothing for a layout with none of these.
  void render_layout(Reader reader, std::string& out) {
    constexpr std::string_view kWhat = "LayoutProto";
    std::string minor_to_major;
    std::string tiles;
    std::int64_t element_bits = 0;
    std::int64_t memory_space = 0;
    Field field;
    while (reader.next(field)) {
      switch (field.number) {
        case kLayoutMinorToMajor:
          wire::for_each_varint(field, kWhat, "minor_to_major", [&](std::uint64_t v) {
            if (!minor_to_major.empty()) minor_to_major += ',';
            append_int(static_cast<std::int64_t>(v), minor_to_major);
          });
          break;
        case kLayoutTiles: {
          Reader tile = reader.nested(field, "TileProto", "tiles");
          tiles += tiles.empty() ? "T(" : "(";
          bool first = true;
          Field part;
          while (tile.next(part)) {
            if (part.number != kTileDimensions) continue;
            wire::for_each_varint(part, "TileProto", "dimensions", [&](std::uint64_t v) {
              if (!first) tiles += ',';
              first = false;
              auto dim = static_cast<std::int64_t>(v);
              if (dim == INT64_MIN) {
                tiles += '*';  // a combined dimension
              } else {
                append_int(dim, tiles);
              }
            });
          }
          tiles += ')';
          break;
        }
        case kLayoutElementSizeInBits:
          element_bits = wire::int64_of(field, kWhat, "element_size_in_bits");
          break;
        case kLayoutMemorySpace:
          memory_space = wire::int64_of(field, kWhat, "memory_space");
          break;
        default:
          break;
      }
    }
    if (minor_to_major.empty() && tiles.empty() && element_bits == 0 && memory_space == 0) return;
    out += '{';
    out += minor_to_major;
    if (!tiles.empty() || element_bits != 0 || memory_space != 0) {
      out += ':';
      out += tiles;
      if (element_bits != 0) {
        out += "E(";
        append_int(element_bits, out);
        out += ')';
      }
      if (memory_space != 0) {
        out += "S(";
        append_int(memory_space, out);
        out += ')';
      }
    }
    out += '}';
  }

  static constexpr std::uint32_t kAmbiguous = UINT32_MAX;
  enum class Stage { kHeader, kComputationHeader, kInstructions, kDone };

  std::string_view input_;
  std::shared_ptr<const void> keep_alive_;  // what holds input_'s bytes (a mapping)
  std::string name_;
  std::string_view module_name_;
  bool scheduled_ = false;
  std::vector<ComputationEntry> computations_;
  std::unordered_map<std::int64_t, std::uint32_t> computation_by_id_;
  std::unordered_map<std::int64_t, std::string_view> schedule_;  // computation id -> sequence
  std::size_t entry_ = 0;

  Stage stage_ = Stage::kHeader;
  std::size_t computation_ = 0;
  std::vector<InstructionEntry> instructions_;  // of computations_[computation_]
  std::unordered_map<std::int64_t, std::uint32_t> instruction_by_id_;
  std::unordered_map<std::int64_t, std::uint32_t> local_by_id_;  // built on the first miss
  std::vector<std::uint32_t> order_;                             // indices into instructions_
  std::size_t next_instruction_ = 0;
  std::vector<std::int64_t> operands_;
  std::vector<std::int64_t> callees_;
  std::string pending_;  // the statement being handed out
  std::size_t pending_at_ = 0;
};

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

}  // namespace

InputFormat detect_input_format(std::string_view prefix) {
  prefix = prefix.substr(0, kFormatPrefixBytes);
  std::size_t i = 0;
  while (i < prefix.size() && is_blank(prefix[i])) ++i;
  constexpr std::string_view kWord = "HloModule";
  if (prefix.substr(i, kWord.size()) == kWord &&
      (i + kWord.size() == prefix.size() || is_blank(prefix[i + kWord.size()]))) {
    return InputFormat::kText;
  }
  if (prefix.empty() || prefix[0] != '\x0a') return InputFormat::kText;
  for (char c : prefix) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 && !is_blank(c)) return InputFormat::kBinaryProto;
  }
  return InputFormat::kText;
}

std::unique_ptr<ByteSource> hlo_proto_text_source(std::string_view proto) {
  return std::make_unique<ProtoTextSource>(proto, nullptr);
}

std::string hlo_proto_to_text(std::string_view proto) {
  ProtoTextSource source(proto, nullptr);
  std::string text;
  char block[4096];
  while (std::size_t n = source.read(block, sizeof block)) text.append(block, n);
  return text;
}

HloInput open_hlo_input(const std::string& path) {
  auto file = std::make_unique<FileSource>(path, FileAccess::kMapped);
  HloInput input;
  std::string_view whole = file->contiguous();
  if (!whole.empty()) {
    input.format = detect_input_format(whole);
    if (input.format == InputFormat::kText) {
      input.source = std::move(file);
      return input;
    }
    input.proto_bytes = whole.size();
    std::shared_ptr<const FileSource> owner(std::move(file));
    input.source = std::make_unique<ProtoTextSource>(whole, owner, display_name(path));
    return input;
  }
  // Not mapped (stdin, a pipe, an empty file): read the first bytes to decide.
  std::string prefix = read_prefix(*file, kFormatPrefixBytes);
  input.format = detect_input_format(prefix);
  if (input.format == InputFormat::kText) {
    input.source = std::make_unique<PrefixedSource>(std::move(prefix), std::move(file));
    return input;
  }
  std::shared_ptr<const SpooledBytes> mapping = spool(prefix, *file, display_name(path));
  input.proto_bytes = mapping->bytes().size();
  input.source = std::make_unique<ProtoTextSource>(mapping->bytes(), mapping, display_name(path));
  return input;
}

}  // namespace rtb::hlo
