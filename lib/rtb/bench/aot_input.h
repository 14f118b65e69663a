// aot-check's reading of a bench render: the trainer client's TRAINER_ARGV, ORCH_ARGV and
// environment (render.h's driver settings), argparse-style flags, and the trainer slice. plan_aot
// (aot_plan.cc) builds the compile from what these return.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/bench/trainer_config.h"  // parse_str2bool
#include "rtb/k8s/flags.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/shell.h"

namespace rtb::bench {

// `text` as an integer; throws rtb::Error "<what>=<text>: not an integer" otherwise.
long long parse_integer(std::string_view text, std::string_view what);
// Throws rtb::Error "<what>=<text>: not a number" unless `text` is a number.
void check_number(std::string_view text, std::string_view what);

// Reads argparse-style flags: the last occurrence of a key wins.
class Args {
 public:
  Args(std::string name, const std::vector<std::string>& words)
      : name_(std::move(name)), flags_(k8s::FlagStyle::kDashDash, words) {}

  bool has(std::string_view key) const { return flags_.contains(key); }
  std::optional<std::string> text(std::string_view key) const { return flags_.value(key); }
  std::string text_or(std::string_view key, std::string fallback) const {
    return text(key).value_or(std::move(fallback));
  }
  // The flag's integer value, `fallback` when absent; throws rtb::Error when not an integer.
  long long integer(std::string_view key, long long fallback) const;
  // `--k` (true), `--no-k` (false), `--k=V` (str2bool), absent (fallback).
  bool boolean(std::string_view key, bool fallback) const;
  const std::vector<std::string>& items() const { return flags_.items(); }

 private:
  std::string name_;
  k8s::FlagList flags_;
};

// The bench client of a render: its name, the trainer's own environment (the assignments before
// the driver settings) and the two argv the driver runs.
struct BenchClient {
  std::string bench_name;
  std::vector<k8s::shell::Assignment> trainer_env;
  Args trainer;
  Args orchestrator;
};

// Reads the bench client. Throws rtb::Error for a JobSet whose client sets no TRAINER_ARGV and
// ORCH_ARGV (not a bench render) or whose argv bash could not split.
BenchClient read_bench_client(const YAML::Node& bench);

// The trainer slice's text ("tpu7x:4x4x8"): pathways-rm's --instance_type, else the accelerator
// and topology labels. Throws rtb::Error when the render has neither.
std::string trainer_slice_text(const k8s::JobSetView& view);

}  // namespace rtb::bench
