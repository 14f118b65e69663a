// What render-bench changes in a trainer JobSet: the containers, environment variables, labels
// and flags it edits, the fields that encode the trainer slice with the value each takes for a
// slice, and how the current slice is read. render.cc makes the edits from this table;
// diff_render.cc's BenchClassifier (`diff-renders --expect-bench`) is an independent oracle of a
// render: it re-derives each allowed value from the bench itself rather than asking render.cc, and
// shares only this table, so both agree on where render-bench may write.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "rtb/base/slice.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/jobset.h"

namespace rtb::bench {

// Containers of a Pathways trainer that render-bench edits besides the client.
inline constexpr std::string_view kProxyContainer = "pathways-proxy";    // libtpu flags in args
inline constexpr std::string_view kWorkerContainer = "pathways-worker";  // env LIBTPU_INIT_ARGS
inline constexpr std::string_view kResourceManagerContainer = "pathways-rm";  // --instance_type

// Variables of the client's startup environment that render-bench edits.
inline constexpr std::string_view kMaxTextFlagsEnv = "MAXTEXT_EXTRA_FLAGS";
inline constexpr std::string_view kLibtpuEnv = "LIBTPU_INIT_ARGS";  // also the workers' env
inline constexpr std::string_view kLogpsChunkEnv = "COMPUTE_LOGPS_CHUNK_SIZE";

// The workers' LIBTPU_INIT_ARGS in a bench, as the seed's renderer builds them: the client's whole
// libtpu set (`client`, after the knobs), then the workers' own flags whose key the client does not
// set (worker-only extras such as --megascale_port=-1), so that the workers never run with a flag
// set different from the client's.
k8s::FlagList bench_worker_libtpu(const k8s::FlagList& client, const k8s::FlagList& worker);

// The label whose value is the gang of pods scheduled together: the bench's name.
inline constexpr std::string_view kGangIdLabel = "scheduling.x-k8s.io/gang-id";

// pathways-rm's flag naming the slice, and the node-pool prefix before a partition topology
// (`gke-tpu-partition-4x4x4-...`).
inline constexpr std::string_view kInstanceTypeFlag = "--instance_type";
inline constexpr std::string_view kPartitionPrefix = "gke-tpu-partition-";

// A label or resource key that encodes the trainer slice, and what it holds.
enum class SliceField {
  kTopology,        // cloud.google.com/gke-tpu-topology, ...-slice-topology: "4x4x8"
  kPartitionHosts,  // kueue.x-k8s.io/podset-slice-size: hosts per partition
  kAccelerator,     // cloud.google.com/gke-tpu-accelerator: "tpu7x"
  kChipsPerHost,    // google.com/tpu: chips requested per pod
};
// The slice field a key names, nullopt for other keys.
std::optional<SliceField> slice_field(std::string_view key);
// The value of `field` for `slice`.
std::string slice_field_value(const Slice& slice, SliceField field);

// The slice a trainer JobSet runs on, as text ("tpu7x:4x4x8") with where it was read.
struct TrainerSlice {
  std::string text;
  std::string source;  // "pathways-rm --instance_type" or "the accelerator and topology labels"
};
// pathways-rm's last --instance_type, else the first accelerator and topology labels in the
// JobSet; nullopt when it has neither.
std::optional<TrainerSlice> find_trainer_slice(const k8s::JobSetView& jobset);

// The replicated jobs (by name) whose pods request google.com/tpu: the slice's hosts.
std::set<std::string> tpu_jobs(const k8s::JobSetView& jobset);

}  // namespace rtb::bench
