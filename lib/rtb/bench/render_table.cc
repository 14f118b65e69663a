#include "rtb/bench/render_table.h"

#include <utility>
#include <vector>

#include "rtb/k8s/yaml.h"

namespace rtb::bench {

std::optional<SliceField> slice_field(std::string_view key) {
  if (key == "cloud.google.com/gke-tpu-slice-topology" ||
      key == "cloud.google.com/gke-tpu-topology") {
    return SliceField::kTopology;
  }
  if (key == "kueue.x-k8s.io/podset-slice-size") return SliceField::kPartitionHosts;
  if (key == "cloud.google.com/gke-tpu-accelerator") return SliceField::kAccelerator;
  if (key == "google.com/tpu") return SliceField::kChipsPerHost;
  return std::nullopt;
}

std::string slice_field_value(const Slice& slice, SliceField field) {
  switch (field) {
    case SliceField::kTopology:
      return slice.topology().str();
    case SliceField::kPartitionHosts:
      return std::to_string(slice.partition_hosts());
    case SliceField::kAccelerator:
      return slice.type().gke_accelerator;
    case SliceField::kChipsPerHost:
      return std::to_string(slice.chips_per_host());
  }
  return {};
}

std::optional<TrainerSlice> find_trainer_slice(const k8s::JobSetView& jobset) {
  if (auto rm = jobset.container(kResourceManagerContainer)) {
    YAML::Node args = k8s::yaml::lookup(rm->node, "args");
    std::optional<std::string> found;
    std::string prefix = std::string(kInstanceTypeFlag) + "=";
    if (args.IsSequence()) {
      for (const auto& arg : args) {
        if (arg.IsScalar() && arg.Scalar().rfind(prefix, 0) == 0)
          found = arg.Scalar().substr(prefix.size());
      }
    }
    if (found) return TrainerSlice{*found, "pathways-rm --instance_type"};
  }
  // The labels, in document order (an explicit stack: input depth cannot overflow ours).
  std::optional<std::string> accelerator, topology;
  std::vector<YAML::Node> pending{jobset.document().root};
  while (!pending.empty() && !(accelerator && topology)) {
    YAML::Node node = pending.back();
    pending.pop_back();
    std::vector<YAML::Node> children;
    if (node.IsMap()) {
      for (const auto& kv : node) {
        std::optional<SliceField> field =
            kv.first.IsScalar() ? slice_field(kv.first.Scalar()) : std::nullopt;
        if (field && kv.second.IsScalar()) {
          if (*field == SliceField::kAccelerator && !accelerator) accelerator = kv.second.Scalar();
          if (*field == SliceField::kTopology && !topology) topology = kv.second.Scalar();
        }
        children.push_back(kv.second);
      }
    } else if (node.IsSequence()) {
      for (const auto& item : node) children.push_back(item);
    }
    pending.insert(pending.end(), children.rbegin(), children.rend());
  }
  if (!accelerator || !topology) return std::nullopt;
  return TrainerSlice{*accelerator + ":" + *topology, "the accelerator and topology labels"};
}

k8s::FlagList bench_worker_libtpu(const k8s::FlagList& client, const k8s::FlagList& worker) {
  std::vector<std::string> items = client.items();
  for (const std::string& item : worker.items()) {
    std::string_view key = k8s::flag_key(item, k8s::FlagStyle::kDashDash);
    if (key.empty() || !client.contains(key)) items.push_back(item);
  }
  return k8s::FlagList(k8s::FlagStyle::kDashDash, std::move(items));
}

std::set<std::string> tpu_jobs(const k8s::JobSetView& jobset) {
  std::set<std::string> jobs;
  for (const k8s::ContainerRef& container : jobset.containers()) {
    YAML::Node resources = k8s::yaml::lookup(container.node, "resources");
    for (std::string_view kind : {"requests", "limits"}) {
      if (k8s::yaml::lookup(k8s::yaml::lookup(resources, kind), "google.com/tpu").IsDefined())
        jobs.insert(container.job);
    }
  }
  return jobs;
}

}  // namespace rtb::bench
