// Tests of the binary HloProto reader (hlo/proto.h, base/proto_wire.h): format detection, the
// rendering as HLO text (schedule order, shapes, callees, escapes) and malformed input. The
// protos are built here with a small encoder, so each test shows the bytes it feeds.
#include "rtb/hlo/proto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/proto_wire.h"
#include "rtb/hlo/analysis.h"
#include "test_util.h"

namespace rtb::hlo {
namespace {

// ---- a minimal encoder ---------------------------------------------------------------------

// (base/proto_wire's writer, returning what it appends)
std::string varint(std::uint64_t value) {
  std::string out;
  wire::put_varint(out, value);
  return out;
}
// a + b (appending, since GCC 12 warns wrongly about const char* + std::string&&).
std::string cat(std::string a, const std::string& b) { return a += b; }
std::string key(std::uint32_t field, int type) { return varint((field << 3) | type); }
std::string num(std::uint32_t field, std::int64_t value) {
  return key(field, 0) + varint(static_cast<std::uint64_t>(value));
}
std::string len(std::uint32_t field, const std::string& payload) {
  return key(field, 2) + varint(payload.size()) + payload;
}
std::string packed(std::uint32_t field, const std::vector<std::int64_t>& values) {
  std::string payload;
  for (auto v : values) payload += varint(static_cast<std::uint64_t>(v));
  return len(field, payload);
}

// ShapeProto: element_type 2, dimensions 3, tuple_shapes 4, layout 5.
std::string array_shape(int type, const std::vector<std::int64_t>& dims,
                        const std::string& layout = "") {
  std::string out = num(2, type) + packed(3, dims);
  if (!layout.empty()) out += len(5, layout);
  return out;
}
std::string tuple_shape(const std::vector<std::string>& elements) {
  std::string out = num(2, 13);
  for (const auto& e : elements) out += len(4, e);
  return out;
}
constexpr int kF32 = 11;
constexpr int kBF16 = 16;
constexpr int kS32 = 4;

struct Instr {
  std::string name;
  std::string opcode;
  std::string shape;
  std::int64_t id;
  std::vector<std::int64_t> operands = {};
  std::vector<std::int64_t> callees = {};
  std::string extra = {};  // more encoded fields
};
// HloInstructionProto: name 1, opcode 2, shape 3, id 35, operand_ids 36, called ids 38.
std::string instruction(const Instr& i) {
  std::string out = len(1, i.name) + len(2, i.opcode) + len(3, i.shape) + i.extra + num(35, i.id);
  if (!i.operands.empty()) out += packed(36, i.operands);
  if (!i.callees.empty()) out += packed(38, i.callees);
  return out;
}
// HloComputationProto: name 1, instructions 2, id 5, root_id 6.
std::string computation(const std::string& name, std::int64_t id,
                        const std::vector<Instr>& instructions, std::int64_t root) {
  std::string out = len(1, name);
  for (const auto& i : instructions) out += len(2, instruction(i));
  return out + num(5, id) + num(6, root);
}
// HloScheduleProto: sequences 1 (map entry: key 1, value 2 = InstructionSequence{ids 1}).
std::string schedule(std::int64_t computation_id, const std::vector<std::int64_t>& ids) {
  return len(1, num(1, computation_id) + len(2, packed(1, ids)));
}
// HloProto{hlo_module 1: HloModuleProto{name 1, computations 3, entry id 6, schedule 7}}.
std::string module(const std::string& name, const std::vector<std::string>& computations,
                   std::int64_t entry, const std::string& sched = "", bool has_schedule = false) {
  std::string out = len(1, name);
  for (const auto& c : computations) out += len(3, c);
  out += num(6, entry);
  if (has_schedule || !sched.empty()) out += len(7, sched);
  return len(1, out);
}

// An async all-gather with a fusion in its window: the proto stores the instructions in another
// order than the schedule.
std::string scheduled_module() {
  std::string fused = computation("fused", 1,
                                  {{"x", "parameter", array_shape(kF32, {4}), 10},
                                   {"y", "negate", array_shape(kF32, {4}), 11, {10}}},
                                  11);
  std::string ag_shape = tuple_shape({array_shape(kBF16, {8}), array_shape(kBF16, {32})});
  std::string main =
      computation("main", 2,
                  {{"done", "all-gather-done", array_shape(kBF16, {32}, packed(1, {0})), 24, {21}},
                   {"fusion.1", "fusion", array_shape(kF32, {4}), 23, {22}, {1}},
                   {"start",
                    "all-gather-start",
                    ag_shape,
                    21,
                    {20},
                    {},
                    len(7, len(1, "AllGather") + len(2, "jit(f)/\"ag\"")) + num(26, 5)},
                   {"p0", "parameter", array_shape(kBF16, {8}), 20},
                   {"p1", "parameter", array_shape(kF32, {4}), 22, {}, {}, num(9, 1)}},
                  24);
  return module("m", {fused, main}, 2, schedule(2, {20, 21, 22, 23, 24}));
}

// ---- detection --------------------------------------------------------------------------------

TEST(DetectInputFormat, TextStartsWithHloModuleAfterBlanks) {
  EXPECT_EQ(detect_input_format("HloModule m\n"), InputFormat::kText);
  EXPECT_EQ(detect_input_format("\n\n  \tHloModule m, is_scheduled=true"), InputFormat::kText);
  EXPECT_EQ(detect_input_format("\r\nHloModule\n"), InputFormat::kText);
  EXPECT_EQ(detect_input_format("HloModule"), InputFormat::kText);
}

TEST(DetectInputFormat, BinaryProtoStartsWithFieldOneAndHasControlBytes) {
  EXPECT_EQ(detect_input_format(scheduled_module()), InputFormat::kBinaryProto);
  // A proto whose module name is "HloModule x": the bytes 0a 0f 0a 0b would be blanks only if
  // the lengths were 9, 10, 13 or 32; here they are not, so it is binary.
  EXPECT_EQ(detect_input_format(module("HloModule_x", {}, 0)), InputFormat::kBinaryProto);
}

TEST(DetectInputFormat, AmbiguousInputsFollowTheRules) {
  // Starts with 0x0a (a newline) but holds no control byte: text (the text reader then says it
  // is not HLO), not a proto.
  EXPECT_EQ(detect_input_format("\nnot hlo at all\n"), InputFormat::kText);
  // "HloModule" followed by a non-blank is not the text header.
  EXPECT_EQ(detect_input_format("\nHloModuleX\x12\x01"), InputFormat::kBinaryProto);
  // A proto whose lengths happen to be blanks and whose module is named "HloModule m" reads as
  // text by the first rule (documented: text wins), and the text reader rejects it.
  std::string tricky =
      cat(std::string("\x0a\x20\x0a\x0d", 4), "HloModule abc" + std::string(17, 'x'));
  EXPECT_EQ(detect_input_format(tricky), InputFormat::kText);
  // Anything else, including a leading comment: text, as before.
  EXPECT_EQ(detect_input_format("// comment\nHloModule m"), InputFormat::kText);
  EXPECT_EQ(detect_input_format(""), InputFormat::kText);
  EXPECT_EQ(detect_input_format(std::string("\x1a\x00", 2)), InputFormat::kText);
}

// ---- rendering --------------------------------------------------------------------------------

TEST(HloProtoText, RendersInScheduleOrderWithAttributes) {
  EXPECT_EQ(hlo_proto_to_text(scheduled_module()),
            "HloModule m, is_scheduled=true\n"
            "\n"
            "%fused {\n"
            "  %x = f32[4] parameter(0)\n"
            "  ROOT %y = f32[4] negate(%x)\n"
            "}\n"
            "\n"
            "ENTRY %main {\n"
            "  %p0 = bf16[8] parameter(0)\n"
            "  %start = (bf16[8], bf16[32]) all-gather-start(%p0), channel_id=5, "
            "metadata={op_type=\"AllGather\" op_name=\"jit(f)/\\\"ag\\\"\"}\n"
            "  %p1 = f32[4] parameter(1)\n"
            "  %fusion.1 = f32[4] fusion(%p1), calls=%fused\n"
            "  ROOT %done = bf16[32]{0} all-gather-done(%start)\n"
            "}\n"
            "\n");
}

TEST(HloProtoText, WithoutScheduleKeepsTheStoredOrder) {
  std::string main = computation("main", 7,
                                 {{"b", "negate", array_shape(kF32, {}), 2, {1}},
                                  {"a", "parameter", array_shape(kF32, {}), 1}},
                                 2);
  EXPECT_EQ(hlo_proto_to_text(module("m", {main}, 7)),
            "HloModule m\n\nENTRY %main {\n  ROOT %b = f32[] negate(%a)\n"
            "  %a = f32[] parameter(0)\n}\n\n");
}

TEST(HloProtoText, ShapesLayoutsAndDynamicDimensions) {
  // LayoutProto: minor_to_major 1, tiles 6 (TileProto.dimensions 1), memory_space 8.
  std::string layout =
      packed(1, {1, 0}) + len(6, packed(1, {8, 128})) + len(6, packed(1, {2, 1})) + num(8, 1);
  std::string dynamic = array_shape(kS32, {4, 16}) + packed(6, {0, 1});
  std::string nested = tuple_shape({tuple_shape({}), array_shape(17, {}), dynamic});
  std::string scalar_space = array_shape(8, {}, num(8, 2));
  std::string main = computation("c", 1,
                                 {{"a", "parameter", array_shape(kBF16, {16, 256}, layout), 1},
                                  {"b", "parameter", nested, 2, {}, {}, num(9, 1)},
                                  {"s", "parameter", scalar_space, 3, {}, {}, num(9, 2)},
                                  {"u", "parameter", array_shape(99, {2}), 4, {}, {}, num(9, 3)}},
                                 1);
  std::string text = hlo_proto_to_text(module("m", {main}, 1));
  EXPECT_THAT(text, HasSubstr("ROOT %a = bf16[16,256]{1,0:T(8,128)(2,1)S(1)} parameter(0)"));
  EXPECT_THAT(text, HasSubstr("%b = ((), token[], s32[4,<=16]) parameter(1)"));
  EXPECT_THAT(text, HasSubstr("%s = u32[]{:S(2)} parameter(2)"));
  EXPECT_THAT(text, HasSubstr("%u = type99[2] parameter(3)"));
}

TEST(HloProtoText, CalleesUnderTheAttributeNamesXlaPrints) {
  std::string body = computation("body", 1, {{"p", "parameter", array_shape(kF32, {}), 1}}, 1);
  std::string cond = computation("cond", 2, {{"q", "parameter", array_shape(kF32, {}), 1}}, 1);
  std::string main =
      computation("main", 3,
                  {{"i", "parameter", array_shape(kF32, {}), 1},
                   {"w",
                    "while",
                    array_shape(kF32, {}),
                    2,
                    {1},
                    {1, 2},
                    len(43, "{\"known_trip_count\":{\"n\":\"6\"}}")},
                   {"k", "conditional", array_shape(kF32, {}), 3, {1}, {1, 2}},
                   {"r", "all-reduce", array_shape(kF32, {}), 4, {1}, {2}},
                   {"a", "async-start", array_shape(kF32, {}), 5, {1}, {1}},
                   {"cc", "custom-call", array_shape(kF32, {}), 6, {1}, {1, 2}, len(28, "tgt\n")},
                   {"s", "send", array_shape(kF32, {}), 7, {1}, {}, num(47, 1)}},
                  7);
  std::string text = hlo_proto_to_text(module("m", {body, cond, main}, 3));
  EXPECT_THAT(text,
              HasSubstr("while(%i), condition=%cond, body=%body, "
                        "backend_config=\"{\\\"known_trip_count\\\":{\\\"n\\\":\\\"6\\\"}}\""));
  EXPECT_THAT(text, HasSubstr("conditional(%i), branch_computations={%body, %cond}"));
  EXPECT_THAT(text, HasSubstr("all-reduce(%i), to_apply=%cond"));
  EXPECT_THAT(text, HasSubstr("async-start(%i), calls=%body"));
  EXPECT_THAT(text, HasSubstr("custom-call(%i), called_computations={%body, %cond}, "
                              "custom_call_target=\"tgt\\n\""));
  EXPECT_THAT(text, HasSubstr("send(%i), is_host_transfer=true"));

  // The analysis reads the trip count from the rendered backend_config.
  Analysis a = analyze_text(text, "m");
  ASSERT_FALSE(a.by_computation.empty());
}

TEST(HloProtoText, OperandIdsMatchTheLow32BitsOfUniqueIds) {
  // XLA's unique ids: computation id << 32 | local id; an operand given by its local id.
  std::int64_t base = std::int64_t{5} << 32;
  std::string main = computation("c", 5,
                                 {{"a", "parameter", array_shape(kF32, {}), base | 1},
                                  {"b", "negate", array_shape(kF32, {}), base | 2, {1}}},
                                 base | 2);
  EXPECT_THAT(hlo_proto_to_text(module("m", {main}, 5)), HasSubstr("ROOT %b = f32[] negate(%a)"));
}

TEST(HloProtoText, SameAnalysisAsTheTextOfTheModule) {
  std::string proto = scheduled_module();
  Analysis from_proto = analyze_text(hlo_proto_to_text(proto), "x");
  ASSERT_EQ(from_proto.collectives.size(), 1u);
  EXPECT_EQ(from_proto.collectives[0].status, Status::kOverlapped);
  EXPECT_EQ(from_proto.collectives[0].bytes, 64);
  EXPECT_EQ(from_proto.collectives[0].op_name, "jit(f)/\"ag\"");
  EXPECT_EQ(from_proto.collectives[0].compute_sample, std::vector<std::string>{"fusion.1"});
}

TEST(HloProtoText, AnalyzeFileDetectsAProtoAndCountsItsBytes) {
  std::string proto = scheduled_module();
  std::string path = (std::filesystem::temp_directory_path() /
                      ("proto_test_" + std::to_string(::getpid()) + ".hlo.pb"))
                         .string();
  {
    std::ofstream out(path, std::ios::binary);
    out << proto;
  }
  Analysis a = analyze_file(path);
  std::filesystem::remove(path);
  EXPECT_EQ(a.module, "m");
  EXPECT_TRUE(a.scheduled);
  EXPECT_EQ(a.bytes_read, proto.size());
  EXPECT_EQ(a.collectives.size(), 1u);
}

// ---- malformed input --------------------------------------------------------------------------

std::string proto_error_of(const std::string& proto) {
  try {
    (void)hlo_proto_to_text(proto);
  } catch (const Error& e) {
    return e.message();
  }
  return "(no error)";
}

TEST(HloProtoErrors, TruncatedAnywhereIsAnErrorNeverACrash) {
  std::string proto = scheduled_module();
  for (std::size_t n = 1; n < proto.size(); ++n) {
    std::string cut = proto.substr(0, n);
    EXPECT_NE(proto_error_of(cut), "(no error)") << n;
  }
}

TEST(HloProtoErrors, SaysWhatIsWrong) {
  // Length past the end.
  EXPECT_THAT(proto_error_of("\x0a\x05\x0a\x01"), HasSubstr("past the end of the message"));
  // A varint that never ends, and one longer than 10 bytes.
  EXPECT_THAT(proto_error_of(std::string("\x0a\x02\x28\xff", 4)), HasSubstr("bad varint"));
  EXPECT_THAT(proto_error_of(cat("\x0a\x0c\x28", std::string(11, '\xff'))),
              HasSubstr("bad varint"));
  // Huge length (2^63).
  EXPECT_THAT(proto_error_of(cat("\x0a", varint(std::uint64_t{1} << 63))),
              HasSubstr("past the end"));
  // Wrong wire type for a field we read: module name (1) as a varint.
  EXPECT_THAT(proto_error_of(len(1, num(1, 7))), HasSubstr("HloModuleProto.name (field 1)"));
  // hlo_module as a varint.
  EXPECT_THAT(proto_error_of(num(1, 3) + std::string("\x12\x00", 2)),
              HasSubstr("HloProto.hlo_module"));
  // Groups and invalid wire types.
  EXPECT_THAT(proto_error_of(len(1, key(9, 3))), HasSubstr("a group"));
  EXPECT_THAT(proto_error_of(len(1, key(9, 7))), HasSubstr("wire type 7"));
  // No module; a name HLO text cannot hold; unknown operand; unknown callee.
  EXPECT_THAT(proto_error_of(num(5, 1)), HasSubstr("no hlo_module"));
  EXPECT_THAT(proto_error_of(module("a b", {}, 0)), HasSubstr("not an HLO name"));
  std::string bad_operand =
      computation("c", 1, {{"a", "negate", array_shape(kF32, {}), 1, {9}}}, 1);
  EXPECT_THAT(proto_error_of(module("m", {bad_operand}, 1)), HasSubstr("instruction id 9"));
  std::string bad_callee =
      computation("c", 1, {{"a", "call", array_shape(kF32, {}), 1, {}, {4}}}, 1);
  EXPECT_THAT(proto_error_of(module("m", {bad_callee}, 1)), HasSubstr("computation id 4"));
  // A schedule that lists an instruction twice or misses one.
  std::string two = computation("c", 1,
                                {{"a", "parameter", array_shape(kF32, {}), 1},
                                 {"b", "negate", array_shape(kF32, {}), 2, {1}}},
                                2);
  EXPECT_THAT(proto_error_of(module("m", {two}, 1, schedule(1, {1, 1}))), HasSubstr("twice"));
  EXPECT_THAT(proto_error_of(module("m", {two}, 1, schedule(1, {2}))),
              HasSubstr("lists 1 of its 2"));
  // Entry id that is no computation.
  EXPECT_THAT(proto_error_of(module("m", {two}, 8)), HasSubstr("entry_computation_id 8"));
}

TEST(HloProtoErrors, TuplesNestedTooDeep) {
  std::string shape = array_shape(kF32, {});
  for (int i = 0; i < 100; ++i) shape = tuple_shape({shape});
  std::string c = computation("c", 1, {{"a", "parameter", shape, 1}}, 1);
  EXPECT_THAT(proto_error_of(module("m", {c}, 1)), HasSubstr("deeper than 64"));
}

TEST(HloProtoErrors, PackedListWithABadVarint) {
  std::string c = len(1, "c") +
                  len(2, len(1, "a") + len(2, "negate") + len(3, array_shape(kF32, {})) +
                             num(35, 1) + len(36, "\xff\xff")) +
                  num(5, 1);
  EXPECT_THAT(proto_error_of(module("m", {c}, 1)), HasSubstr("operand_ids: bad varint"));
}

}  // namespace
}  // namespace rtb::hlo
