// TPU slice types and topologies: what a `TYPE:TOPOLOGY` slice holds (chips, JAX devices, hosts),
// the strings each Kubernetes or MaxText field uses to name it, and filling a mesh with FSDP.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rtb {

struct TpuType {
  std::string name;             // canonical name: "tpu7x", "v5p", "v6e", "v5e", "v4"
  std::string instance_prefix;  // pathways-rm --instance_type prefix: "tpu7x", "tpuv5", ...
  std::string gke_accelerator;  // cloud.google.com/gke-tpu-accelerator value
  std::string compile_prefix;   // MaxText compile_topology prefix: "tpu7x", "v5p", ...
  int devices_per_chip;         // JAX devices per chip (tpu7x: 2 TensorCores, each a device)
  int cores_per_chip_in_name;   // what the number in a compile_topology name counts per chip
  int chips_per_host;           // chips per VM / pod in a multi-host slice
  int dimensions;               // 3 for 3-D torus generations, 2 for v5e / v6e
  double hbm_gib_per_device;    // usable HBM per JAX device, for memory checks
};

// All known TPU types (a constant table).
const std::vector<TpuType>& tpu_types();

// Finds a type by its canonical name, instance prefix, accelerator label or a common alias
// ("v7x", "tpuv5", "tpu-v5p-slice"...). Throws rtb::Error listing the known names.
const TpuType& find_tpu_type(std::string_view name);

class Topology {
 public:
  // "4x4x8" -> {4, 4, 8}. Throws rtb::Error for anything else.
  static Topology parse(std::string_view text);
  explicit Topology(std::vector<int> dims) : dims_(std::move(dims)) {}
  const std::vector<int>& dims() const { return dims_; }
  int chips() const;
  std::string str() const;
  bool operator==(const Topology&) const = default;

 private:
  std::vector<int> dims_;
};

class Slice {
 public:
  // "tpu7x:4x4x4", "v5p:4x4x4", "tpuv5:2x2x1". Throws rtb::Error naming what is wrong.
  static Slice parse(std::string_view text);
  Slice(const TpuType& type, Topology topology);

  const TpuType& type() const { return *type_; }
  const Topology& topology() const { return topology_; }
  int chips() const { return topology_.chips(); }
  int devices() const { return chips() * type_->devices_per_chip; }
  int chips_per_host() const;  // fewer than the type's when the whole slice is smaller
  int hosts() const { return chips() / chips_per_host(); }
  // pathways-rm --instance_type and the orchestrator's --tpu_topology part: "tpu7x:4x4x8".
  std::string instance_type() const;
  // The unit Kueue's slice annotations and partition labels name under dynamic slicing: the slice
  // itself when it fits in one 4x4x4 cube, else the 4x4x4 cube ("gke-tpu-partition-4x4x4-id").
  Topology partition() const;
  int partition_hosts() const;  // kueue.x-k8s.io/podset-slice-size
  // MaxText's compile_topology name: "tpu7x-256" for tpu7x 4x4x8 (the number counts TensorCores).
  std::string compile_topology() const;

 private:
  const TpuType* type_;
  Topology topology_;
};

// The FSDP degree that fills `devices` given the other mesh axes. Throws rtb::Error when the
// product of the other axes does not divide the devices.
int fill_fsdp(int devices, int context, int expert, int tensor);

}  // namespace rtb
