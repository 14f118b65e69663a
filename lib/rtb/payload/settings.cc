#include "rtb/payload/settings.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "rtb/base/error.h"
#include "rtb/base/json.h"
#include "rtb/base/literal.h"

namespace rtb::payload {
namespace {

// The member is a few hundred bytes; a per-row segment list of a huge file stays far below this.
constexpr std::int64_t kMaxSettingsBytes = std::int64_t{64} << 20;

class Reader {
 public:
  Reader(const Literal& root, const std::string& where) : root_(root), where_(where) {}

  [[noreturn]] void bad(std::string_view key, std::string_view expected) const {
    fail_at(where_, 0, "payload_settings: \"{}\" must be {}", key, expected);
  }

  // The value of `key`, or nullptr when absent; null counts as absent.
  const Literal* at(std::string_view key) const {
    const Literal* value = root_.find(key);
    return value == nullptr || value->is_null() ? nullptr : value;
  }

  std::optional<std::int64_t> integer(std::string_view key) const {
    const Literal* value = at(key);
    if (value == nullptr) return std::nullopt;
    return integer_of(*value, key);
  }

  std::int64_t integer_of(const Literal& value, std::string_view key) const {
    if (value.kind != Literal::Kind::kInt || !value.exact) bad(key, "an integer");
    return value.integer;
  }

  std::optional<double> number(std::string_view key) const {
    const Literal* value = at(key);
    if (value == nullptr) return std::nullopt;
    return number_of(*value, key);
  }

  double number_of(const Literal& value, std::string_view key) const {
    if (!value.is_number() || !std::isfinite(value.number)) bad(key, "a number");
    return value.number;
  }

  std::optional<std::string> text(std::string_view key) const {
    const Literal* value = at(key);
    if (value == nullptr) return std::nullopt;
    if (value->kind != Literal::Kind::kString) bad(key, "a string");
    return value->text;
  }

  std::optional<bool> flag(std::string_view key) const {
    const Literal* value = at(key);
    if (value == nullptr) return std::nullopt;
    if (value->kind != Literal::Kind::kBool) bad(key, "true or false");
    return value->boolean;
  }

