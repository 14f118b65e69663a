// The payload_settings member: how a payload file was built. `check-payload build` and the bench
// driver (`bench_driver.py --dump-payload`) write it into every .npz as a 1-D uint8 array holding
// one UTF-8 JSON object ("format": "rtb.payload-settings/1"), so `verify` and `measure` can check a
// file against the settings it was built with instead of asking for them again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/payload/builder.h"
#include "rtb/payload/load.h"
#include "rtb/payload/npy.h"

namespace rtb::payload {

inline constexpr std::string_view kPayloadSettingsMember = "payload_settings";
inline constexpr std::string_view kPayloadSettingsFormat = "rtb.payload-settings/1";

// The recorded settings. A key that is absent (or null where null means "not recorded") is unset.
struct PayloadSettings {
  std::string builder;  // "check-payload", "bench_driver", ...
  std::string version;
  std::optional<std::int64_t> rows, tokens, layers, topk, experts, vocab, pad_id, real_len;
  // Segments per real row: one value for every row ("segments": n), or one per row (a list).
  std::vector<std::int64_t> segments;
  bool segments_per_row = false;
  std::string segments_rule;  // "option" | "default"
  std::optional<std::int64_t> max_prompt_length;
  std::optional<std::int64_t> final_rows;  // null: every row is real
  std::optional<PadPosition> pad_position;
  std::optional<std::int64_t> pad_align;
  std::optional<AdvantageMode> advantages;
  std::optional<std::uint64_t> seed;
  std::optional<std::vector<double>> routing_targets;  // per layer, scaled; null: none
  std::optional<double> routing_scale;
  std::string routing_targets_source;
  std::optional<bool> old_logps;

  // Segments of real row `row` (0-based), when recorded.
  std::optional<std::int64_t> segments_of_row(std::int64_t row) const;
};

// The JSON object of a built payload (one line, keys in the order of the README).
std::string format_payload_settings(const Payload& payload);

// Parses the JSON text of a payload_settings member. Throws rtb::Error naming `where` when it is
// not one JSON object of format rtb.payload-settings/1 or a key has the wrong type.
PayloadSettings parse_payload_settings(std::string_view json, const std::string& where);

// The settings recorded in `arrays` (an .npz listed by list_arrays), or nullopt when the file has
// no payload_settings member (an older file, or a real run's routing). Throws rtb::Error for a
// member that is not a 1-D uint8 array of valid settings.
std::optional<PayloadSettings> read_payload_settings(const ByteSource& source,
                                                     const std::vector<ArrayInfo>& arrays);

// The experts `settings` records, when it does. Expert ids are int16: throws rtb::Error for a
// record of more than 32767 experts.
std::optional<int> recorded_experts(const PayloadSettings& settings);

// Measure's expert count: `experts_option` (the command line) when given, else what the
// payload_settings of `source` records, else `options.experts` (the default); sets
// `experts_from` to "option", "file" or "default". Reads the settings only when no option is
// given, and throws rtb::Error for settings that cannot be read.
MeasureOptions resolve_measure_options(const ByteSource& source, MeasureOptions options,
                                       std::optional<int> experts_option);

// One setting verify or measure used and where its value came from: "file" (payload_settings),
// "option" (the command line), "inferred" (from the arrays) or "default".
struct SettingSource {
  std::string name;
  std::string value;
  std::string from;
};

}  // namespace rtb::payload
