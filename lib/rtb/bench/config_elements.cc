#include "rtb/bench/config_elements.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"
#include "rtb/base/literal.h"
#include "rtb/base/text.h"
#include "rtb/k8s/line_diff.h"
#include "rtb/logs/configlog.h"

namespace rtb::bench {
namespace {

using Kind = ElementDifference::Kind;

// --- printing items as Python does ---------------------------------------------------------------

std::string python_string(std::string_view text) {
  // repr() picks single quotes unless the text holds one and no double quote.
  char quote = text.find('\'') != std::string_view::npos && text.find('"') == std::string_view::npos
                   ? '"'
                   : '\'';
  std::string out(1, quote);
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '\\' || c == quote) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out + quote;
}

// Recursion is bounded by the parser's nesting limit.
std::string python_repr(const Literal& value) {
  switch (value.kind) {
    case Literal::Kind::kNone:
      return "None";
    case Literal::Kind::kBool:
      return value.boolean ? "True" : "False";
    case Literal::Kind::kInt:
    case Literal::Kind::kWord:
      return value.text;
    case Literal::Kind::kFloat:
      if (std::isnan(value.number)) return "nan";
      if (std::isinf(value.number)) return value.number > 0 ? "inf" : "-inf";
      return fmt::format("{}", value.number);
    case Literal::Kind::kString:
      return python_string(value.text);
    case Literal::Kind::kList:
    case Literal::Kind::kTuple: {
      bool tuple = value.kind == Literal::Kind::kTuple;
      std::string out = tuple ? "(" : "[";
      for (std::size_t i = 0; i < value.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += python_repr(value.items[i]);
      }
      if (tuple && value.items.size() == 1) out += ',';
      return out + (tuple ? ")" : "]");
    }
    case Literal::Kind::kDict: {
      std::string out = "{";
      for (std::size_t i = 0; i < value.entries.size(); ++i) {
        if (i > 0) out += ", ";
        out += python_repr(value.entries[i].first) + ": " + python_repr(value.entries[i].second);
      }
      return out + "}";
    }
  }
  return value.text;
}

// --- reading ------------------------------------------------------------------------------------

// A value that is a literal container, read as diff-configs compares values (bare words allowed).
std::optional<Literal> container(std::string_view value) {
  std::string_view text = trim(value);
  if (text.empty() || std::string_view("[({").find(text.front()) == std::string_view::npos) {
    return std::nullopt;
  }
  try {
    return parse_literal(text, {.bare_words = true});
  } catch (const Error&) {
    return std::nullopt;
  }
}

bool is_identifier(std::string_view word) {
  if (word.empty() || !(std::isalpha(static_cast<unsigned char>(word[0])) || word[0] == '_')) {
    return false;
  }
  for (std::string_view constant : {"True", "False", "None", "true", "false", "null"}) {
    if (word == constant) return false;
  }
  return std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

// The name of a rule: a sequence of two or more items whose first is a string (quoted, or an
// unquoted name as a YAML flow list writes it).
std::optional<std::string> rule_name(const Literal& item) {
  if (!item.is_sequence() || item.items.size() < 2) return std::nullopt;
  const Literal& first = item.items.front();
  if (first.kind == Literal::Kind::kString) return first.text;
  if (first.kind == Literal::Kind::kWord && is_identifier(first.text)) return first.text;
  return std::nullopt;
}

bool is_rule_list(const Literal& value) {
  return std::all_of(value.items.begin(), value.items.end(),
                     [](const Literal& item) { return rule_name(item).has_value(); });
}

// What follows a rule's name: the second item of a pair, the whole rule otherwise.
std::string rule_value(const Literal& rule) {
  return rule.items.size() == 2 ? python_repr(rule.items[1]) : python_repr(rule);
}

// --- pairing
// --------------------------------------------------------------------------------------

// Marks the pairs that keep their relative order: a longest increasing subsequence of B's
// positions taken in A's order (O(n log n)). The others moved.
std::vector<bool> kept_in_order(const std::vector<std::size_t>& b_positions) {
  std::size_t n = b_positions.size();
  std::vector<std::size_t> tails;           // tails[k]: index of the smallest tail of length k+1
  std::vector<std::size_t> previous(n, n);  // predecessor in the subsequence, n for none
  for (std::size_t i = 0; i < n; ++i) {
    auto at = std::lower_bound(tails.begin(), tails.end(), b_positions[i],
                               [&](std::size_t t, std::size_t v) { return b_positions[t] < v; });
    if (at != tails.begin()) previous[i] = *(at - 1);
    if (at == tails.end()) {
      tails.push_back(i);
    } else {
      *at = i;
    }
  }
  std::vector<bool> kept(n, false);
  for (std::size_t i = tails.empty() ? n : tails.back(); i < n; i = previous[i]) kept[i] = true;
  return kept;
}

struct NamedRule {
  std::string key;  // name, or name#k for its k-th rule
  std::string canonical, shown;
};

std::vector<NamedRule> named_rules(const Literal& list) {
  std::map<std::string, std::size_t> seen;
  std::vector<NamedRule> out;
  for (const Literal& rule : list.items) {
    std::string name = *rule_name(rule);
    std::size_t count = ++seen[name];
    out.push_back({count == 1 ? name : fmt::format("{}#{}", name, count),
                   logs::canonical_config_literal(rule), rule_value(rule)});
  }
  return out;
}

std::vector<ElementDifference> diff_by_name(const Literal& a, const Literal& b) {
  std::vector<NamedRule> left = named_rules(a), right = named_rules(b);
  std::map<std::string, std::size_t> right_index;
  for (std::size_t j = 0; j < right.size(); ++j) right_index[right[j].key] = j;
  std::vector<std::size_t> paired_b;  // B's position of each A rule that B has, in A's order
  for (const NamedRule& rule : left) {
    auto it = right_index.find(rule.key);
    if (it != right_index.end()) paired_b.push_back(it->second);
  }
  std::vector<bool> kept = kept_in_order(paired_b);
  std::vector<ElementDifference> out;
  std::vector<bool> b_paired(right.size(), false);
  std::size_t pair = 0;
  for (std::size_t i = 0; i < left.size(); ++i) {
    auto it = right_index.find(left[i].key);
    if (it == right_index.end()) {
      out.push_back({Kind::kRemoved, left[i].key, i, std::nullopt, left[i].shown, std::nullopt});
      continue;
    }
    std::size_t j = it->second;
    b_paired[j] = true;
    bool moved = !kept[pair++];
    if (left[i].canonical != right[j].canonical) {
      out.push_back({Kind::kChanged, left[i].key, i, j, left[i].shown, right[j].shown, moved});
    } else if (moved) {
      out.push_back({Kind::kMoved, left[i].key, i, j, left[i].shown, right[j].shown, true});
    }
  }
  for (std::size_t j = 0; j < right.size(); ++j) {
    if (!b_paired[j]) {
      out.push_back({Kind::kAdded, right[j].key, std::nullopt, j, std::nullopt, right[j].shown});
    }
  }
  return out;
}

// Pairs items by position along a longest common subsequence of their meanings; within a run
// between common items, the k-th removed item and the k-th added one are one changed item.
std::optional<std::vector<ElementDifference>> diff_by_index(const Literal& a, const Literal& b) {
  std::vector<std::string> left, right;
  for (const Literal& item : a.items) left.push_back(logs::canonical_config_literal(item));
  for (const Literal& item : b.items) right.push_back(logs::canonical_config_literal(item));
  k8s::EditScript script = k8s::edit_script(
      std::vector<std::string_view>(left.begin(), left.end()),
      std::vector<std::string_view>(right.begin(), right.end()), kMaxAlignmentCells);
  if (!script.aligned) return std::nullopt;
  std::vector<ElementDifference> out, removed, added;
  auto shown = [](const Literal& item) { return python_repr(item); };
  auto flush_run = [&]() {
    std::size_t pairs = std::min(removed.size(), added.size());
    for (std::size_t k = 0; k < pairs; ++k) {
      out.push_back({Kind::kChanged, removed[k].key, removed[k].old_index, added[k].new_index,
                     removed[k].old_value, added[k].new_value});
    }
    for (std::size_t k = pairs; k < removed.size(); ++k) out.push_back(removed[k]);
    for (std::size_t k = pairs; k < added.size(); ++k) out.push_back(added[k]);
    removed.clear();
    added.clear();
  };
  for (const k8s::SequenceEdit& edit : script.edits) {
    std::size_t ia = edit.old_index, jb = edit.new_index;
    if (edit.kind == k8s::DiffLine::Kind::kContext) {
      flush_run();
    } else if (edit.kind == k8s::DiffLine::Kind::kRemoved) {
      removed.push_back(
          {Kind::kRemoved, std::to_string(ia), ia, std::nullopt, shown(a.items[ia]), std::nullopt});
    } else {
      added.push_back(
          {Kind::kAdded, std::to_string(jb), std::nullopt, jb, std::nullopt, shown(b.items[jb])});
    }
  }
  flush_run();
  // An item removed in one place and added, equal, in another moved, when it is the only item of
  // its meaning on each side (which of three equal items moved is no fact).
  std::map<std::string, std::pair<std::size_t, std::size_t>> counts;  // meaning -> in A, in B
  for (const std::string& meaning : left) ++counts[meaning].first;
  for (const std::string& meaning : right) ++counts[meaning].second;
  std::map<std::string, std::size_t> added_at;  // meaning -> B's index of the lone added item
  for (const ElementDifference& d : out) {
    if (d.kind == Kind::kAdded) added_at[right[*d.new_index]] = *d.new_index;
  }
  std::vector<ElementDifference> merged;
  for (ElementDifference& d : out) {
    if (d.kind == Kind::kRemoved || d.kind == Kind::kAdded) {
      const std::string& meaning =
          d.kind == Kind::kRemoved ? left[*d.old_index] : right[*d.new_index];
      if (counts[meaning] == std::pair<std::size_t, std::size_t>{1, 1}) {
        if (d.kind == Kind::kAdded) continue;  // reported with its removal
        std::size_t to = added_at[meaning];
        d.kind = Kind::kMoved;
        d.moved = true;
        d.new_index = to;
        d.new_value = shown(b.items[to]);
      }
    }
    merged.push_back(std::move(d));
  }
  // Items of equal-length sequences often mean their position (ici_parallelism's axes): pair
  // them by position unless the alignment tells the story in fewer items.
  if (left.size() == right.size()) {
    std::vector<ElementDifference> by_position;
    for (std::size_t k = 0; k < left.size(); ++k) {
      if (left[k] != right[k]) {
        by_position.push_back(
            {Kind::kChanged, std::to_string(k), k, k, shown(a.items[k]), shown(b.items[k])});
      }
    }
    if (by_position.size() <= merged.size()) return by_position;
  }
  return merged;
}

std::vector<ElementDifference> diff_by_key(const Literal& a, const Literal& b) {
  // Python keeps the last of repeated keys.
  auto last_of = [](const Literal& dict) {
    std::map<std::string, std::size_t> out;
    for (std::size_t i = 0; i < dict.entries.size(); ++i) {
      out[logs::canonical_config_literal(dict.entries[i].first)] = i;
    }
    return out;
  };
  std::map<std::string, std::size_t> left = last_of(a), right = last_of(b);
  auto key_text = [](const Literal& key) {
    return key.kind == Literal::Kind::kString ? key.text : python_repr(key);
  };
  std::vector<ElementDifference> out;
  for (std::size_t i = 0; i < a.entries.size(); ++i) {
    const auto& [key, value] = a.entries[i];
    std::string meaning = logs::canonical_config_literal(key);
    if (left[meaning] != i) continue;
    auto other = right.find(meaning);
    if (other == right.end()) {
      out.push_back({Kind::kRemoved, key_text(key), std::nullopt, std::nullopt, python_repr(value),
                     std::nullopt});
      continue;
    }
    const Literal& new_value = b.entries[other->second].second;
    if (logs::canonical_config_literal(value) != logs::canonical_config_literal(new_value)) {
      out.push_back({Kind::kChanged, key_text(key), std::nullopt, std::nullopt, python_repr(value),
                     python_repr(new_value)});
    }
  }
  for (std::size_t j = 0; j < b.entries.size(); ++j) {
    const auto& [key, value] = b.entries[j];
    std::string meaning = logs::canonical_config_literal(key);
    if (right[meaning] != j || left.count(meaning)) continue;
    out.push_back({Kind::kAdded, key_text(key), std::nullopt, std::nullopt, std::nullopt,
                   python_repr(value)});
  }
  return out;
}

}  // namespace

std::string_view element_kind_name(ElementDifference::Kind kind) {
  return enum_name<ElementDifference::Kind::kMoved>(kind, {"added", "removed", "changed", "moved"});
}

std::string_view pairing_name(ElementPairing pairing) {
  return enum_name<ElementPairing::kByKey>(pairing, {"name", "index", "key"});
}

std::optional<ElementDiff> diff_elements(std::string_view a, std::string_view b) {
  std::optional<Literal> left = container(a), right = container(b);
  if (!left || !right) return std::nullopt;
  ElementDiff out;
  if (left->is_dict() && right->is_dict()) {
    out = {ElementPairing::kByKey, diff_by_key(*left, *right)};
  } else if (left->is_sequence() && right->is_sequence()) {
    bool by_name = is_rule_list(*left) && is_rule_list(*right) &&
                   !(left->items.empty() && right->items.empty());
    if (by_name) {
      out = {ElementPairing::kByName, diff_by_name(*left, *right)};
    } else {
      std::optional<std::vector<ElementDifference>> by_index = diff_by_index(*left, *right);
      if (!by_index) return std::nullopt;
      out = {ElementPairing::kByIndex, std::move(*by_index)};
    }
  } else {
    return std::nullopt;
  }
  if (out.differences.empty()) return std::nullopt;
  return out;
}

}  // namespace rtb::bench
