#include "rtb/profile/overlap.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"

namespace rtb::profile {

namespace {

std::string ms_text(double ps) { return fmt::format("{:.3f}", ps / 1e9); }
std::string us_text(double ps) { return fmt::format("{:.3f}", ps / 1e6); }

const char* planned_of(const hlo::Collective& pair) {
  return pair.status == hlo::Status::kOverlapped ? "hidden" : "exposed";
}

// "ags0 -> agd0 in entry", "ar0 (synchronous) in entry".
std::string pair_text(const hlo::Collective& pair) {
  return fmt::format("{}{} in {}", pair.start,
                     pair.done.empty() ? " (synchronous)" : " -> " + pair.done, pair.computation);
}

}  // namespace

const char* agreement_name(Agreement agreement) {
  return enum_name<Agreement::kNotInCapture>(
      agreement, {"planned hidden, measured exposed", "planned exposed, measured hidden", "agree",
                  "not in the capture"});
}

const char* measured_name(const PairMeasure& measure) {
  if (measure.agreement == Agreement::kNotInCapture) return "not in the capture";
  return measure.measured_exposed ? "exposed" : "hidden";
}

DeviceOverlap measure_device_overlap(const Device& device, const hlo::Analysis& analysis,
                                     double min_wait_ps) {
  DeviceOverlap overlap;
  overlap.plane = device.plane;
  overlap.file = device.file;
  std::unordered_map<std::string_view, const OpTime*> ops;
  for (const OpTime& op : device.ops) ops.emplace(op.name, &op);
  for (const Step& step : device.steps) overlap.steps.push_back({step.number, 0, 0});
  double steps = static_cast<double>(device.steps.size());
  std::size_t index = 0;
  for (const hlo::Collective& pair : analysis.collectives) {
    if (!pair.paired_or_sync()) continue;
    PairMeasure measure;
    measure.pair = pair;
    measure.index = index++;
    const std::string& waiter = pair.done.empty() ? pair.start : pair.done;
    auto it = ops.find(waiter);
    if (it != ops.end() && steps > 0) {
      measure.step_wait_ps = it->second->step_self_ps;
      measure.mean_wait_ps = static_cast<double>(it->second->self_ps) / steps;
      measure.wait_per_execution_ps =
          measure.mean_wait_ps / static_cast<double>(std::max<std::int64_t>(pair.executions, 1));
      measure.measured_exposed = measure.wait_per_execution_ps >= min_wait_ps;
      bool planned_hidden = pair.status == hlo::Status::kOverlapped;
      if (planned_hidden && measure.measured_exposed) {
        measure.agreement = Agreement::kPlannedHiddenMeasuredExposed;
        for (std::size_t i = 0; i < overlap.steps.size(); ++i) {
          if (i < measure.step_wait_ps.size() && measure.step_wait_ps[i] > 0) {
            ++overlap.steps[i].planned_hidden_measured_exposed;
            overlap.steps[i].their_wait_ps += measure.step_wait_ps[i];
          }
        }
      } else if (!planned_hidden && !measure.measured_exposed) {
        measure.agreement = Agreement::kPlannedExposedMeasuredHidden;
      } else {
        measure.agreement = Agreement::kAgree;
      }
    } else {
      measure.step_wait_ps.assign(device.steps.size(), 0);
    }
    overlap.pairs.push_back(std::move(measure));
  }
  std::stable_sort(overlap.pairs.begin(), overlap.pairs.end(),
                   [](const PairMeasure& a, const PairMeasure& b) {
                     if (a.agreement != b.agreement) return a.agreement < b.agreement;
                     return a.mean_wait_ps > b.mean_wait_ps;
                   });
  return overlap;
}

Overlap measure_overlap(const Summary& summary, const hlo::Analysis& analysis, double min_wait_ps) {
  if (summary.devices.empty()) fail("--hlo: the capture has no device plane to measure");
  Overlap overlap;
  overlap.hlo_file = analysis.file;
  overlap.module = analysis.module;
  overlap.min_wait_ps = min_wait_ps;
  for (const Device& device : summary.devices) {
    overlap.devices.push_back(measure_device_overlap(device, analysis, min_wait_ps));
  }
  // Per device, where each pair (by its index among the judged pairs) sits in its list.
  std::vector<std::vector<std::size_t>> position(overlap.devices.size());
  for (std::size_t d = 0; d < overlap.devices.size(); ++d) {
    const auto& pairs = overlap.devices[d].pairs;
    position[d].resize(pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i) position[d][pairs[i].index] = i;
  }
  for (const PairMeasure& first : overlap.devices[0].pairs) {
    Disagreement disagreement;
    disagreement.pair = first.pair;
    bool differs = false;
    for (std::size_t d = 0; d < overlap.devices.size(); ++d) {
      std::size_t at = position[d][first.index];
      disagreement.measures.push_back(at);
      const PairMeasure& measure = overlap.devices[d].pairs[at];
      differs = differs || std::string_view(measured_name(measure)) != measured_name(first);
    }
    if (differs) overlap.disagreements.push_back(std::move(disagreement));
  }
  return overlap;
}

namespace {

std::string device_overlap_text(const Overlap& overlap, const DeviceOverlap& device) {
  std::string out;
  out += fmt::format(
      "\nmeasured against scheduled overlap: {} (module {}) on {} ({})\n"
      "  wait: the done's own time on the device (a synchronous collective's: the op's); measured "
      "exposed: a mean wait of at least {} us per execution\n",
      overlap.hlo_file, overlap.module, device.plane, device.file, us_text(overlap.min_wait_ps));
  std::int64_t disagree = 0;
  for (const PairMeasure& pair : device.pairs) {
    disagree += pair.agreement == Agreement::kPlannedHiddenMeasuredExposed;
  }
  out += fmt::format("  planned hidden, measured exposed: {} of {} pairs\n", disagree,
                     device.pairs.size());
  if (disagree > 0 && !device.steps.empty()) {
    out += fmt::format("  per step: {:>8} {:>8} {:>12}\n", "step", "pairs", "their wait ms");
    for (const OverlapStep& step : device.steps) {
      out += fmt::format("            {:>8} {:>8} {:>12}\n", step.number,
                         step.planned_hidden_measured_exposed,
                         ms_text(static_cast<double>(step.their_wait_ps)));
    }
  }
  out += fmt::format("  {:<34}  {:>12}  {:>12}  {:>10}  {:<18}  {}\n", "planned / measured",
                     "wait ms/step", "us/execution", "executions", "kind", "start -> done");
  for (const PairMeasure& measure : device.pairs) {
    const hlo::Collective& pair = measure.pair;
    std::string verdict = measure.agreement == Agreement::kNotInCapture
                              ? fmt::format("{} / not in the capture", planned_of(pair))
                              : fmt::format("{} / {}{}", planned_of(pair),
                                            measure.measured_exposed ? "exposed" : "hidden",
                                            measure.agreement == Agreement::kAgree ? "" : " (!)");
    out += fmt::format("  {:<34}  {:>12}  {:>12}  {:>10}  {:<18}  {}\n", verdict,
                       ms_text(measure.mean_wait_ps), us_text(measure.wait_per_execution_ps),
                       pair.executions, pair.kind, pair_text(pair));
  }
  return out;
}

}  // namespace

std::string format_overlap_text(const Overlap& overlap) {
  std::string out;
  for (const DeviceOverlap& device : overlap.devices) out += device_overlap_text(overlap, device);
  if (overlap.devices.size() < 2) return out;
  std::size_t pairs = overlap.devices[0].pairs.size();
  if (overlap.disagreements.empty()) {
    out += fmt::format("\nthe {} devices agree on every pair's measured verdict ({} pairs)\n",
                       overlap.devices.size(), pairs);
    return out;
  }
  out += fmt::format(
      "\ndevices disagree on {} of {} pairs: measured exposed on some devices, not on others\n",
      overlap.disagreements.size(), pairs);
  for (const Disagreement& disagreement : overlap.disagreements) {
    out += fmt::format("  {:<18}  {}\n", disagreement.pair.kind, pair_text(disagreement.pair));
    for (std::size_t d = 0; d < overlap.devices.size(); ++d) {
      const DeviceOverlap& device = overlap.devices[d];
      const PairMeasure& measure = device.pairs[disagreement.measures[d]];
      out +=
          fmt::format("      {:<20}  {:<18}  {:>12} us/execution  ({})\n", measured_name(measure),
                      device.plane, us_text(measure.wait_per_execution_ps), device.file);
    }
  }
  return out;
}

namespace {

void write_pair_fields(json::Writer& j, const hlo::Collective& pair) {
  j.field("kind", pair.kind);
  j.field("start", pair.start);
  j.field("done", json::null_if_empty(pair.done));
  j.field("computation", pair.computation);
}

}  // namespace

void write_overlap_json(json::Writer& j, const Overlap& overlap) {
  j.begin_object();
  j.field("hlo_file", overlap.hlo_file);
  j.field("module", overlap.module);
  j.field("min_wait_ps", overlap.min_wait_ps);
  j.key("devices").begin_array();
  for (const DeviceOverlap& device : overlap.devices) {
    j.begin_object();
    j.field("plane", device.plane);
    j.field("file", device.file);
    j.key("steps").begin_array();
    for (const OverlapStep& step : device.steps) {
      j.begin_object(json::Writer::Layout::kOneLine);
      j.field("number", step.number);
      j.field("planned_hidden_measured_exposed", step.planned_hidden_measured_exposed);
      j.field("their_wait_ps", step.their_wait_ps);
      j.end_object();
    }
    j.end_array();
    j.key("pairs").begin_array();
    for (const PairMeasure& measure : device.pairs) {
      const hlo::Collective& pair = measure.pair;
      j.begin_object(json::Writer::Layout::kOneLine);
      write_pair_fields(j, pair);
      j.field("executions", pair.executions);
      j.field("planned", hlo::status_name(pair.status));
      j.wrap().field("agreement", agreement_name(measure.agreement));
      j.field("measured_exposed", measure.measured_exposed);
      j.field("mean_wait_ps", measure.mean_wait_ps);
      j.field("wait_per_execution_ps", measure.wait_per_execution_ps);
      j.wrap().list("step_wait_ps", measure.step_wait_ps);
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  j.end_array();
  j.key("disagreements").begin_array();
  for (const Disagreement& disagreement : overlap.disagreements) {
    j.begin_object();
    write_pair_fields(j, disagreement.pair);
    j.key("measured").begin_array();
    for (std::size_t d = 0; d < overlap.devices.size(); ++d) {
      const DeviceOverlap& device = overlap.devices[d];
      const PairMeasure& measure = device.pairs[disagreement.measures[d]];
      j.begin_object(json::Writer::Layout::kOneLine);
      j.field("plane", device.plane);
      j.field("file", device.file);
      j.field("measured", measured_name(measure));
      j.field("wait_per_execution_ps", measure.wait_per_execution_ps);
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

}  // namespace rtb::profile
