// render-bench: the trainer slice, --trainer-slice (render_steps.h).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "rtb/base/error.h"
#include "rtb/base/slice.h"
#include "rtb/bench/render_steps.h"
#include "rtb/bench/render_table.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/shell.h"
#include "rtb/k8s/yaml.h"

namespace rtb::bench {
namespace render_steps {

void Renderer::edit_trainer_slice() {
  if (!options_.trainer_slice) return;
  const Knob knob = Knob::kTrainerSlice;
  std::optional<Slice> parsed;
  try {
    parsed = Slice::parse(*options_.trainer_slice);
  } catch (const Error& e) {
    fail_knob(knob, *options_.trainer_slice, "{}", e.message());
  }
  const Slice& target = *parsed;
  k8s::JobSetView view(bench_);
  std::optional<TrainerSlice> found = find_trainer_slice(view);
  if (!found) {
    fail_knob(knob, *options_.trainer_slice,
              "cannot tell the trainer's current slice (no pathways-rm --instance_type, no "
              "gke-tpu-accelerator and topology labels)");
  }
  std::optional<Slice> current = Slice::parse(found->text);
  // The mesh: FSDP fills the devices left by context x expert x tensor.
  auto mesh_axis = [&](std::string_view key) {
    auto value = trainer_argv_.value(key);
    return value ? parse_int(*value, "--" + std::string(key)) : 1;
  };
  int fsdp;
  try {
    fsdp = fill_fsdp(target.devices(), mesh_axis("mesh_context"), mesh_axis("mesh_expert"),
                     mesh_axis("mesh_tp"));
  } catch (const Error& e) {
    fail_knob(knob, *options_.trainer_slice, "{}", e.message());
  }
  std::string old_topology = current->topology().str();
  std::string old_partition = fmt::format("{}{}-", kPartitionPrefix, current->partition().str());
  std::string new_partition = fmt::format("{}{}-", kPartitionPrefix, target.partition().str());
  std::set<std::string> tpu_job_names = tpu_jobs(view);
  auto set_field = [&](YAML::Node node, const ScalarPlace& place, const std::string& value) {
    if (node.Scalar() == value) return;
    record(knob, place.path(), node.Scalar(), value);
    assign_string(node, value);
  };
  const YAML::Node command = k8s::yaml::lookup(client_.container.node, "command");
  std::string instance_type_prefix = std::string(kInstanceTypeFlag) + "=";
  visit_scalars(bench_.root, command, [&](YAML::Node node, const ScalarPlace& place) {
    const std::string& key = place.key();
    const std::string& value = node.Scalar();
    if (std::optional<SliceField> field = slice_field(key)) {
      set_field(node, place, slice_field_value(target, *field));
    } else if (value.rfind(instance_type_prefix, 0) == 0) {
      set_field(node, place, instance_type_prefix + target.instance_type());
    } else if (value.find(old_partition) != std::string::npos) {
      std::string replaced = value;
      for (std::size_t at = replaced.find(old_partition); at != std::string::npos;
           at = replaced.find(old_partition, at + new_partition.size())) {
        replaced.replace(at, old_partition.size(), new_partition);
      }
      set_field(node, place, replaced);
    }
  });
  // Keys that name the partition (node affinity keys are values, but labels may be keys).
  YAML::Node jobs = k8s::yaml::lookup(k8s::yaml::lookup(bench_.root, "spec"), "replicatedJobs");
  std::vector<std::string> job_keys = k8s::sequence_item_keys(jobs);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!tpu_job_names.count(job_keys[i])) continue;
    std::string job_path = k8s::path_item("spec.replicatedJobs", job_keys[i]) + ".template.spec";
    YAML::Node job_spec = k8s::yaml::lookup(k8s::yaml::lookup(jobs[i], "template"), "spec");
    for (std::string_view field : {"completions", "parallelism"}) {
      YAML::Node node = k8s::yaml::lookup(job_spec, field);
      if (node.IsDefined() && node.IsScalar() && node.Scalar() != int_text(target.hosts())) {
        record(knob, k8s::path_child(job_path, field), node.Scalar(), int_text(target.hosts()));
        node = target.hosts();
      }
    }
  }
  edit_flag_list(trainer_argv_, fmt::format("--mesh_fsdp={}", fsdp), knob,
                 client_path(".startup.argv"), false);
  // The orchestrator's description of the trainer, which the driver reads.
  if (orch_argv_.contains("trainer_fsdp")) {
    edit_flag_list(orch_argv_, fmt::format("--trainer_fsdp={}", fsdp), knob, orch_argv_path_, true);
  }
  if (auto topology = orch_argv_.value("tpu_topology")) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (;;) {
      std::size_t plus = topology->find('+', start);
      parts.push_back(topology->substr(start, plus == std::string::npos ? plus : plus - start));
      if (plus == std::string::npos) break;
      start = plus + 1;
    }
    // The trainer's part is the one naming its current slice, else the first.
    auto trainer_part = std::find(parts.begin(), parts.end(), current->instance_type());
    if (trainer_part == parts.end()) trainer_part = parts.begin();
    *trainer_part = target.instance_type();
    edit_flag_list(orch_argv_, fmt::format("--tpu_topology={}", fmt::join(parts, "+")), knob,
                   orch_argv_path_, true);
  }
  // No field may keep the old topology (outside the partition names, which may legitimately stay).
  if (current->topology() == target.topology()) return;
  auto keeps_old = [&](std::string text) {
    for (std::size_t at = text.find(new_partition); at != std::string::npos;
         at = text.find(new_partition)) {
      text.erase(at, new_partition.size());
    }
    return text.find(old_topology) != std::string::npos;
  };
  visit_scalars(bench_.root, command, [&](YAML::Node node, const ScalarPlace& place) {
    if (keeps_old(node.Scalar())) {
      fail_knob(knob, *options_.trainer_slice,
                "{} still names the old topology {} ('{}'), a field render-bench does not "
                "know how to change",
                place.path(), old_topology, node.Scalar());
    }
  });
  for (const std::string& item : trainer_argv_.items()) {
    if (keeps_old(item))
      fail_knob(knob, *options_.trainer_slice,
                "the trainer argument {} still names the old topology {}", item, old_topology);
  }
  for (const k8s::shell::Assignment& assignment : env_) {
    if (keeps_old(assignment.value)) {
      fail_knob(knob, *options_.trainer_slice,
                "the trainer's environment {} still names the old topology {}", assignment.name,
                old_topology);
    }
  }
}

}  // namespace render_steps

}  // namespace rtb::bench
