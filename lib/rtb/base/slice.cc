#include "rtb/base/slice.h"

#include <algorithm>
#include <charconv>

#include "rtb/base/error.h"

namespace rtb {
namespace {

// Devices per chip and naming: MaxText accelerator_to_spec_map.py (tpu7x: two cores per chip, one
// JAX device per core, tpu7x-N counts cores; v5p and v4: one megacore device per chip, names count
// two cores per chip; v6e and v5e: one core per chip). HBM per device: tpu7x uses the 94.74 GiB
// usable figure of MaxText's 397B engine benchmark launcher (of 96 GiB per core); the others are
// the published per-chip capacities (v5p 95 GiB, v6e 32 GiB, v5e 16 GiB, v4 32 GiB).
std::vector<TpuType> make_table() {
  return {
      {"tpu7x", "tpu7x", "tpu7x", "tpu7x", 2, 2, 4, 3, 94.74},
      {"v5p", "tpuv5", "tpu-v5p-slice", "v5p", 1, 2, 4, 3, 95.0},
      {"v6e", "tpuv6e", "tpu-v6e-slice", "v6e", 1, 1, 4, 2, 32.0},
      {"v5e", "tpuv5e", "tpu-v5-lite-podslice", "v5e", 1, 1, 4, 2, 16.0},
      {"v4", "tpuv4", "tpu-v4-podslice", "v4", 1, 2, 4, 3, 32.0},
  };
}

int parse_positive(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) return 0;
  return value;
}

}  // namespace

const std::vector<TpuType>& tpu_types() {
  static const std::vector<TpuType> table = make_table();
  return table;
}

const TpuType& find_tpu_type(std::string_view name) {
  for (const TpuType& type : tpu_types()) {
    if (name == type.name || name == type.instance_prefix || name == type.gke_accelerator ||
        name == type.compile_prefix) {
      return type;
    }
  }
  // Common spellings that are not field values.
  if (name == "v7x" || name == "tpuv7x") return find_tpu_type("tpu7x");
  if (name == "tpuv5p") return find_tpu_type("v5p");
  if (name == "v5litepod" || name == "v5lite") return find_tpu_type("v5e");
  std::string known;
  for (const TpuType& type : tpu_types()) {
    if (!known.empty()) known += ", ";
    known += type.name;
  }
  fail("unknown TPU type '{}' (known: {})", name, known);
}

Topology Topology::parse(std::string_view text) {
  std::vector<int> dims;
  std::size_t start = 0;
  for (;;) {
    std::size_t x = text.find('x', start);
    std::string_view part = text.substr(start, x == std::string_view::npos ? x : x - start);
    int value = parse_positive(part);
    if (value == 0 || value > 4096) {
      fail("'{}' is not a topology like 4x4x8", text);
    }
    dims.push_back(value);
    if (x == std::string_view::npos) break;
    start = x + 1;
  }
  if (dims.size() < 2 || dims.size() > 3) fail("'{}' is not a topology like 4x4x8", text);
  return Topology(std::move(dims));
}

int Topology::chips() const {
  int chips = 1;
  for (int d : dims_) chips *= d;
  return chips;
}

std::string Topology::str() const {
  std::string out;
  for (int d : dims_) {
    if (!out.empty()) out += 'x';
    out += std::to_string(d);
  }
  return out;
}

Slice::Slice(const TpuType& type, Topology topology)
    : type_(&type), topology_(std::move(topology)) {
  if (static_cast<int>(topology_.dims().size()) != type_->dimensions) {
    fail("{} slices have {}-D topologies, not '{}'", type_->name, type_->dimensions,
         topology_.str());
  }
  if (chips() > chips_per_host() && chips() % chips_per_host() != 0) {
    fail("{}:{} does not split into hosts of {} chips", type_->name, topology_.str(),
         type_->chips_per_host);
  }
}

Slice Slice::parse(std::string_view text) {
  std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    fail("'{}' is not a slice like tpu7x:4x4x8 (TYPE:TOPOLOGY)", text);
  }
  return Slice(find_tpu_type(text.substr(0, colon)), Topology::parse(text.substr(colon + 1)));
}

int Slice::chips_per_host() const {
  // v5e and v6e also come as one 8-chip host (2x4); larger slices use 4-chip hosts.
  if (type_->dimensions == 2 && chips() == 8) return 8;
  return std::min(type_->chips_per_host, chips());
}

std::string Slice::instance_type() const { return type_->instance_prefix + ":" + topology_.str(); }

Topology Slice::partition() const {
  const auto& dims = topology_.dims();
  if (dims.size() == 3 && std::any_of(dims.begin(), dims.end(), [](int d) { return d > 4; })) {
    return Topology({4, 4, 4});
  }
  return topology_;
}

int Slice::partition_hosts() const { return std::max(1, partition().chips() / chips_per_host()); }

std::string Slice::compile_topology() const {
  return type_->compile_prefix + "-" + std::to_string(chips() * type_->cores_per_chip_in_name);
}

int fill_fsdp(int devices, int context, int expert, int tensor) {
  if (context <= 0 || expert <= 0 || tensor <= 0) {
    fail("mesh axes must be positive (context {}, expert {}, tensor {})", context, expert, tensor);
  }
  long long others = static_cast<long long>(context) * expert * tensor;
  if (devices % others != 0) {
    fail("the mesh context {} x expert {} x tensor {} = {} does not divide {} devices", context,
         expert, tensor, others, devices);
  }
  return static_cast<int>(devices / others);
}

}  // namespace rtb
