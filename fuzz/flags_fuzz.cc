// libFuzzer target: flag editing (flags.h). Input: a control byte (bit 0: style), the flag text,
// then edits separated by NUL bytes, each a control byte (operation, insert position) and an item.
// Checks the invariants of each edit: after upsert(k=v) the value of k is v, the last item with
// key k is the item, and nothing else changed; after remove(k) no item has key k; replace never
// adds an item; parse() and str() round-trip. Only rtb::Error is an expected outcome.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/k8s/flags.h"

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "flags_fuzz: invariant violated: %s\n", what);
  __builtin_trap();
}

std::optional<std::string> expected_value(std::string_view item, rtb::k8s::FlagStyle style) {
  std::optional<std::string_view> value = rtb::k8s::flag_value(item, style);
  return value ? std::optional<std::string>(*value) : std::nullopt;
}

// Every item except the one at `changed` (npos: none) is the same in both lists, in order, and
// `after` has `inserted` more items than `before` (0 or 1).
void check_rest_unchanged(const std::vector<std::string>& before,
                          const std::vector<std::string>& after, std::size_t changed,
                          std::size_t inserted) {
  if (after.size() != before.size() + inserted) violated("edit changed the list size");
  for (std::size_t a = 0, b = 0; a < after.size(); ++a) {
    if (a == changed) {
      if (inserted == 0) ++b;
      continue;
    }
    if (after[a] != before[b++]) violated("edit changed another item");
  }
}

void apply_edit(rtb::k8s::FlagList& list, std::uint8_t control, std::string_view item) {
  const rtb::k8s::FlagStyle style = list.style();
  const std::vector<std::string> before = list.items();
  std::string_view key = rtb::k8s::flag_key(item, style);
  switch (control % 4) {
    case 0: {  // upsert
      std::optional<std::size_t> append_at;
      if (control & 0x80) append_at = (control >> 2) & 0x1f;
      std::size_t count_before = list.count(key);
      rtb::k8s::FlagList::Edit edit;
      try {
        edit = list.upsert(item, append_at);
      } catch (const rtb::Error&) {
        if (list.items() != before) violated("failed upsert changed the list");
        return;
      }
      std::optional<std::size_t> at = list.find(key);
      if (!at || list.items()[*at] != item)
        violated("upsert: the last item with the key is not it");
      if (list.value(key) != expected_value(item, style)) violated("upsert: value(k) != v");
      if (list.count(key) != (count_before == 0 ? 1 : count_before)) violated("upsert: count");
      if ((edit == rtb::k8s::FlagList::Edit::kAppended) != (count_before == 0)) {
        violated("upsert: appended although the key was present");
      }
      if ((edit == rtb::k8s::FlagList::Edit::kUnchanged) != (list.items() == before)) {
        violated("upsert: kUnchanged does not match the list");
      }
      check_rest_unchanged(before, list.items(), *at, count_before == 0 ? 1 : 0);
      break;
    }
    case 1: {  // replace
      try {
        list.replace(item);
      } catch (const rtb::Error&) {
        if (list.items() != before) violated("failed replace changed the list");
        return;
      }
      std::optional<std::size_t> at = list.find(key);
      if (!at || list.items()[*at] != item) violated("replace: the last item is not it");
      if (list.value(key) != expected_value(item, style)) violated("replace: value(k) != v");
      check_rest_unchanged(before, list.items(), *at, 0);
      break;
    }
    case 2: {  // remove
      std::string removed_key(rtb::k8s::flag_key(item, style));
      if (removed_key.empty()) removed_key = std::string(item);
      std::size_t removed = 0;
      try {
        removed = list.remove(item);
      } catch (const rtb::Error&) {
        if (list.items() != before) violated("failed remove changed the list");
        return;
      }
      if (removed == 0 || list.items().size() + removed != before.size()) violated("remove count");
      if (list.contains(removed_key) || list.count(removed_key) != 0) {
        violated("remove left an item with the key");
      }
      break;
    }
    default: {  // get
      std::optional<std::string> value = list.value(item);
      std::optional<std::size_t> at = list.find(item);
      if (at.has_value() != list.contains(item)) violated("find and contains disagree");
      if (at && value != expected_value(list.items()[*at], style)) violated("value(k) != item");
      if (!at && value) violated("value without an item");
      if (at && list.count(item) == 0) violated("count 0 for a found key");
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const rtb::k8s::FlagStyle style =
      (data[0] & 1) ? rtb::k8s::FlagStyle::kKeyValue : rtb::k8s::FlagStyle::kDashDash;
  std::size_t nul = input.find('\0');
  std::string_view text = input.substr(0, nul);
  std::optional<rtb::k8s::FlagList> list;
  try {
    list = rtb::k8s::FlagList::parse(text, style);
  } catch (const rtb::Error&) {
    return 0;
  }
  // parse() and str() round-trip, and parse() never keeps blanks.
  for (const std::string& item : list->items()) {
    if (item.empty() || item.find_first_of(" \t\n") != std::string::npos) {
      violated("parse kept an empty item or a blank");
    }
  }
  if (rtb::k8s::FlagList::parse(list->str(), style).items() != list->items()) {
    violated("parse(str()) differs");
  }
  while (nul != std::string_view::npos && nul + 1 < input.size()) {
    std::size_t start = nul + 1;
    nul = input.find('\0', start);
    std::string_view edit = input.substr(start, nul == std::string_view::npos ? nul : nul - start);
    if (edit.empty()) continue;
    apply_edit(*list, static_cast<std::uint8_t>(edit[0]), edit.substr(1));
  }
  return 0;
}
