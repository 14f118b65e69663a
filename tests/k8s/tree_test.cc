#include "rtb/k8s/tree.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "rtb/k8s/yaml.h"

namespace rtb::k8s {
namespace {

TEST(Tree, CopiesWhatAYamlCppTreeHolds) {
  YAML::Node node = YAML::Load(
      "a: \"4\"\nb: [1, {c: ~}]\nrepeated: 1\nrepeated: 2\nempty:\n? [complex, key]\n: v\n");
  Tree tree = tree_of(node);
  Tree::Id root = tree.root();
  ASSERT_TRUE(tree.is_map(root));
  EXPECT_EQ(tree.size(root), 6u);
  Tree::Id a = tree.find(root, "a");
  EXPECT_EQ(tree.scalar(a), "4");
  EXPECT_EQ(tree.tag(a), "!");
  Tree::Id b = tree.find(root, "b");
  ASSERT_TRUE(tree.is_sequence(b));
  EXPECT_TRUE(tree.at(b).flow);
  EXPECT_EQ(tree.type(tree.find(tree.item(b, 1), "c")), Tree::Type::kNull);
  EXPECT_EQ(tree.scalar(tree.find(root, "repeated")), "2") << "the last repeated key wins";
  EXPECT_EQ(tree.type(tree.find(root, "empty")), Tree::Type::kNull);
  EXPECT_EQ(tree.key_text(root, 5), "") << "a non-scalar key has no text";
  EXPECT_EQ(tree.find(root, "missing"), Tree::kNone);
  EXPECT_EQ(tree.find(a, "a"), Tree::kNone) << "a scalar has no keys";
  EXPECT_EQ(tree.descend(root, {"b", "c"}), Tree::kNone);
  EXPECT_EQ(tree_of(YAML::Node(YAML::NodeType::Undefined)).root(), Tree::kNone);
}

TEST(Tree, BackToYamlCppEmitsTheSameDocument) {
  const std::string text =
      "a: \"4\"\nb: [1, 2]\nrepeated: 1\nrepeated: 2\nscript: |\n  echo hi\n  echo there\n"
      "list:\n- name: x\n  value: ~\n";
  YAML::Node node = YAML::Load(text);
  YAML::Node back = yaml_of(tree_of(node));
  EXPECT_EQ(yaml::emit(back), yaml::emit(node));
  EXPECT_EQ(yaml_of(Tree()).IsDefined(), false);
}

TEST(Tree, SetReplacesTheFirstKeyAndAppendsANewOne) {
  Tree tree = tree_of(YAML::Load("k: 1\nk: 2\n"));
  Tree::Id root = tree.root();
  tree.set(root, "k", tree.add_string("first"));
  EXPECT_EQ(tree.scalar(tree.value(root, 0)), "first");
  EXPECT_EQ(tree.scalar(tree.find(root, "k")), "2");
  tree.set(root, "new", tree.add_scalar("3"));
  EXPECT_EQ(tree.size(root), 3u);
  EXPECT_EQ(tree.key_text(root, 2), "new");
  EXPECT_TRUE(tree.remove(root, "k"));
  EXPECT_EQ(tree.size(root), 2u);
  EXPECT_EQ(tree.scalar(tree.find(root, "k")), "2");
  EXPECT_FALSE(tree.remove(root, "absent"));
}

TEST(Tree, StringsStayStringsAndMustBeUtf8) {
  Tree tree;
  Tree::Id id = tree.add_string("4");
  EXPECT_EQ(tree.tag(id), "!");
  EXPECT_EQ(yaml::emit(yaml_of(tree, id)), "\"4\"\n");
  EXPECT_ANY_THROW(tree.add_string("\xff"));
}

TEST(Tree, DeepTreesNeedNoRecursion) {
  // 100,000 nested one-item sequences: built, copied both ways and destroyed without recursion.
  YAML::Node deep(YAML::NodeType::Sequence);
  YAML::Node current = deep;
  for (int i = 0; i < 100'000; ++i) {
    YAML::Node child(YAML::NodeType::Sequence);
    current.push_back(child);
    current.reset(child);
  }
  Tree tree = tree_of(deep);
  Tree::Id id = tree.root();
  int depth = 0;
  while (tree.size(id) == 1) {
    id = tree.item(id, 0);
    ++depth;
  }
  EXPECT_EQ(depth, 100'000);
  EXPECT_TRUE(yaml_of(tree).IsSequence());
}

}  // namespace
}  // namespace rtb::k8s