 private:
  const Literal& root_;
  const std::string& where_;
};

}  // namespace

std::optional<std::int64_t> PayloadSettings::segments_of_row(std::int64_t row) const {
  if (segments.empty()) return std::nullopt;
  if (!segments_per_row) return segments[0];
  if (row < 0 || row >= static_cast<std::int64_t>(segments.size())) return std::nullopt;
  return segments[static_cast<std::size_t>(row)];
}

std::string format_payload_settings(const Payload& p) {
  const PayloadOptions& o = p.options;
  json::Writer j;
  j.begin_object(json::Writer::Layout::kOneLine);
  j.field("format", kPayloadSettingsFormat).field("builder", "check-payload");
  j.field("version", RTB_VERSION);
  j.field("rows", o.rows).field("tokens", o.tokens).field("layers", o.layers);
  j.field("topk", o.topk).field("experts", o.experts).field("vocab", o.vocab);
  j.field("pad_id", 0).field("real_len", o.real_len).field("segments", o.segments);
  j.field("segments_rule", o.segments_given ? "option" : "default");
  j.field("max_prompt_length", o.max_prompt_length);
  // A regular micro-batch (every row real) records null, as the driver does without --final.
  j.field("final_rows", o.final_rows == o.rows ? std::nullopt : std::optional(o.final_rows));
  j.field("pad_position", to_string(o.pad_position)).field("pad_align", o.pad_align);
  j.field("advantages", to_string(o.advantages)).field("seed", o.seed);
  if (p.targets.empty()) {
    j.key("routing_targets").null();
  } else {
    j.list("routing_targets", p.targets);
  }
  j.field("routing_scale", o.routing_scale);
  j.field("routing_targets_source", o.routing_targets_source);
  j.field("old_logps", o.old_logps);
  j.end_object();
  std::string text = j.str();
  text.pop_back();  // the member holds the object alone, without the document's final newline
  return text;
}

PayloadSettings parse_payload_settings(std::string_view json_text, const std::string& where) {
  Literal root;
  try {
    root = parse_json(json_text);
  } catch (const Error& e) {
    fail_at(where, 0, "payload_settings is not valid JSON: {}", e.message());
  }
  if (!root.is_dict()) fail_at(where, 0, "payload_settings is not a JSON object");
  Reader r(root, where);
  std::optional<std::string> format = r.text("format");
  if (format != kPayloadSettingsFormat) {
    fail_at(where, 0, "payload_settings has format '{}', expected '{}'", format.value_or(""),
            kPayloadSettingsFormat);
  }
  PayloadSettings s;
  s.builder = r.text("builder").value_or("");
  s.version = r.text("version").value_or("");
  s.rows = r.integer("rows");
  s.tokens = r.integer("tokens");
  s.layers = r.integer("layers");
  s.topk = r.integer("topk");
  s.experts = r.integer("experts");
  s.vocab = r.integer("vocab");
  s.pad_id = r.integer("pad_id");
  s.real_len = r.integer("real_len");
  if (const Literal* segments = r.at("segments")) {
    if (segments->is_sequence()) {
      s.segments_per_row = true;
      for (const Literal& value : segments->items)
        s.segments.push_back(r.integer_of(value, "segments"));
    } else {
      s.segments.push_back(r.integer_of(*segments, "segments"));
    }
  }
  s.segments_rule = r.text("segments_rule").value_or("");
  s.max_prompt_length = r.integer("max_prompt_length");
  s.final_rows = r.integer("final_rows");
  if (std::optional<std::string> position = r.text("pad_position")) {
    if (*position != "end" && *position != "start") r.bad("pad_position", "\"end\" or \"start\"");
    s.pad_position = parse_pad_position(*position);
  }
  s.pad_align = r.integer("pad_align");
  if (std::optional<std::string> mode = r.text("advantages")) {
    if (*mode != "random" && *mode != "zero") r.bad("advantages", "\"random\" or \"zero\"");
    s.advantages = parse_advantage_mode(*mode);
  }
  if (const Literal* seed = r.at("seed")) {
    std::uint64_t value = 0;  // seeds use all 64 bits
    const char* end = seed->text.data() + seed->text.size();
    auto parsed = std::from_chars(seed->text.data(), end, value);  // no sign: negatives fail
    if (seed->kind != Literal::Kind::kInt || parsed.ec != std::errc() || parsed.ptr != end) {
      r.bad("seed", "a non-negative integer");
    }
    s.seed = value;
  }
  if (const Literal* targets = r.at("routing_targets")) {
    if (!targets->is_sequence()) r.bad("routing_targets", "a list of numbers or null");
    std::vector<double> values;
    for (const Literal& value : targets->items)
      values.push_back(r.number_of(value, "routing_targets"));
    s.routing_targets = std::move(values);
  }
  s.routing_scale = r.number("routing_scale");
  s.routing_targets_source = r.text("routing_targets_source").value_or("");
  s.old_logps = r.flag("old_logps");
  for (const auto& [key, value] : {std::pair{"rows", s.rows},
                                   {"tokens", s.tokens},
                                   {"layers", s.layers},
                                   {"topk", s.topk},
                                   {"experts", s.experts},
                                   {"vocab", s.vocab},
                                   {"pad_align", s.pad_align}}) {
    if (value && *value < 1) r.bad(key, "a positive integer");
  }
  for (const auto& [key, value] : {std::pair{"real_len", s.real_len},
                                   {"max_prompt_length", s.max_prompt_length},
                                   {"final_rows", s.final_rows}}) {
    if (value && *value < 0) r.bad(key, "a non-negative integer");
  }
  for (std::int64_t n : s.segments) {
    if (n < 0) r.bad("segments", "non-negative");
  }
  return s;
}

std::optional<int> recorded_experts(const PayloadSettings& settings) {
  if (!settings.experts) return std::nullopt;
  if (*settings.experts > std::numeric_limits<std::int16_t>::max()) {
    fail("payload_settings records {} experts", *settings.experts);
  }
  return static_cast<int>(*settings.experts);
}

MeasureOptions resolve_measure_options(const ByteSource& source, MeasureOptions options,
                                       std::optional<int> experts_option) {
  if (experts_option) {
    options.experts = *experts_option;
    options.experts_from = "option";
    return options;
  }
  options.experts_from = "default";
  std::optional<PayloadSettings> recorded = read_payload_settings(source, list_arrays(source));
  if (std::optional<int> experts = recorded ? recorded_experts(*recorded) : std::nullopt) {
    options.experts = *experts;
    options.experts_from = "file";
  }
  return options;
}

std::optional<PayloadSettings> read_payload_settings(const ByteSource& source,
                                                     const std::vector<ArrayInfo>& arrays) {
  const ArrayInfo* info = find_array(arrays, kPayloadSettingsMember);
  if (info == nullptr) return std::nullopt;
  if (info->dtype != DType::kUInt8 || info->shape.size() != 1) {
    fail_at(source.name(), 0, "payload_settings is {} {}, expected a 1-D uint8 array of JSON",
            dtype_name(info->dtype), format_shape(info->shape));
  }
  if (info->count > kMaxSettingsBytes) {
    fail_at(source.name(), 0, "payload_settings holds {} bytes, more than settings can need",
            info->count);
  }
  std::string text(static_cast<std::size_t>(info->count), '\0');
  read_elements(source, *info, 0,
                std::span(reinterpret_cast<std::uint8_t*>(text.data()), text.size()));
  return parse_payload_settings(text, source.name());
}

}  // namespace rtb::payload
