// Tests of the opcode tables of the overlap analysis (opcodes.h).
#include "rtb/hlo/opcodes.h"

#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <string_view>

#include "test_util.h"

namespace rtb::hlo {
namespace {

TEST(HloOpcodes, RolesOfTheOpcodesTheAnalysisCaresAbout) {
  for (const char* op : {"fusion", "dot", "convolution", "custom-call"}) {
    EXPECT_EQ(opcode_role(op), OpcodeRole::kCompute) << op;
  }
  for (const char* op : {"while", "call", "conditional"}) {
    EXPECT_EQ(opcode_role(op), OpcodeRole::kCall) << op;
  }
  for (const char* op : {"all-gather", "all-reduce", "all-to-all", "reduce-scatter",
                         "ragged-all-to-all", "collective-permute", "collective-broadcast"}) {
    EXPECT_EQ(opcode_role(op), OpcodeRole::kSync) << op;
  }
  for (const char* op : {"all-gather-start", "async-start", "copy-start", "send", "recv"}) {
    EXPECT_EQ(opcode_role(op), OpcodeRole::kStart) << op;
  }
  EXPECT_EQ(opcode_role("async-update"), OpcodeRole::kUpdate);
  for (const char* op : {"all-gather-done", "async-done", "send-done", "recv-done"}) {
    EXPECT_EQ(opcode_role(op), OpcodeRole::kDone) << op;
  }
  for (const char* op : {"", "add", "start", "done", "fusio", "fusions", "while-loop"}) {
    EXPECT_EQ(opcode_role(op), OpcodeRole::kOther) << op;
  }
}

TEST(HloOpcodes, EveryPlainOpcodeHasItsTagAndOthersNone) {
  for (std::size_t i = 0; i < std::size(kPlainOpcodes); ++i) {
    EXPECT_EQ(plain_opcode_tag(kPlainOpcodes[i]), i + 1) << kPlainOpcodes[i];
    EXPECT_EQ(opcode_role(kPlainOpcodes[i]), OpcodeRole::kOther) << kPlainOpcodes[i];
  }
  for (const char* op : {"", "fusion", "all-gather-start", "some-new-op", "adds", "ad"}) {
    EXPECT_EQ(plain_opcode_tag(op), 0) << op;
  }
}

TEST(HloOpcodes, CategoryAndKindOfAsynchronousOps) {
  for (const char* kind : {"all-gather", "send", "all-gather+reduce-scatter"}) {
    EXPECT_EQ(category_of(kind), Category::kCollective) << kind;
  }
  EXPECT_EQ(category_of("copy"), Category::kCopy);
  for (const char* kind : {"all-gather+slice", "async", ""}) {
    EXPECT_EQ(category_of(kind), Category::kOther) << kind;
  }
  test::expect_cases<std::string_view, std::string_view>(
      sugar_kind, {{"all-gather-start", "all-gather"},
                   {"collective-permute-done", "collective-permute"},
                   {"async-update", "async"},
                   {"send-done", "send"},
                   {"recv", "recv"},
                   {"-start", "-start"},
                   {"", "async"}});
}

}  // namespace
}  // namespace rtb::hlo
