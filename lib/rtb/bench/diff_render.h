// diff-renders' core: matches the documents of two renders (DRY_RUN outputs or rendered JobSet
// files) and compares each pair with diff.h's flag-level tree diff; and the --expect-bench check,
// which sorts the differences between an e2e trainer and a bench render of it into what
// render-bench may change and everything else.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/k8s/diff.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/server_fields.h"

namespace rtb::bench {

// --rename OLD=NEW: B's name NEW counts as A's name OLD.
struct Rename {
  std::string from;  // OLD (A's)
  std::string to;    // NEW (B's)
};
// Parses `OLD=NEW`. Throws rtb::Error for anything else.
Rename parse_rename(std::string_view text);

// `text` with every occurrence of the name `from` replaced by `to`. An occurrence counts when the
// character before it is not [A-Za-z0-9_-] and the one after is not [A-Za-z0-9_]: names derived
// from a JobSet name (`abtest-train-proc-0`) follow it, another name (`abtest-train2`) does not.
std::string replace_name(std::string_view text, std::string_view from, std::string_view to);

// A document of one input as diff-renders sees it: every YAML mapping with a `kind`, and every
// item of a `kind: List` (what `kubectl get jobset -o yaml` prints without a name).
struct DiffDocument {
  k8s::Document doc;     // the object (a List item shares its List's text and first line)
  std::size_t line = 0;  // 1-based input line where the object starts
  std::string kind;
  // metadata.name, or metadata.generateName when the object has only that (a render that lets
  // the server make up the name).
  std::string name;
  k8s::Role role = k8s::Role::kUnknown;  // k8s::role_of
};

// The Kubernetes documents of an input, Lists' items in their place. Throws rtb::Error (the
// input's name and a line) when none of them is a JobSet.
std::vector<DiffDocument> diff_documents(const k8s::DryRun& input, const k8s::RoleMains& mains);

struct RenderDiffOptions {
  bool by_role = false;  // match JobSets by role (trainer, orchestrator, rollout), not by name
  std::vector<Rename> renames;
  k8s::RoleMains mains;
  // Compare the fields the API server fills in (server_fields.h); by default they are left out.
  bool server_fields = false;
};

// How the two documents of a pair were matched. The ids (pairing_id) are part of diff-renders'
// --json output.
enum class Pairing {
  kNone,     // a document that only one side has
  kName,     // the same kind and name
  kRename,   // B's name counts as A's (--rename)
  kRole,     // the same role (--by-role)
  kOnlyOne,  // names differ, and each side holds one document of that kind and role (two runs of
             // one experiment under two run names)
};
std::string_view pairing_id(Pairing pairing);  // "name", "rename", "role", "only-one"; "" for kNone

// One matched pair of documents, or a document that only one side has.
struct DocumentDiff {
  // What the differences' paths are prefixed with: the role with by_role, else the name (A's for
  // a pair), with `Kind/` in front for kinds other than JobSet.
  std::string label;
  std::string kind;
  std::optional<std::string> a_name, b_name;  // absent on the side that lacks the document
  std::size_t a_line = 0, b_line = 0;         // first input line of the document (0: absent)
  Pairing paired_by = Pairing::kNone;
  std::string role;  // a JobSet's role (trainer, ...), "" when it has none
  // For a document on one side only, one difference with the empty path.
  std::vector<k8s::Difference> differences;
  // Server-populated fields that differ and were left out (without
  // RenderDiffOptions::server_fields).
  std::vector<std::string> hidden_server_fields;
  // Fields the JobSet API defaulted or Kueue's admission added on the live side that the render
  // lacks, left out likewise (server_fields.h).
  std::vector<k8s::DefaultedField> hidden_defaults;
};

struct RenderDiff {
  std::vector<DocumentDiff> documents;  // in A's order, then what only B has
  std::size_t differences() const;
};

// Documents are matched by kind and name (B's renamed by RenderDiffOptions::renames), or with
// by_role JobSets by role. What is left unmatched is paired when each side holds exactly one
// document of that kind and role (a JobSet without a role counts as one role): two renders of
// one experiment under two run names compare, their names reported as a difference.
RenderDiff diff_renders(const k8s::DryRun& a, const k8s::DryRun& b,
                        const RenderDiffOptions& options);

// --- expect-bench ------------------------------------------------------------------------------

// Why a difference between the e2e trainer and the bench is one render-bench makes. The ids are
// part of diff-renders' --json output.
enum class BenchChange {
  kName,            // a value naming the trainer JobSet now names the bench
  kGangId,          // the scheduling.x-k8s.io/gang-id label is the bench's name
  kMaxRestarts,     // spec.failurePolicy.maxRestarts is 0
  kNamespace,       // metadata.namespace (--namespace)
  kImage,           // the client container's image (--image)
  kClientScript,    // the client's wrapper script around the startup command
  kClientProgram,   // the program of the startup command (the bench driver)
  kDriverSettings,  // the driver's settings, TRAINER_ARGV and ORCH_ARGV
  kMaxTextFlag,     // a MAXTEXT_EXTRA_FLAGS item added or changed (--maxtext-flag, ...)
  kLibtpuFlag,      // a libtpu flag added or changed alike in every place (--libtpu-flag)
  kWorkersLibtpu,   // a pathways-worker libtpu flag set to the client's (the workers run the
                    // client's whole libtpu set plus their own extras)
  kArgvFlag,        // a trainer argv flag added, changed or removed (--trainer-arg, ...)
  kLogpsChunk,      // COMPUTE_LOGPS_CHUNK_SIZE in the startup environment (--logps-chunk)
  kTrainerSlice,    // a field that encodes the trainer slice, with the bench slice's value
  kWeights,         // a setting that loads a checkpoint, dropped (--weights random): a trainer
                    // argv flag, a MAXTEXT_EXTRA_FLAGS item or MAXTEXT_CKPT (trainer_config.h)
  kProfiler,        // the trainer's own profiler turned off where the bench driver traces
                    // (--profile-window): --profiler_steps=0, MAXTEXT_EXTRA_FLAGS profiler dropped
  kDumpHlo,         // the XLA dump flags (--xla_dump_to, --xla_dump_hlo_as_text) set in the
                    // pathways-proxy args only, where the compile runs (--dump-hlo)
};
std::string_view bench_change_id(BenchChange change);  // "name", "gang-id", ...

struct BenchDifference {
  k8s::Difference difference;
  std::optional<BenchChange> allowed;  // nullopt: not something render-bench changes
  std::string why;                     // for an unexpected difference: why it is not allowed
};

struct ExpectBenchResult {
  std::string arm;  // a same-pod bench (arms.h): the arm whose program was compared; else empty
  std::string e2e_name, bench_name;
  std::size_t e2e_line = 0, bench_line = 0;
  std::vector<BenchDifference> differences;  // every difference, in diff_trees() order
  std::size_t unexpected() const;
};

// Compares the trainer of the e2e DRY_RUN `e2e` with the bench JobSet in `bench` (its trainer by
// role, or its only JobSet: k8s::select_roles) and classifies each difference. Throws rtb::Error
// when either side has no such JobSet.
ExpectBenchResult check_expect_bench(const k8s::DryRun& e2e, const k8s::DryRun& bench,
                                     const k8s::RoleMains& mains);

// The same for every program the bench runs: for a same-pod bench of several arms (arms.h), each
// arm's program (its first run) compared with the e2e trainer as a bench of one arm is, in the
// order of their first runs; for a bench of one arm, check_expect_bench's one result.
std::vector<ExpectBenchResult> check_expect_bench_arms(const k8s::DryRun& e2e,
                                                       const k8s::DryRun& bench,
                                                       const k8s::RoleMains& mains);

}  // namespace rtb::bench
