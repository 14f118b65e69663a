// Tests of bench/config_elements.h: element differences of config values, on MaxText's real
// logical_axis_rules (testdata/configlog_maxtext_grpo_demo_*, see SOURCES.md) and small values.
#include "rtb/bench/config_elements.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rtb/base/io.h"
#include "rtb/logs/configlog.h"
#include "test_util.h"

namespace rtb::bench {
namespace {

using Kind = ElementDifference::Kind;

// "kind key old_index->new_index: old -> new" for each difference, `-` for a missing part.
std::vector<std::string> described(const std::optional<ElementDiff>& diff) {
  std::vector<std::string> out;
  if (!diff) return out;
  auto index = [](const std::optional<std::size_t>& i) { return i ? std::to_string(*i) : "-"; };
  for (const ElementDifference& d : diff->differences) {
    out.push_back(std::string(element_kind_name(d.kind)) + (d.moved ? "(moved) " : " ") + d.key +
                  " " + index(d.old_index) + "->" + index(d.new_index) + ": " +
                  d.old_value.value_or("-") + " -> " + d.new_value.value_or("-"));
  }
  return out;
}

std::string config_value(const char* file, const std::string& key) {
  logs::ConfigLog log = logs::read_config_log(test::testdata(file));
  for (const logs::ConfigSetting& s : log.params) {
    if (s.key == key) return s.value;
  }
  ADD_FAILURE() << file << " has no " << key;
  return "";
}

const char* k64Rules = "configlog_maxtext_grpo_demo_0ac2a42e_cell27_64rules.log";
const char* k63Rules = "configlog_maxtext_grpo_demo_1a9d434c_cell27_63rules.log";

TEST(DiffElements, RealLogicalAxisRulesOneRuleRemoved) {
  std::string a = config_value(k64Rules, "logical_axis_rules");
  std::string b = config_value(k63Rules, "logical_axis_rules");
  ASSERT_GT(a.size(), 3000u);
  std::optional<ElementDiff> diff = diff_elements(a, b);
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->pairing, ElementPairing::kByName);
  // The later rules shift by one index, but keep their order: nothing moved.
  EXPECT_EQ(described(diff), std::vector<std::string>{"removed embed_tensor_transpose 39->-: "
                                                      "('tensor_transpose',) -> -"});
  // And back: the rule is added at B's index.
  EXPECT_EQ(described(diff_elements(b, a)),
            std::vector<std::string>{"added embed_tensor_transpose -->39: - -> "
                                     "('tensor_transpose',)"});
}

TEST(DiffElements, RepeatedRuleNamesPairInOrder) {
  // MaxText lists fallback rules for one logical axis in order: the second is `name#2`.
  std::string a =
      "(('batch', ('data',)), ('length', ('sequence', 'context')), ('length', ('context',)))";
  std::string b =
      "(('batch', ('data',)), ('length', ('sequence', 'context')), ('length', ('fsdp',)))";
  EXPECT_EQ(described(diff_elements(a, b)),
            std::vector<std::string>{"changed length#2 2->2: ('context',) -> ('fsdp',)"});
}

TEST(DiffElements, MovedAndChangedRules) {
  std::string a = "[['norm', ['tensor']], ['embed', ['fsdp']], ['heads', ['tensor']], ['mlp', []]]";
  std::string b =
      "[['embed', ['fsdp']], ['heads', ['tensor']], ['norm', ['tensor', 'x']], ['mlp', []]]";
  EXPECT_EQ(described(diff_elements(a, b)),
            std::vector<std::string>{"changed(moved) norm 0->2: ['tensor'] -> ['tensor', 'x']"});
  std::string c = "[['embed', ['fsdp']], ['norm', ['tensor']], ['heads', ['tensor']], ['mlp', []]]";
  EXPECT_EQ(described(diff_elements(a, c)),
            std::vector<std::string>{"moved(moved) norm 0->1: ['tensor'] -> ['tensor']"});
}

TEST(DiffElements, RulesAddedToAnEmptyList) {
  EXPECT_EQ(described(diff_elements("[]", "[['norm', 'tensor']]")),
            std::vector<std::string>{"added norm -->0: - -> 'tensor'"});
}

TEST(DiffElements, PlainSequenceByIndex) {
  std::optional<ElementDiff> diff = diff_elements("[1, 1, -1, 1, 1, 1, 1, 1, 1, 1, 1, 1]",
                                                  "[1, 1, -1, 1, 1, 8, 1, 1, 1, 1, 1, 1]");
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->pairing, ElementPairing::kByIndex);
  EXPECT_EQ(described(diff), std::vector<std::string>{"changed 5 5->5: 1 -> 8"});
}

