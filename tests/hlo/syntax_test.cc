// Tests of the HLO statement parsers (hlo_syntax): element sizes, shapes, instruction heads,
// operands, attributes, op_name and known_trip_count.
#include "rtb/hlo/syntax.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "test_util.h"

namespace rtb::hlo {
namespace {

// ---- hlo_syntax ---------------------------------------------------------------------------------

TEST(HloSyntax, ElementBitsCoverAllTypes) {
  test::expect_cases<int, std::string_view>(element_bits, {{"pred", 8},
                                                           {"s4", 4},
                                                           {"u4", 4},
                                                           {"s8", 8},
                                                           {"bf16", 16},
                                                           {"f16", 16},
                                                           {"f32", 32},
                                                           {"u64", 64},
                                                           {"c64", 64},
                                                           {"c128", 128},
                                                           {"f8e4m3fn", 8},
                                                           {"f8e5m2", 8},
                                                           {"f8e4m3b11fnuz", 8},
                                                           {"f8e8m0fnu", 8},
                                                           {"f4e2m1fn", 4},
                                                           {"token", 0},
                                                           {"f33", -1},
                                                           {"banana", -1}});
}

TEST(HloSyntax, ShapeBytesOfArraysTuplesAndLayouts) {
  test::expect_cases<std::optional<std::int64_t>, std::string_view>(
      shape_bytes, {{"f32[]", 4},
                    {"bf16[1,4096,32,128]{1,3,2,0:T(8,128)(2,1)S(1)}", 1 * 4096 * 32 * 128 * 2},
                    {"s4[3]{0}", 2},  // 12 bits round up to 2 bytes
                    {"pred[16]{0}", 16},
                    {"token[]", 0},
                    {"u32[]{:S(2)}", 4},
                    {"f32[<=8,4]", 128},
                    {"f32[1024, 1024]{1,0:T(8,128)}", 4 << 20},
                    {"((s8[64]{0}), s8[8]{0:S(1)}, s32[]{:S(2)})", 64 + 8 + 4},
                    {"(f32[2], /*index=1*/(bf16[4], (f8e5m2[8], token[])))", 8 + 8 + 8},
                    {"()", 0},
                    {"f32[?]", std::nullopt},
                    {"q7[4]", std::nullopt},
                    {"(f32[2], q7[4])", std::nullopt}});
}

TEST(HloSyntax, TupleElementBytesAreTopLevel) {
  EXPECT_THAT(*tuple_element_bytes("((f32[2], f32[2]), (f32[8], f32[8]), u32[], u32[])"),
              ElementsAre(16, 64, 4, 4));
  EXPECT_THAT(*tuple_element_bytes("f32[4]"), ElementsAre(16));
}

TEST(HloSyntax, ShapeLengthStopsAtTheShapeEnd) {
  EXPECT_EQ(shape_length("f32[4]{0} all-reduce(x)"), 9u);
  EXPECT_EQ(shape_length("(f32[4], (u32[], s32[])) copy-start(x)"), 24u);
  EXPECT_EQ(shape_length("%x, %y"), 0u);
  bool incomplete = false;
  EXPECT_EQ(shape_length("(f32[4],", &incomplete), 0u);
  EXPECT_TRUE(incomplete);
}

TEST(HloSyntax, ParsesInstructionHeads) {
  InstructionHead head;
  ASSERT_EQ(parse_instruction_head(
                "  ROOT %ag-done.2 = f32[2,8]{1,0:T(8,128)} all-gather-done((f32[1,8], f32[2,8]) "
                "%ag-start.2), metadata={op_name=\"x\"}",
                head),
            HeadStatus::kOk);
  EXPECT_TRUE(head.root);
  EXPECT_EQ(head.name, "ag-done.2");
  EXPECT_EQ(head.shape, "f32[2,8]{1,0:T(8,128)}");
  EXPECT_EQ(head.opcode, "all-gather-done");
  EXPECT_EQ(head.call.substr(0, 10), "((f32[1,8]");

  ASSERT_EQ(parse_instruction_head("p0 = f32[1024, 1024]{1,0} parameter(5)", head),
            HeadStatus::kOk);
  EXPECT_FALSE(head.root);
  EXPECT_EQ(head.name, "p0");
  EXPECT_EQ(head.shape, "f32[1024, 1024]{1,0}");
  EXPECT_EQ(head.opcode, "parameter");

  ASSERT_EQ(parse_instruction_head("%t = (f32[], (u32[], token[])) tuple(%a, %b)", head),
            HeadStatus::kOk);
  EXPECT_EQ(head.shape, "(f32[], (u32[], token[]))");

  ASSERT_EQ(parse_instruction_head("ROOT all-reduce = bf16[8]{0}\n    all-reduce(p0)", head),
            HeadStatus::kOk);
  EXPECT_EQ(head.opcode, "all-reduce");
}

TEST(HloSyntax, HeadsCutBeforeTheOpcodeAreIncomplete) {
  InstructionHead head;
  for (const char* text :
       {"  ROOT %x = bf16[8]{0}", "  %x = (f32[2],", "  %x =", "  %x = f32[2] all-gather"}) {
    EXPECT_EQ(parse_instruction_head(text, head), HeadStatus::kIncomplete) << text;
  }
  for (const char* text :
       {"}", "", "\"barrier_config\":{},", "this is not one", "%x = f32[2] {0} add(a)"}) {
    EXPECT_EQ(parse_instruction_head(text, head), HeadStatus::kNotInstruction) << text;
  }
}

TEST(HloSyntax, FirstOperandNameSkipsTypesAndComments) {
  test::expect_cases<std::string_view, std::string_view>(
      first_operand_name, {{"%ag-start", "ag-start"},
                           {"ag-start, %x", "ag-start"},
                           {"\n      f32[2,8,256,256] %ar-start", "ar-start"},
                           {"((c64[8]{0}), c64[8]{0}) %all-to-all-start", "all-to-all-start"},
                           {"/*index=0*/%copy-start.3", "copy-start.3"},
                           {"token[] %t", "t"},
                           {"", ""}});
}

TEST(HloSyntax, AttributesSplitAtTopLevelCommas) {
  std::string_view cursor =
      ", channel_id=1, replica_groups=mesh['axis_0'=1,'axis_2'=4] {'axis_2'}, dimensions={3},\n"
      "  metadata={op_name=\"a, b\" source_line=3}, backend_config=\"{\\\"x\\\":\\\"},\\\"}\", "
      "control-predecessors={%recv}";
  std::vector<std::pair<std::string, std::string>> got;
  std::string_view key;
  std::string_view value;
  while (next_attribute(cursor, key, value)) got.emplace_back(key, value);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[0], std::make_pair(std::string("channel_id"), std::string("1")));
  EXPECT_EQ(got[1].second, "mesh['axis_0'=1,'axis_2'=4] {'axis_2'}");
  EXPECT_EQ(got[2].second, "{3}");
  EXPECT_EQ(got[3].second, "{op_name=\"a, b\" source_line=3}");
  EXPECT_EQ(got[4].first, "backend_config");
  EXPECT_EQ(got[4].second, "\"{\\\"x\\\":\\\"},\\\"}\"");
  EXPECT_EQ(got[5].first, "control-predecessors");
}

TEST(HloSyntax, MetadataOpNameResolvesEscapes) {
  test::expect_cases<std::string_view, std::string_view>(
      metadata_op_name,
      {{"{op_type=\"AllGather\" op_name=\"ag0\"}", "ag0"},
       {"{op_name=\"jit(f)/\\\"x\\\" and \\'y\\'\" source_line=2}", "jit(f)/\"x\" and 'y'"},
       {"{deduplicated_op_name=\"no\" op_name=\"yes\"}", "yes"},
       {"{source_line=2}", ""}});
}

TEST(HloSyntax, KnownTripCountInJsonAndEscapedForms) {
  test::expect_cases<std::optional<std::int64_t>, std::string_view>(
      known_trip_count, {{"{\"known_trip_count\":{\"n\":\"10\"},\"x\":1}", 10},
                         {"\"{\\\"known_trip_count\\\":{\\\"n\\\":\\\"6\\\"}}\"", 6},
                         {"{\"known_trip_count\":{\"n\":\"0\"}}", 0},
                         {"{\"known_init_step\":{\"init\":\"0\"}}", std::nullopt},
                         {"{\"known_trip_count\":{\"n\":\"x\"}}", std::nullopt}});
}

TEST(HloSyntax, ComputationRefs) {
  EXPECT_THAT(computation_refs("%body.3"), ElementsAre("body.3"));
  EXPECT_THAT(computation_refs("{%a, b, %c.1}"), ElementsAre("a", "b", "c.1"));
}

}  // namespace
}  // namespace rtb::hlo
