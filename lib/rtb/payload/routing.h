// Per-layer MoE routing targets: the imbalance `max expert load / mean expert load` that the bench
// payload's replayed routing must hit in each decoder layer (docs/payload-spec.md, "Routing
// calibration").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rtb::payload {

// Parses a target table. Accepted forms (a file holds exactly one of them):
//   - one number per line: line i (counting only lines with a value) is layer i;
//   - `layer,target` lines: 0-based layers, each exactly once, in any order, none missing; an
//     optional header line whose first field is `layer` (as in `layer,max_over_mean`) is skipped;
//   - one inline line of comma-separated numbers (the form of the ROUTING_TARGETS variable).
// `#` starts a comment that runs to the end of the line; blank lines are ignored. Throws
// rtb::Error naming `source_name` and the 1-based line for a malformed number, a target below 1,
// NaN or infinity, a duplicate or missing layer, mixed forms or an empty table.
std::vector<double> parse_routing_targets(std::string_view text, const std::string& source_name);

// ROUTING_SCALE: t' = 1 + scale * (t - 1) for every target. scale must be finite and >= 0
// (0 gives a uniform load everywhere): check_routing_scale. Throws rtb::Error otherwise.
std::vector<double> scale_routing_targets(const std::vector<double>& targets, double scale);
// The one check of a routing scale (render-bench, check-payload, the builder). Throws rtb::Error.
void check_routing_scale(double scale);

// Comma-separated, each value in the shortest form that parses back to the same double.
std::string format_routing_targets_inline(const std::vector<double>& targets);

// A table file in `layer,target` form, preceded by `comment_lines` (each written as `# line`),
// each target in the shortest round-trip form. parse_routing_targets reads it back exactly.
std::string format_routing_targets_table(const std::vector<double>& targets,
                                         const std::vector<std::string>& comment_lines);

// Checks a table against a model: one target per layer (`layers` of them), every target finite
// and >= 1, and reachable: a layer's max load cannot exceed its number of tokens while the mean is
// tokens * topk / experts, so max/mean <= experts / topk. Throws rtb::Error naming the layer.
void validate_routing_targets(const std::vector<double>& targets, int layers, int experts,
                              int topk);

// The default table shipped with the tools (data/routing/qwen3.5-397b-a17b.txt, an extrapolation
// explained in its comments) and its name for messages.
std::string_view default_routing_table_text();
inline constexpr const char* kDefaultRoutingTableName = "qwen3.5-397b-a17b.txt (built in)";
// The default table, parsed (60 targets).
std::vector<double> default_routing_targets();

}  // namespace rtb::payload