TEST(DiffElements, EqualLengthsPairByPositionUnlessAligningSaysLess) {
  // The real dcn_parallelism and mesh_axes of configlog_maxtext_dpo_* against
  // configlog_maxtext_grpo_llama3.1-8b_*: axes swap places in the first, an axis is dropped and
  // another added in the second.
  EXPECT_EQ(described(diff_elements("[1, -1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]",
                                    "[-1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]")),
            (std::vector<std::string>{"changed 0 0->0: 1 -> -1", "changed 1 1->1: -1 -> 1"}));
  EXPECT_EQ(
      described(diff_elements(
          "['diloco', 'data', 'stage', 'fsdp', 'fsdp_transpose', 'context', 'tensor']",
          "['data', 'stage', 'fsdp', 'fsdp_transpose', 'sequence', 'context', 'tensor']")),
      (std::vector<std::string>{"removed 0 0->-: 'diloco' -> -", "added 4 -->4: - -> 'sequence'"}));
}

TEST(DiffElements, InsertedItemIsOneAddition) {
  EXPECT_EQ(
      described(diff_elements("['data', 'fsdp', 'tensor']", "['data', 'stage', 'fsdp', 'tensor']")),
      std::vector<std::string>{"added 1 -->1: - -> 'stage'"});
  EXPECT_EQ(described(diff_elements("['a', 'b', 'c', 'd']", "['b', 'c', 'd', 'e']")),
            (std::vector<std::string>{"removed 0 0->-: 'a' -> -", "added 3 -->3: - -> 'e'"}));
}

TEST(DiffElements, MovedItemOfAPlainSequence) {
  EXPECT_EQ(described(diff_elements("['a', 'b', 'c', 'd']", "['b', 'c', 'a', 'd']")),
            std::vector<std::string>{"moved(moved) 0 0->2: 'a' -> 'a'"});
}

TEST(DiffElements, DictsByKeyInAnyOrder) {
  EXPECT_EQ(described(diff_elements("{'a': 1, 'b': [1, 2], 'c': None}",
                                    "{'b': [1, 3], 'a': 1.0, 'd': 'x'}")),
            (std::vector<std::string>{"changed b -->-: [1, 2] -> [1, 3]",
                                      "removed c -->-: None -> -", "added d -->-: - -> 'x'"}));
}

TEST(DiffElements, ItemsCompareByMeaning) {
  // True/true and 1.0/1 are one value; a quoted '1' is not 1 (logs::canonical_config_value).
  EXPECT_FALSE(diff_elements("[True, 1.0]", "[true, 1]"));
  EXPECT_EQ(described(diff_elements("[1, 2]", "['1', 2]")),
            std::vector<std::string>{"changed 0 0->0: 1 -> '1'"});
}

TEST(DiffElements, WholeValuesWhenNotTwoContainersOfOneFamily) {
  EXPECT_FALSE(diff_elements("bfloat16", "float32"));
  EXPECT_FALSE(diff_elements("[1, 2]", "{'a': 1}"));
  EXPECT_FALSE(diff_elements("[1, 2", "[1, 3]"));               // not a literal
  EXPECT_FALSE(diff_elements("{'a': 1, 'a': 2}", "{'a': 2}"));  // Python keeps the last key
}

TEST(DiffElements, StringsPrintedAsReprDoes) {
  EXPECT_EQ(described(diff_elements(R"(["it's", 'a\nb'])", R"(["it's", 'a\\b'])")),
            std::vector<std::string>{R"(changed 1 1->1: 'a\nb' -> 'a\\b')"});
}

TEST(DiffElements, AlignmentTooLargeGivesUp) {
  // Two sequences whose middles differ everywhere need n*m cells to align.
  std::string a = "[", b = "[";
  for (int i = 0; i < 2100; ++i) {
    a += std::to_string(2 * i) + ",";
    b += std::to_string(2 * i + 1) + ",";
  }
  a += "]";
  b += "]";
  EXPECT_FALSE(diff_elements(a, b));
  EXPECT_TRUE(diff_elements("[0, 1]", "[0, 2]"));
}

}  // namespace
}  // namespace rtb::bench
