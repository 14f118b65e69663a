// Flag lists that render-bench edits:
// - kDashDash: argv-style items `--key=value`, bare `--key` and negated `--no-key` (argparse
//   BooleanOptionalAction); all three have the key `key`, which is the text between `--` (or
//   `--no-`) and the first `=`, dots and dashes included. Any other word (`-v`, `--`, `value`) is
//   positional: it has no key and is kept as it is. Used for the trainer and orchestrator argv,
//   libtpu flag strings (LIBTPU_INIT_ARGS) and the pathways-proxy args.
// - kKeyValue: `key=value` items separated by blanks (MAXTEXT_EXTRA_FLAGS). Every item must have a
//   non-empty key and an `=`.
//
// Duplicate keys are kept as they are. Since for argparse and MaxText the LAST occurrence of a key
// wins, find(), value(), upsert() and replace() act on the last occurrence (the effective one) and
// leave earlier ones alone; remove() removes every occurrence.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rtb::k8s {

enum class FlagStyle { kDashDash, kKeyValue };

// The key of a flag item ("" when the item is not a flag of that style, e.g. a positional word).
std::string_view flag_key(std::string_view item, FlagStyle style);

// The value: "v" for `--k=v` / `k=v`; std::nullopt for a bare `--k`, a negated `--no-k` and an
// item that is not a flag.
std::optional<std::string_view> flag_value(std::string_view item, FlagStyle style);

// True for the negated form `--no-k` (kDashDash only).
bool is_negated(std::string_view item, FlagStyle style);

// The items of a flag string: the words between blanks (space, tab, newline), leading and
// trailing blanks dropped. Checks nothing (FlagList does).
std::vector<std::string> split_flag_items(std::string_view text);

class FlagList {
 public:
  // Throws rtb::Error for a kKeyValue item without `=`, with an empty key or with a blank in it.
  FlagList(FlagStyle style, std::vector<std::string> items);
  // The items of split_flag_items(text).
  static FlagList parse(std::string_view text, FlagStyle style);

  // The items joined by one space (the form of LIBTPU_INIT_ARGS and MAXTEXT_EXTRA_FLAGS). For argv
  // with blanks inside items, quote the items instead (shell::join).
  std::string str() const;
  const std::vector<std::string>& items() const { return items_; }
  FlagStyle style() const { return style_; }

  // The index of the last item with that key, in any form.
  std::optional<std::size_t> find(std::string_view key) const;
  std::size_t count(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key).has_value(); }
  // The value of the last item with that key; std::nullopt if absent, bare or negated.
  std::optional<std::string> value(std::string_view key) const;

  enum class Edit { kReplaced, kAppended, kUnchanged };
  // `item` is a whole flag (`--k=v`, `--k`, `--no-k`, `k=v`). Replaces the last item with the same
  // key where it stands (whatever its form), or inserts `item` at index `append_at` (default: the
  // end) when the key is absent. kUnchanged when that item was already exactly `item`. Throws
  // rtb::Error when `item` is not a flag of this style or `append_at` is past the end.
  Edit upsert(std::string_view item, std::optional<std::size_t> append_at = std::nullopt);
  // Like upsert, but the key must already be present (rtb::Error "--k is not set" otherwise).
  void replace(std::string_view item);
  // Removes every item with that key; `key_or_item` may be a key, `--k`, `--k=v`, `--no-k` or
  // `k=v`. Returns how many were removed; throws rtb::Error naming the key when none was present.
  std::size_t remove(std::string_view key_or_item);

 private:
  std::string_view checked_key(std::string_view item) const;
  std::string display(std::string_view key) const;

  FlagStyle style_;
  std::vector<std::string> items_;
};

}  // namespace rtb::k8s
