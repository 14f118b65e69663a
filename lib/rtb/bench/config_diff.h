// The two sides of diff-configs and their differences: a side is a MaxText log's resolved config
// (logs/configlog.h reads it) or a render's trainer settings, from MAXTEXT_EXTRA_FLAGS and the argv
// flags that Tunix's trainer turns into MaxText keys (`--maxtext_*`, the mesh, ...). Values compare
// by meaning (logs::canonical_config_value()); reports keep the original text.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/outcome.h"
#include "rtb/bench/config_elements.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/jobset.h"
#include "rtb/logs/configlog.h"

namespace rtb::bench {

// A side's settings, dumps and reading options are those of a log (logs/configlog.h).
using logs::ConfigDumpInfo;
using logs::ConfigLogOptions;
using logs::ConfigSetting;

// --- renders as a side -------------------------------------------------------------------------

// The trainer's MaxText settings in a DRY_RUN or a bench render: every key Tunix passes for its
// argv and environment (trainer_keys(): defaults and constants included, marked `implied`, origin
// "run_trainer_node default", "Tunix default" or "Tunix"), then MAXTEXT_EXTRA_FLAGS, which Tunix
// appends last (so it wins). Sorted by key. Throws rtb::Error when there is no trainer JobSet or
// its startup command cannot be read.
std::vector<ConfigSetting> config_from_render(const k8s::DryRun& dryrun,
                                              const k8s::RoleMains& mains);

// One side of diff-configs: a log's selected dump, or a render's MaxText settings.
struct ConfigSide {
  enum class Kind { kLog, kRender };
  Kind kind = Kind::kLog;
  std::string source;
  std::vector<ConfigSetting> settings;
  std::size_t dump = 0;               // logs: the dump used
  std::vector<ConfigDumpInfo> dumps;  // logs: every dump
};

// Reads a side, telling a render (a YAML document with `kind:` / `apiVersion:` at column 0 in the
// first MiB, and no `Config param` there) from a log. Logs are streamed.
ConfigSide read_config_side(const std::string& path, const ConfigLogOptions& options,
                            const k8s::RoleMains& mains);

// --- comparing ---------------------------------------------------------------------------------

struct ConfigDifference {
  enum class Kind { kAdded, kRemoved, kChanged };
  Kind kind;
  std::string key;
  std::optional<ConfigSetting> a, b;
  // A changed value that is a literal container on both sides: its items that differ
  // (config_elements.h).
  std::optional<ElementDiff> elements;
};
std::string_view config_kind_name(ConfigDifference::Kind kind);  // "added", ...

// Differences in key order. When exactly one side is a render, only the keys it sets are compared
// (a render sets a few keys of the hundreds a log resolves), and of those it implies (defaults,
// constants) only the ones the log has too. `keep_key` filters keys (--keys).
std::vector<ConfigDifference> diff_configs(
    const ConfigSide& a, const ConfigSide& b,
    const std::function<bool(std::string_view)>& keep_key = nullptr);

// diff-configs' verdict: kFail when the configs differ (`differences` from diff_configs() is not
// empty), else kPass.
Outcome config_outcome(const std::vector<ConfigDifference>& differences);

}  // namespace rtb::bench
