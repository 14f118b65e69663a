#include "rtb/profile/compare.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "rtb/base/json.h"
#include "rtb/base/stats.h"
#include "rtb/profile/report.h"

namespace rtb::profile {

namespace {

constexpr const char* kCompareSchema = "rtb.profile-report-compare/1";

double sample_sd(const std::vector<double>& values) {
  return values.size() < 2 ? 0.0 : stats::stddev(values);
}

Change change_of(std::string kind, std::string name, std::string category,
                 const std::vector<double>& a, const std::vector<double>& b, double floor_ps,
                 double min_change_percent) {
  Change change;
  change.kind = std::move(kind);
  change.name = std::move(name);
  change.category = std::move(category);
  change.mean_a_ps = a.empty() ? 0.0 : stats::mean(a);
  change.mean_b_ps = b.empty() ? 0.0 : stats::mean(b);
  double sd_a = sample_sd(a);
  double sd_b = sample_sd(b);
  change.spread_ps = std::sqrt(sd_a * sd_a + sd_b * sd_b);
  double base = change.mean_a_ps != 0 ? std::abs(change.mean_a_ps) : floor_ps;
  double delta = std::abs(change.delta_ps());
  change.moved = delta > change.spread_ps && delta > base * min_change_percent / 100.0;
  return change;
}

std::vector<double> per_step(const Device& device, const auto& figure) {
  std::vector<double> values;
  for (const Step& step : device.steps) values.push_back(static_cast<double>(figure(step)));
  return values;
}

std::string signed_ms(double ps) { return fmt::format("{:+.3f}", ps / 1e9); }
std::string plain_ms(double ps) { return fmt::format("{:.3f}", ps / 1e9); }

}  // namespace

Outcome Comparison::outcome() const {
  bool moved = !only_a.empty() || !only_b.empty();
  for (const DeviceComparison& device : devices) {
    for (const Change& change : device.changes) moved = moved || change.moved;
  }
  return outcome_of(moved);
}

Comparison compare(const Summary& a, const Summary& b, double min_change_percent) {
  Comparison comparison;
  comparison.files_a = a.files;
  comparison.files_b = b.files;
  comparison.min_change_percent = min_change_percent;
  std::map<std::string, const Device*> b_devices;
  for (const Device& device : b.devices) b_devices.emplace(device.plane, &device);
  std::map<std::string, bool> seen;
  for (const Device& da : a.devices) {
    auto it = b_devices.find(da.plane);
    if (it == b_devices.end()) {
      comparison.only_a.push_back(da.plane);
      continue;
    }
    seen[da.plane] = true;
    const Device& db = *it->second;
    DeviceComparison device;
    device.plane = da.plane;
    device.steps_a = da.steps.size();
    device.steps_b = db.steps.size();
    std::vector<double> length_a = per_step(da, [](const Step& s) { return s.length_ps(); });
    double floor_ps = length_a.empty() ? 0.0 : stats::mean(length_a);
    auto add = [&](std::string kind, std::string name, std::string category, auto figure) {
      device.changes.push_back(change_of(std::move(kind), std::move(name), std::move(category),
                                         per_step(da, figure), per_step(db, figure), floor_ps,
                                         min_change_percent));
    };
    add("step", "length", "", [](const Step& s) { return s.length_ps(); });
    add("step", "busy", "", [](const Step& s) { return s.busy_ps; });
    add("step", "idle", "", [](const Step& s) { return s.idle_ps(); });
    for (std::size_t c = 0; c < kCategories; ++c) {
      add("category", category_name(static_cast<Category>(c)), "",
          [c](const Step& s) { return s.category_ps[c]; });
    }
    // Ops by name; an op missing on one side took 0 in each of its steps.
    std::map<std::string, std::pair<const OpTime*, const OpTime*>> ops;
    for (const OpTime& op : da.ops) ops[op.name].first = &op;
    for (const OpTime& op : db.ops) ops[op.name].second = &op;
    for (const auto& [name, pair] : ops) {
      auto values = [](const OpTime* op, std::size_t steps) {
        std::vector<double> out(steps, 0.0);
        if (op != nullptr) {
          for (std::size_t i = 0; i < steps && i < op->step_self_ps.size(); ++i) {
            out[i] = static_cast<double>(op->step_self_ps[i]);
          }
        }
        return out;
      };
      const OpTime* any = pair.first != nullptr ? pair.first : pair.second;
      device.changes.push_back(
          change_of("op", name, category_name(any->category), values(pair.first, da.steps.size()),
                    values(pair.second, db.steps.size()), floor_ps, min_change_percent));
    }
    std::stable_sort(device.changes.begin(), device.changes.end(),
                     [](const Change& x, const Change& y) {
                       return std::abs(x.delta_ps()) > std::abs(y.delta_ps());
                     });
    comparison.devices.push_back(std::move(device));
  }
  for (const Device& db : b.devices) {
    if (!seen.count(db.plane)) comparison.only_b.push_back(db.plane);
  }
  return comparison;
}

std::string format_compare_text(const Comparison& comparison, std::size_t top) {
  std::string out;
  out += fmt::format("A: {}\nB: {}\n", fmt::join(comparison.files_a, ", "),
                     fmt::join(comparison.files_b, ", "));
  out += fmt::format(
      "per device, the change of each figure's mean per step (ms), largest first; spread: "
      "sqrt(sd_A^2 + sd_B^2) over the steps; moved: |change| > spread and > {}% of A\n",
      comparison.min_change_percent);
  for (const auto& plane : comparison.only_a) out += fmt::format("only in A: {}\n", plane);
  for (const auto& plane : comparison.only_b) out += fmt::format("only in B: {}\n", plane);
  for (const DeviceComparison& device : comparison.devices) {
    out += fmt::format("\n{} ({} steps in A, {} in B)\n", device.plane, device.steps_a,
                       device.steps_b);
    out += fmt::format("  {:>10} {:>10} {:>10} {:>10}  {:<5}  {:<8}  {}\n", "A ms/step",
                       "B ms/step", "change", "spread", "moved", "kind", "name");
    std::size_t shown = 0;
    for (const Change& change : device.changes) {
      // Every step and category figure; ops up to `top`.
      if (change.kind == "op" && shown++ >= top) continue;
      out += fmt::format("  {:>10} {:>10} {:>10} {:>10}  {:<5}  {:<8}  {}{}\n",
                         plain_ms(change.mean_a_ps), plain_ms(change.mean_b_ps),
                         signed_ms(change.delta_ps()), plain_ms(change.spread_ps),
                         change.moved ? "yes" : "no", change.kind, change.name,
                         change.category.empty() ? "" : " (" + change.category + ")");
    }
  }
  out += fmt::format("\n{}\n", comparison.outcome() == Outcome::kFail
                                   ? "something moved beyond its spread"
                                   : "nothing moved beyond its spread");
  return out;
}

std::string format_compare_json(const Comparison& comparison, std::size_t top) {
  json::Writer j;
  j.begin_object();
  j.field("schema", kCompareSchema);
  j.list("files", comparison.files_a);
  j.list("files_b", comparison.files_b);
  j.field("min_change_percent", comparison.min_change_percent);
  j.list("only_a", comparison.only_a);
  j.list("only_b", comparison.only_b);
  j.key("comparisons").begin_array();
  for (const DeviceComparison& device : comparison.devices) {
    j.begin_object();
    j.field("plane", device.plane);
    j.field("steps_a", static_cast<std::uint64_t>(device.steps_a));
    j.field("steps_b", static_cast<std::uint64_t>(device.steps_b));
    j.key("changes").begin_array();
    std::size_t shown = 0;
    for (const Change& change : device.changes) {
      if (change.kind == "op" && shown++ >= top) continue;
      j.begin_object(json::Writer::Layout::kOneLine);
      j.field("kind", change.kind);
      j.field("name", change.name);
      j.field("category", json::null_if_empty(change.category));
      j.field("mean_a_ps", change.mean_a_ps);
      j.field("mean_b_ps", change.mean_b_ps);
      j.field("delta_ps", change.delta_ps());
      j.field("spread_ps", change.spread_ps);
      j.field("moved", change.moved);
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  j.end_array();
  j.field("exit_code", exit_code(comparison.outcome()));
  j.end_object();
  return std::move(j).str();
}

}  // namespace rtb::profile
