#include "rtb/k8s/flags.h"

#include <algorithm>

#include "rtb/base/error.h"

namespace rtb::k8s {
namespace {

constexpr std::string_view kBlanks = " \t\n";

// For kDashDash: the text after `--` up to the first `=` ("" for `--`, `--=v` or a non-flag).
std::string_view dash_dash_name(std::string_view item) {
  if (!item.starts_with("--")) return {};
  std::string_view body = item.substr(2);
  return body.substr(0, body.find('='));
}

bool negated(std::string_view item) {
  std::string_view name = dash_dash_name(item);
  return name.size() > 3 && name.starts_with("no-") && name.size() + 2 == item.size();
}

}  // namespace

std::string_view flag_key(std::string_view item, FlagStyle style) {
  if (style == FlagStyle::kKeyValue) {
    std::size_t equals = item.find('=');
    return equals == std::string_view::npos ? std::string_view() : item.substr(0, equals);
  }
  std::string_view name = dash_dash_name(item);
  return negated(item) ? name.substr(3) : name;
}

std::optional<std::string_view> flag_value(std::string_view item, FlagStyle style) {
  if (flag_key(item, style).empty()) return std::nullopt;
  std::size_t equals = item.find('=');
  if (equals == std::string_view::npos) return std::nullopt;
  return item.substr(equals + 1);
}

bool is_negated(std::string_view item, FlagStyle style) {
  return style == FlagStyle::kDashDash && negated(item);
}

FlagList::FlagList(FlagStyle style, std::vector<std::string> items)
    : style_(style), items_(std::move(items)) {
  if (style_ == FlagStyle::kKeyValue) {
    for (const std::string& item : items_) checked_key(item);
  }
}

std::vector<std::string> split_flag_items(std::string_view text) {
  std::vector<std::string> items;
  for (std::size_t start = text.find_first_not_of(kBlanks); start != std::string_view::npos;) {
    std::size_t end = std::min(text.find_first_of(kBlanks, start), text.size());
    items.emplace_back(text.substr(start, end - start));
    start = text.find_first_not_of(kBlanks, end);
  }
  return items;
}

FlagList FlagList::parse(std::string_view text, FlagStyle style) {
  return FlagList(style, split_flag_items(text));
}

std::string FlagList::str() const {
  std::string joined;
  for (const std::string& item : items_) {
    if (&item != &items_.front()) joined += ' ';
    joined += item;
  }
  return joined;
}

std::optional<std::size_t> FlagList::find(std::string_view key) const {
  if (key.empty()) return std::nullopt;
  for (std::size_t i = items_.size(); i-- > 0;) {
    if (flag_key(items_[i], style_) == key) return i;
  }
  return std::nullopt;
}

std::size_t FlagList::count(std::string_view key) const {
  if (key.empty()) return 0;
  return std::count_if(items_.begin(), items_.end(),
                       [&](const std::string& item) { return flag_key(item, style_) == key; });
}

std::optional<std::string> FlagList::value(std::string_view key) const {
  std::optional<std::size_t> at = find(key);
  if (!at) return std::nullopt;
  std::optional<std::string_view> value = flag_value(items_[*at], style_);
  return value ? std::optional<std::string>(*value) : std::nullopt;
}

FlagList::Edit FlagList::upsert(std::string_view item, std::optional<std::size_t> append_at) {
  std::string_view key = checked_key(item);
  if (std::optional<std::size_t> at = find(key)) {
    if (items_[*at] == item) return Edit::kUnchanged;
    items_[*at] = std::string(item);
    return Edit::kReplaced;
  }
  std::size_t insert_at = append_at.value_or(items_.size());
  if (insert_at > items_.size()) {
    fail("cannot insert {} at position {} of a list of {} items", item, insert_at, items_.size());
  }
  items_.insert(items_.begin() + static_cast<std::ptrdiff_t>(insert_at), std::string(item));
  return Edit::kAppended;
}

void FlagList::replace(std::string_view item) {
  std::string_view key = checked_key(item);
  std::optional<std::size_t> at = find(key);
  if (!at) fail("{} is not set", display(key));
  items_[*at] = std::string(item);
}

std::size_t FlagList::remove(std::string_view key_or_item) {
  std::string_view key = flag_key(key_or_item, style_);
  if (key.empty()) key = key_or_item;
  if (key.empty()) fail("cannot remove a flag with an empty key");
  std::string removed_key(key);  // `key` may point into an item that is about to be erased
  std::size_t before = items_.size();
  std::erase_if(items_,
                [&](const std::string& item) { return flag_key(item, style_) == removed_key; });
  std::size_t removed = before - items_.size();
  if (removed == 0) fail("{} is not set", display(removed_key));
  return removed;
}

std::string_view FlagList::checked_key(std::string_view item) const {
  std::string_view key = flag_key(item, style_);
  if (style_ == FlagStyle::kDashDash) {
    if (key.empty()) fail("'{}' is not a --key, --key=value or --no-key flag", item);
    return key;
  }
  if (key.empty()) fail("'{}' is not a key=value item", item);
  if (item.find_first_of(kBlanks) != std::string_view::npos) {
    fail("'{}' is not a key=value item: it contains a blank", item);
  }
  return key;
}

std::string FlagList::display(std::string_view key) const {
  return style_ == FlagStyle::kDashDash ? "--" + std::string(key) : std::string(key);
}

}  // namespace rtb::k8s
