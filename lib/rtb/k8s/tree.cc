#include "rtb/k8s/tree.h"

#include <utility>

#include "rtb/k8s/yaml.h"

namespace rtb::k8s {

std::size_t Tree::size(Id id) const {
  const Node& node = nodes_[id];
  if (node.type == Type::kMap) return node.children.size() / 2;
  if (node.type == Type::kSequence) return node.children.size();
  return 0;
}

Tree::Id Tree::find(Id map, std::string_view key) const {
  if (!is_map(map)) return kNone;
  const std::vector<Id>& children = nodes_[map].children;
  for (std::size_t i = children.size(); i >= 2; i -= 2) {
    Id k = children[i - 2];
    if (is_scalar(k) && nodes_[k].scalar == key) return children[i - 1];
  }
  return kNone;
}

Tree::Id Tree::descend(Id id, std::initializer_list<std::string_view> keys) const {
  for (std::string_view key : keys) id = find(id, key);
  return id;
}

Tree::Id Tree::add(Node node) {
  nodes_.push_back(std::move(node));
  return static_cast<Id>(nodes_.size() - 1);
}

Tree::Id Tree::add_scalar(std::string text, std::string tag) {
  return add({Type::kScalar, false, std::move(tag), std::move(text), {}});
}

Tree::Id Tree::add_string(std::string_view value) {
  yaml::require_utf8(value);
  return add_scalar(std::string(value), std::string(yaml::kStringTag));
}

Tree::Id Tree::add_map(std::string tag) { return add({Type::kMap, false, std::move(tag), {}, {}}); }

Tree::Id Tree::add_sequence() { return add({Type::kSequence, false, {}, {}, {}}); }

void Tree::append(Id map, Id key, Id value) {
  std::vector<Id>& children = nodes_[map].children;
  children.push_back(key);
  children.push_back(value);
}

void Tree::push_back(Id sequence, Id item) { nodes_[sequence].children.push_back(item); }

std::size_t Tree::first_key(Id map, std::string_view key) const {
  const std::vector<Id>& children = nodes_[map].children;
  for (std::size_t i = 0; i + 1 < children.size(); i += 2) {
    if (is_scalar(children[i]) && nodes_[children[i]].scalar == key) return i;
  }
  return std::string_view::npos;
}

void Tree::set(Id map, std::string_view key, Id value) {
  std::size_t at = first_key(map, key);
  if (at != std::string_view::npos) {
    nodes_[map].children[at + 1] = value;
    return;
  }
  Id key_id = add_scalar(std::string(key));  // before taking a reference: adding moves nodes_
  nodes_[map].children.push_back(key_id);
  nodes_[map].children.push_back(value);
}

bool Tree::remove(Id map, std::string_view key) {
  std::size_t at = first_key(map, key);
  if (at == std::string_view::npos) return false;
  std::vector<Id>& children = nodes_[map].children;
  children.erase(children.begin() + static_cast<std::ptrdiff_t>(at),
                 children.begin() + static_cast<std::ptrdiff_t>(at + 2));
  return true;
}

Tree tree_of(const YAML::Node& node) {
  Tree tree;
  if (!node.IsDefined()) return tree;
  tree.set_root(tree.add({}));
  std::vector<std::pair<YAML::Node, Tree::Id>> pending;
  pending.emplace_back(node, tree.root());
  while (!pending.empty()) {
    auto [source, target] = std::move(pending.back());
    pending.pop_back();
    Tree::Node copy;
    copy.tag = source.Tag();
    switch (source.Type()) {
      case YAML::NodeType::Scalar:
        copy.type = Tree::Type::kScalar;
        copy.scalar = source.Scalar();
        break;
      case YAML::NodeType::Sequence:
        copy.type = Tree::Type::kSequence;
        copy.flow = source.Style() == YAML::EmitterStyle::Flow;
        for (const auto& item : source) {
          Tree::Id id = item.IsDefined() ? tree.add({}) : Tree::kNone;
          copy.children.push_back(id);
          if (id != Tree::kNone) pending.emplace_back(item, id);
        }
        break;
      case YAML::NodeType::Map:
        copy.type = Tree::Type::kMap;
        copy.flow = source.Style() == YAML::EmitterStyle::Flow;
        for (const auto& kv : source) {  // yaml-cpp's iteration skips undefined entries
          Tree::Id key = tree.add({});
          Tree::Id value = tree.add({});
          copy.children.push_back(key);
          copy.children.push_back(value);
          pending.emplace_back(kv.first, key);
          pending.emplace_back(kv.second, value);
        }
        break;
      default:  // Null (an undefined node is only ever the root, handled above)
        copy.type = Tree::Type::kNull;
        copy.scalar = source.Scalar();
        break;
    }
    tree.at(target) = std::move(copy);
  }
  return tree;
}

namespace {

// A childless yaml-cpp node with a tree node's type, tag, text and style.
YAML::Node childless_node(const Tree::Node& node) {
  YAML::Node out;
  switch (node.type) {
    case Tree::Type::kScalar:
      out = YAML::Node(node.scalar);
      break;
    case Tree::Type::kSequence:
      out = YAML::Node(YAML::NodeType::Sequence);
      break;
    case Tree::Type::kMap:
      out = YAML::Node(YAML::NodeType::Map);
      break;
    case Tree::Type::kNull:
      out = YAML::Node(YAML::NodeType::Null);
      break;
  }
  if (!node.tag.empty()) out.SetTag(node.tag);
  if (node.flow) out.SetStyle(YAML::EmitterStyle::Flow);
  return out;
}

}  // namespace

YAML::Node yaml_of(const Tree& tree, Tree::Id id) {
  if (id == Tree::kNone) return YAML::Node(YAML::NodeType::Undefined);
  YAML::Node root = childless_node(tree.at(id));
  // A child is linked into its parent before it is filled: yaml-cpp nodes share their data, so
  // filling the handle fills the node in the tree.
  std::vector<std::pair<Tree::Id, YAML::Node>> pending{{id, root}};
  while (!pending.empty()) {
    auto [source, target] = std::move(pending.back());
    pending.pop_back();
    const Tree::Node& node = tree.at(source);
    if (node.type == Tree::Type::kSequence) {
      for (Tree::Id item : node.children) {
        YAML::Node child =
            item == Tree::kNone ? YAML::Node(YAML::NodeType::Null) : childless_node(tree.at(item));
        target.push_back(child);
        if (item != Tree::kNone) pending.emplace_back(item, child);
      }
    } else if (node.type == Tree::Type::kMap) {
      for (std::size_t i = 0; i + 1 < node.children.size(); i += 2) {
        YAML::Node key = childless_node(tree.at(node.children[i]));
        YAML::Node value = childless_node(tree.at(node.children[i + 1]));
        target.force_insert(key, value);  // keeps a repeated key, as a loaded tree does
        pending.emplace_back(node.children[i], key);
        pending.emplace_back(node.children[i + 1], value);
      }
    }
  }
  return root;
}

}  // namespace rtb::k8s
