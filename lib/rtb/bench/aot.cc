#include "rtb/bench/aot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <memory>

#include "rtb/base/error.h"
#include "rtb/base/json.h"
#include "rtb/base/slice.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/shell.h"
#include "rtb/k8s/yaml.h"

extern char** environ;

namespace rtb::bench {
namespace {

constexpr std::string_view kSource = "the bench render";

// Environment variables of the trainer that the compile does not get: the run's persistent
// compilation cache (a workstation compile must not read or write it) and the platform choice.
bool withheld_variable(std::string_view name) {
  return name.rfind("JAX_COMPILATION_CACHE", 0) == 0 ||
         name.rfind("JAX_PERSISTENT_CACHE", 0) == 0 || name == "JAX_PLATFORMS" ||
         name == "MAXTEXT_EXTRA_FLAGS";
}

long long parse_integer(std::string_view text, std::string_view what) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    fail("{}={}: not an integer", what, text);
  return value;
}

void check_number(std::string_view text, std::string_view what) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    fail("{}={}: not a number", what, text);
}

// Python's str2bool as run_trainer_node reads its boolean flags.
std::optional<bool> parse_bool(std::string_view text) {
  std::string lowered(text);
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lowered == "yes" || lowered == "true" || lowered == "t" || lowered == "y" || lowered == "1")
    return true;
  if (lowered == "no" || lowered == "false" || lowered == "f" || lowered == "n" || lowered == "0")
    return false;
  return std::nullopt;
}

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
  long long integer(std::string_view key, long long fallback) const {
    auto value = text(key);
    return value ? parse_integer(*value, fmt::format("{} --{}", name_, key)) : fallback;
  }
  // `--k` (true), `--no-k` (false), `--k=V` (str2bool), absent (fallback).
  bool boolean(std::string_view key, bool fallback) const {
    auto at = flags_.find(key);
    if (!at) return fallback;
    const std::string& item = flags_.items()[*at];
    if (is_negated(item, k8s::FlagStyle::kDashDash)) return false;
    auto value = flag_value(item, k8s::FlagStyle::kDashDash);
    if (!value) return true;
    auto parsed = parse_bool(*value);
    if (!parsed) fail("{} {}: not a boolean", name_, item);
    return *parsed;
  }

 private:
  std::string name_;
  k8s::FlagList flags_;
};

std::string yaml_single_quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

// Text safe inside a `#` comment line: no line breaks or other control characters.
std::string comment_safe(std::string_view text) {
  std::string out;
  for (char c : text) out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  return out;
}

// The trainer slice: pathways-rm's --instance_type, else the accelerator and topology labels.
std::string trainer_slice_text(const k8s::JobSetView& view) {
  if (auto rm = view.container("pathways-rm")) {
    YAML::Node args = k8s::yaml::lookup(rm->node, "args");
    std::optional<std::string> found;
    if (args.IsSequence()) {
      for (const auto& arg : args) {
        if (arg.IsScalar() && arg.Scalar().rfind("--instance_type=", 0) == 0)
          found = arg.Scalar().substr(16);
      }
    }
    if (found) return *found;
  }
  std::optional<std::string> accelerator, topology;
  YAML::Node jobs =
      k8s::yaml::lookup(k8s::yaml::lookup(view.document().root, "spec"), "replicatedJobs");
  if (jobs.IsSequence()) {
    for (const auto& job : jobs) {
      YAML::Node pod = k8s::yaml::lookup(k8s::yaml::lookup(job, "template"), "spec");
      pod = k8s::yaml::lookup(pod, "template");
      for (YAML::Node map : {k8s::yaml::lookup(k8s::yaml::lookup(pod, "metadata"), "annotations"),
                             k8s::yaml::lookup(k8s::yaml::lookup(pod, "metadata"), "labels"),
                             k8s::yaml::lookup(k8s::yaml::lookup(pod, "spec"), "nodeSelector")}) {
        if (!map.IsMap()) continue;
        if (auto v = k8s::yaml::scalar_at(map, "cloud.google.com/gke-tpu-accelerator"))
          accelerator = v;
        for (std::string_view key :
             {"cloud.google.com/gke-tpu-topology", "cloud.google.com/gke-tpu-slice-topology"}) {
          if (auto v = k8s::yaml::scalar_at(map, key)) topology = v;
        }
      }
    }
  }
  if (!accelerator || !topology) {
    fail(
        "cannot tell the trainer slice: no pathways-rm --instance_type and no "
        "gke-tpu-accelerator / gke-tpu-topology labels");
  }
  return *accelerator + ":" + *topology;
}

class Planner {
 public:
  Planner(const YAML::Node& bench, const AotOptions& options)
      : bench_{bench, 0}, options_(options) {}

  AotPlan run() {
    read_client();
    read_slice();
    add_trainer_keys();
    add_extra_flags();
    add_compile_keys();
    check_mesh();
    return std::move(plan_);
  }

 private:
  void key(std::string k, std::string v, std::string origin) {
    plan_.keys.push_back({std::move(k), std::move(v), std::move(origin)});
  }
  void note(std::string text) { plan_.notes.push_back(std::move(text)); }

  const k8s::shell::Assignment* env(std::string_view name) const {
    const k8s::shell::Assignment* found = nullptr;
    for (const k8s::shell::Assignment& a : trainer_env_) {
      if (a.name == name) found = &a;
    }
    return found;
  }

  void read_client() {
    k8s::JobSetView view(bench_);
    plan_.bench_name = view.name();
    k8s::ClientCommand client = view.client(std::string(kSource));
    bool in_driver = false;
    std::optional<std::string> trainer_argv, orch_argv;
    for (const k8s::shell::Assignment& a : client.startup.env) {
      if (a.name == k8s::kDriverSettingsStart) in_driver = true;
      if (!in_driver) {
        trainer_env_.push_back(a);
      } else if (a.name == "TRAINER_ARGV") {
        trainer_argv = a.value;
      } else if (a.name == "ORCH_ARGV") {
        orch_argv = a.value;
      }
    }
    if (!trainer_argv || !orch_argv) {
      fail(
          "{} is not a bench JobSet: its client sets no TRAINER_ARGV and ORCH_ARGV (render it "
          "with the render-bench knobs, not from the e2e trainer)",
          plan_.bench_name);
    }
    auto words = [](const std::string& text, std::string_view name) {
      std::vector<std::string> out;
      try {
        for (const k8s::shell::Word& w : k8s::shell::split(text)) out.push_back(w.value);
      } catch (const Error& e) {
        fail("{}: {}", name, e.message());
      }
      return out;
    };
    trainer_ = std::make_unique<Args>("trainer argv", words(*trainer_argv, "TRAINER_ARGV"));
    orch_ = std::make_unique<Args>("orchestrator argv", words(*orch_argv, "ORCH_ARGV"));
  }

  void read_slice() {
    k8s::JobSetView view(bench_);
    std::string text = trainer_slice_text(view);
    std::optional<Slice> slice;
    try {
      slice.emplace(Slice::parse(text));
    } catch (const Error& e) {
      fail("the trainer slice {} gives no compile_topology: {}", text, e.message());
    }
    plan_.slice = slice->instance_type();
    plan_.chip = slice->type().name;
    plan_.compile_topology = slice->compile_topology();
    plan_.chips = slice->chips();
    plan_.devices = slice->devices();
    plan_.hbm_gib_per_device = slice->type().hbm_gib_per_device;
  }

  // The keys Tunix's build_maxtext_config passes for run_trainer_node's argv and environment
  // (google/tunix tunix/utils/maxtext_utils.py, run_trainer_node.py), in its order.
  void add_trainer_keys() {
    const Args& t = *trainer_;
    std::string tunix = "Tunix";
    key("model_name", t.text_or("maxtext_model_name", "qwen3-0.6b"),
        t.has("maxtext_model_name") ? "--maxtext_model_name" : "run_trainer_node default");
    key("run_name", t.text_or("worker_id", "tunix_maxtext"), "--worker_id");
    if (auto dir = t.text("maxtext_output_directory")) {
      key("base_output_directory", *dir, "--maxtext_output_directory");
    } else if (const auto* dir_env = env("MAXTEXT_OUTPUT_DIR")) {
      key("base_output_directory", dir_env->value, "MAXTEXT_OUTPUT_DIR");
    }
    if (t.has("maxtext_ckpt_path")) {
      note("--maxtext_ckpt_path is not passed: the compile uses abstract weights");
    }
    key("enable_checkpointing", "False", "aot-check (the abstract engine never saves)");
    for (const char* fixed :
         {"scan_layers=True", "convert_checkpoint_if_possible=False",
          "skip_jax_distributed_system=True", "allow_split_physical_axes=True"}) {
      std::string_view item(fixed);
      std::size_t eq = item.find('=');
      key(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)), tunix);
    }

    long long micro = t.integer("train_micro_batch_size", 1);
    long long mini = t.integer("mini_batch_size", 1);
    long long fsdp = t.integer("mesh_fsdp", 2);
    long long tp = t.integer("mesh_tp", 1);
    long long expert = t.integer("mesh_expert", 1);
    long long context = t.integer("mesh_context", 1);
    if (micro <= 0) fail("trainer argv --train_micro_batch_size={}: must be positive", micro);
    if (mini <= 0) fail("trainer argv --mini_batch_size={}: must be positive", mini);
    if (fsdp <= 0 || micro % fsdp != 0) {
      fail(
          "the micro-batch does not divide over the mesh: --train_micro_batch_size={} is not a "
          "multiple of --mesh_fsdp={} (MaxText shards the batch over FSDP)",
          micro, fsdp);
    }
    plan_.train_micro_batch_size = micro;
    plan_.per_device_batch_size =
        python_float(static_cast<double>(micro) / static_cast<double>(plan_.devices));
    key("per_device_batch_size", plan_.per_device_batch_size,
        fmt::format("--train_micro_batch_size {} / {} devices", micro, plan_.devices));
    long long accumulation = std::max(1LL, (mini + micro - 1) / micro);
    key("gradient_accumulation_steps", std::to_string(accumulation),
        "ceil(--mini_batch_size / --train_micro_batch_size)");

    plan_.max_prompt_length = t.integer("max_prompt_length", 512);
    plan_.max_response_length = t.integer("max_response_length", 128);
    plan_.max_seq_token_per_tpu = t.integer("max_seq_token_per_tpu", 0);
    long long sequence = plan_.max_prompt_length + plan_.max_response_length;
    if (plan_.max_seq_token_per_tpu > 0 && plan_.max_seq_token_per_tpu < sequence) {
      fail(
          "trainer argv --max_seq_token_per_tpu={} is smaller than --max_prompt_length + "
          "--max_response_length = {}: packing cannot place a sequence in a row",
          plan_.max_seq_token_per_tpu, sequence);
    }
    // The compile builds rollouts of max_prefill_predict_length prompt tokens and the rest of
    // max_target_length as completion; the packed row width is its own key (added below).
    key("max_target_length", std::to_string(sequence),
        "--max_prompt_length + --max_response_length");
    if (plan_.max_seq_token_per_tpu > 0 && plan_.max_seq_token_per_tpu != sequence) {
      note(fmt::format(
          "the trainer declares max_target_length={} (its packed row); the compile takes the "
          "sequence length {} and the row width from compile_engine_max_seq_token_per_tpu",
          plan_.max_seq_token_per_tpu, sequence));
    }
    compare_with_orchestrator("max_prompt_length", plan_.max_prompt_length, 1024);
    compare_with_orchestrator("max_response_length", plan_.max_response_length, 1024);
    compare_with_orchestrator("train_micro_batch_size", micro, 1);

    std::string attention = "dot_product", attention_origin = "Tunix default";
    if (const auto* a = env("TRAINER_MAXTEXT_ATTENTION"); a && !a->value.empty()) {
      attention = a->value;
      attention_origin = "TRAINER_MAXTEXT_ATTENTION";
    }
    if (auto a = t.text("maxtext_attention"); a && !a->empty()) {
      attention = *a;
      attention_origin = "--maxtext_attention";
    }
    key("attention", attention, attention_origin);
    if (auto remat = t.text("remat_policy"); remat && !remat->empty())
      key("remat_policy", *remat, "--remat_policy");
    if (auto fraction = t.text("learning_rate_final_fraction"))
      key("learning_rate_final_fraction", *fraction, "--learning_rate_final_fraction");
    key("use_tokamax_gmm", "true", tunix);
    key("use_gmm_v2", "true", tunix);
    key("ici_fsdp_parallelism", std::to_string(fsdp),
        t.has("mesh_fsdp") ? "--mesh_fsdp" : "run_trainer_node default");

    long long rollout_tp = t.integer("rollout_mesh_tp", 0);
    long long padded = t.integer("maxtext_padded_moe_mlp_dim", 0);
    if (padded > 0) {
      key("padded_base_moe_mlp_dim", std::to_string(padded), "--maxtext_padded_moe_mlp_dim");
    } else if (rollout_tp > 1) {
      note(fmt::format(
          "Tunix derives padded_base_moe_mlp_dim for --rollout_mesh_tp={} from the model's YAML, "
          "which aot-check does not read: pass --compile-key padded_base_moe_mlp_dim=D if the "
          "trainer pads",
          rollout_tp));
    }
    long long kv_heads = t.integer("base_num_kv_heads", 0);
    if (kv_heads > 0 && rollout_tp > kv_heads) {
      if (rollout_tp % kv_heads != 0) {
        fail("--rollout_mesh_tp={} is not a multiple of --base_num_kv_heads={}", rollout_tp,
             kv_heads);
      }
      kv_heads = rollout_tp;
    } else if (kv_heads == 0 && rollout_tp > 1) {
      note(
          "Tunix reads base_num_kv_heads from the model's YAML to replicate KV heads for the "
          "rollout's tensor parallelism; not reproduced (pass --base_num_kv_heads in the trainer "
          "argv)");
    }
    if (kv_heads > 0) {
      key("base_num_kv_heads", std::to_string(kv_heads), "--base_num_kv_heads, --rollout_mesh_tp");
      key("override_model_config", "true", "--base_num_kv_heads");
    }
    key("ici_tensor_parallelism", std::to_string(tp),
        t.has("mesh_tp") ? "--mesh_tp" : "run_trainer_node default");
    key("ici_expert_parallelism", std::to_string(expert),
        t.has("mesh_expert") ? "--mesh_expert" : "run_trainer_node default");
    key("ici_context_parallelism", std::to_string(context),
        t.has("mesh_context") ? "--mesh_context" : "run_trainer_node default");
    if (context > 1) key("context_parallel_load_balance", "False", "--mesh_context > 1");

    std::string lr = "2e-07", lr_origin = "run_trainer_node default";
    for (std::string_view name : {"optimizer_learning_rate", "learning_rate"}) {
      if (auto v = t.text(name)) {
        lr = *v;
        lr_origin = "--" + std::string(name);
      }
    }
    check_number(lr, "learning_rate");
    key("learning_rate", lr, lr_origin);
    std::string warmup = t.text_or("maxtext_warmup_steps_fraction", "0.0");
    check_number(warmup, "--maxtext_warmup_steps_fraction");
    key("warmup_steps_fraction", warmup, "--maxtext_warmup_steps_fraction");
    key("dtype", "bfloat16", tunix);
    key("weight_dtype", "bfloat16", tunix);
    key("grad_dtype", "float32", tunix);
    key("mu_dtype", "float32", tunix);
    bool gate_logits = true;
    std::string gate_origin = "Tunix default";
    if (const auto* v = env("FLOAT32_GATE_LOGITS")) {
      if (auto b = parse_env_bool(v->value)) {
        gate_logits = *b;
        gate_origin = "FLOAT32_GATE_LOGITS";
      }
    }
    key("float32_gate_logits", gate_logits ? "True" : "False", gate_origin);
    if (const auto* v = env("FLOAT32_LOGITS")) {
      if (auto b = parse_env_bool(v->value))
        key("float32_logits", *b ? "True" : "False", "FLOAT32_LOGITS");
    }
    key("enable_tensorboard", "False", tunix);
    key("record_internal_nn_metrics", "False", tunix);
    key("init_weights_seed", "42", tunix);
    key("prefuse_moe_weights", t.boolean("prefuse_moe_weights", false) ? "True" : "False",
        "--prefuse_moe_weights");
    key("use_weight_converter", t.boolean("use_weight_converter", true) ? "True" : "False",
        "--use_weight_converter");
    if (rollout_tp > 0)
      key("rollout_tensor_parallelism", std::to_string(rollout_tp), "--rollout_mesh_tp");
    if (auto mask = t.text("trainable_parameters_mask"); mask && !mask->empty())
      key("trainable_parameters_mask", *mask, "--trainable_parameters_mask");
    bool spikes = t.boolean("maxtext_skip_step_on_spikes", false);
    if (spikes) key("skip_step_on_spikes", "True", "--maxtext_skip_step_on_spikes");
    key("skip_step_on_nan", t.boolean("maxtext_skip_step_on_nan", true) ? "True" : "False",
        "--maxtext_skip_step_on_nan");
    if (spikes) {
      key("skip_step_interval", "128", tunix);
      key("skip_step_scaling_factor", "6.0", tunix);
    }
    if (const auto* v = env("OVERRIDE_MODEL_CONFIG")) {
      std::string lowered = v->value;
      for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if ((lowered == "1" || lowered == "true") && kv_heads == 0)
        key("override_model_config", "true", "OVERRIDE_MODEL_CONFIG");
    }
    for (std::string_view checkpoint_env :
         {"ENABLE_PATHWAYS_PERSISTENCE", "CHECKPOINT_ASYNC", "CKPT_D2H_CONCURRENT_GB"}) {
      if (env(checkpoint_env)) {
        note(fmt::format("{}: checkpoint settings are not passed (the compile saves nothing)",
                         checkpoint_env));
      }
    }
  }

  static std::optional<bool> parse_env_bool(std::string_view text) {
    std::string lowered(text);
    for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lowered == "1" || lowered == "true" || lowered == "yes") return true;
    if (lowered == "0" || lowered == "false" || lowered == "no") return false;
    return std::nullopt;
  }

  void compare_with_orchestrator(std::string_view flag, long long trainer, long long fallback) {
    long long orch = orch_->integer(flag, fallback);
    if (orch_->has(flag) && orch != trainer) {
      note(fmt::format(
          "the trainer has --{}={} but the orchestrator --{}={}; the compile follows the trainer",
          flag, trainer, flag, orch));
    }
  }

  void add_extra_flags() {
    const k8s::shell::Assignment* extra = env("MAXTEXT_EXTRA_FLAGS");
    if (!extra) return;
    if (extra->expands) {
      note("MAXTEXT_EXTRA_FLAGS contains a shell expansion; its items are passed as written");
    }
    k8s::FlagList items(k8s::FlagStyle::kKeyValue, {});
    try {
      items = k8s::FlagList::parse(extra->value, k8s::FlagStyle::kKeyValue);
    } catch (const Error& e) {
      fail("MAXTEXT_EXTRA_FLAGS: {}", e.message());
    }
    for (const std::string& item : items.items()) {
      std::size_t eq = item.find('=');
      key(item.substr(0, eq), item.substr(eq + 1), "MAXTEXT_EXTRA_FLAGS");
    }
  }

  // The GRPOConfig options run_deepswe_dist's _build_algo passes: always those older GRPOConfig
  // versions have too (with the orchestrator's defaults, which differ from GRPOConfig's: beta is
  // 0.0 there), the others only when the orchestrator argv gives them.
  std::string grpo_config() {
    const Args& o = *orch_;
    std::vector<std::pair<std::string, std::string>> entries;
    auto number = [&](std::string_view flag, std::string fallback) {
      std::string value = o.text_or(flag, std::move(fallback));
      check_number(value, "orchestrator --" + std::string(flag));
      entries.emplace_back(std::string(flag), value);
    };
    auto optional_number = [&](std::string_view flag) {
      if (o.has(flag)) number(flag, "");
    };
    auto string = [&](std::string_view flag, std::optional<std::string> fallback) {
      auto value = o.text(flag);
      if (!value) value = fallback;
      if (value) entries.emplace_back(std::string(flag), yaml_single_quoted(*value));
    };
    auto boolean = [&](std::string_view flag, std::optional<bool> fallback) {
      if (!o.has(flag) && !fallback) return;
      entries.emplace_back(std::string(flag),
                           o.boolean(flag, fallback.value_or(false)) ? "true" : "false");
    };
    entries.emplace_back("num_generations", std::to_string(o.integer("num_generations", 2)));
    number("beta", "0.0");
    number("epsilon", "0.2");
    optional_number("epsilon_high");
    number("temperature", "1.0");
    string("loss_algo", std::nullopt);
    string("loss_agg_mode", "sequence-mean-token-mean");
    string("advantage_estimator", "grpo");
    boolean("use_rollout_logps", true);
    boolean("exact_token_continuity", std::nullopt);
    boolean("overlong_loss_masking", std::nullopt);
    optional_number("seq_logprob_error_threshold");
    string("truncated_importance_sampling_type", std::nullopt);
    optional_number("truncated_importance_sampling_ratio_min");
    optional_number("truncated_importance_sampling_ratio");
    if (auto buckets = o.text("sampler_is_length_buckets")) {
      std::string list = "[";
      std::size_t start = 0;
      bool first = true;
      while (start <= buckets->size()) {
        std::size_t comma = buckets->find(',', start);
        std::string part =
            buckets->substr(start, comma == std::string::npos ? comma : comma - start);
        if (!part.empty()) {
          list += (first ? "" : ", ") +
                  std::to_string(parse_integer(part, "orchestrator --sampler_is_length_buckets"));
          first = false;
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      entries.emplace_back("sampler_is_length_buckets", list + "]");
    }
    std::string out = "{";
    for (std::size_t i = 0; i < entries.size(); ++i)
      out += (i ? ", " : "") + entries[i].first + ": " + entries[i].second;
    return out + "}";
  }

  void add_compile_keys() {
    key("compile_topology", plan_.compile_topology, "trainer slice " + plan_.slice);
    key("compile_topology_num_slices", "1", "aot-check (one trainer slice)");
    key("compile_engine_loss", "grpo", "aot-check (Tunix's GRPO loss)");
    key("max_prefill_predict_length", std::to_string(plan_.max_prompt_length),
        "--max_prompt_length");
    plan_.grpo_config = grpo_config();
    key("compile_engine_grpo_config", plan_.grpo_config, "orchestrator argv");
    // compute_logps_chunk_size: the trainer argv, else where else the e2e passes it.
    std::string chunk_origin = "run_trainer_node default";
    if (const auto* v = env("COMPUTE_LOGPS_CHUNK_SIZE")) {
      plan_.logps_chunk = parse_integer(v->value, "COMPUTE_LOGPS_CHUNK_SIZE");
      chunk_origin = "COMPUTE_LOGPS_CHUNK_SIZE";
    }
    if (const auto* extra = env("MAXTEXT_EXTRA_FLAGS")) {
      k8s::FlagList items = k8s::FlagList::parse(extra->value, k8s::FlagStyle::kKeyValue);
      if (auto v = items.value("compute_logps_chunk_size")) {
        plan_.logps_chunk = parse_integer(*v, "MAXTEXT_EXTRA_FLAGS compute_logps_chunk_size");
        chunk_origin = "MAXTEXT_EXTRA_FLAGS";
      }
    }
    if (trainer_->has("compute_logps_chunk_size")) {
      plan_.logps_chunk = trainer_->integer("compute_logps_chunk_size", 0);
      chunk_origin = "--compute_logps_chunk_size";
    }
    if (plan_.logps_chunk < 0) fail("compute_logps_chunk_size={}: negative", plan_.logps_chunk);
    key("compile_engine_logps_chunk_size", std::to_string(plan_.logps_chunk), chunk_origin);
    if (plan_.max_seq_token_per_tpu > 0) {
      key("compile_engine_max_seq_token_per_tpu", std::to_string(plan_.max_seq_token_per_tpu),
          "--max_seq_token_per_tpu");
      plan_.max_segments_per_packed_row = orch_->integer("max_segments_per_packed_row", 0);
      if (plan_.max_segments_per_packed_row > 0) {
        key("compile_engine_max_segments_per_packed_row",
            std::to_string(plan_.max_segments_per_packed_row),
            "orchestrator --max_segments_per_packed_row");
      }
      long long orch_budget = orch_->integer("max_seq_token_per_tpu", plan_.max_seq_token_per_tpu);
      if (orch_budget != plan_.max_seq_token_per_tpu) {
        note(fmt::format(
            "the orchestrator packs rows of {} tokens but the trainer declares {}; the compile "
            "follows the trainer",
            orch_budget, plan_.max_seq_token_per_tpu));
      }
    }
    // libtpu flags: all of them in the compile's LIBTPU_INIT_ARGS; the XLA ones also as compile
    // options, which is how MaxText's compile tools apply flags to the programs they compile.
    std::vector<std::string> xla_flags, runtime_flags;
    if (const auto* libtpu = env("LIBTPU_INIT_ARGS")) {
      k8s::FlagList flags = k8s::FlagList::parse(libtpu->value, k8s::FlagStyle::kDashDash);
      for (const std::string& item : flags.items()) {
        (item.rfind("--xla_", 0) == 0 ? xla_flags : runtime_flags).push_back(item);
      }
    }
    if (!xla_flags.empty()) {
      std::string joined;
      for (const std::string& f : xla_flags) joined += (joined.empty() ? "" : " ") + f;
      key("compile_xla_flags", joined, "LIBTPU_INIT_ARGS (--xla_* flags)");
    }
    if (!runtime_flags.empty()) {
      note(fmt::format("{} libtpu flags that are not --xla_* stay in LIBTPU_INIT_ARGS only",
                       runtime_flags.size()));
    }
    for (const std::string& item : options_.compile_keys) {
      std::size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || item.find_first_of(" \t\n") < eq)
        fail("--compile-key {}: expected KEY=VALUE", item);
      key(item.substr(0, eq), item.substr(eq + 1), "--compile-key");
    }
    // The compile's environment: the trainer's, less the run's cache settings.
    for (const k8s::shell::Assignment& a : trainer_env_) {
      if (withheld_variable(a.name)) continue;
      if (a.expands) {
        note(fmt::format("{} is not passed: its value needs a shell expansion on the pod", a.name));
        continue;
      }
      auto same = std::find_if(plan_.env.begin(), plan_.env.end(),
                               [&](const auto& e) { return e.first == a.name; });
      if (same != plan_.env.end()) plan_.env.erase(same);  // bash keeps the last
      plan_.env.emplace_back(a.name, a.value);
    }
  }

  // The mesh must fill the slice: the product of the ICI axes (one may be -1, filled in) is the
  // number of devices, and with one slice no DCN axis may be larger than 1.
  void check_mesh() {
    std::vector<std::pair<std::string, long long>> axes;
    for (const AotKey& k : plan_.keys) {
      bool ici = k.key.rfind("ici_", 0) == 0;
      bool dcn = k.key.rfind("dcn_", 0) == 0;
      constexpr std::string_view kSuffix = "_parallelism";
      if ((!ici && !dcn) || k.key.size() <= 4 + kSuffix.size() ||
          k.key.compare(k.key.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
        continue;
      }
      long long value = parse_integer(k.value, k.key);
      if (dcn) {
        if (value != 1 && value != -1) {
          fail("{}={} ({}): the compile has one slice, so DCN axes must be 1", k.key, value,
               k.origin);
        }
        continue;
      }
      std::string axis = k.key.substr(4, k.key.size() - 4 - kSuffix.size());
      auto it =
          std::find_if(axes.begin(), axes.end(), [&](const auto& a) { return a.first == axis; });
      if (it != axes.end()) {
        it->second = value;
      } else {
        axes.emplace_back(axis, value);
      }
    }
    long long product = 1;
    std::string fill;
    std::string described;
    for (const auto& [axis, value] : axes) {
      if (value == -1) {
        if (!fill.empty())
          fail("ici_{}_parallelism and ici_{}_parallelism are both -1", fill, axis);
        fill = axis;
        continue;
      }
      if (value <= 0) fail("ici_{}_parallelism={}: must be positive or -1", axis, value);
      product *= value;
      if (value != 1)
        described += (described.empty() ? "" : " x ") + fmt::format("{} {}", axis, value);
    }
    if (described.empty()) described = "1";
    if (!fill.empty()) {
      if (plan_.devices % product != 0) {
        fail("the mesh {} does not divide the {} devices of {}", described, plan_.devices,
             plan_.slice);
      }
      for (auto& [axis, value] : axes) {
        if (axis == fill) value = plan_.devices / product;
      }
    } else if (product != plan_.devices) {
      fail("the mesh {} = {} devices does not fill the {} devices of {} ({} chips)", described,
           product, plan_.devices, plan_.slice, plan_.chips);
    }
    plan_.mesh = axes;
    long long rows = 1;
    for (const auto& [axis, value] : axes) {
      if (axis == "data" || axis == "fsdp" || axis == "fsdp_transpose" || axis == "expert")
        rows *= value;
    }
    plan_.packed_rows = plan_.max_seq_token_per_tpu > 0 ? rows : 0;
  }

  k8s::Document bench_;
  const AotOptions& options_;
  AotPlan plan_;
  std::vector<k8s::shell::Assignment> trainer_env_;
  std::unique_ptr<Args> trainer_, orch_;
};

std::string mesh_text(const AotPlan& plan) {
  std::string out;
  long long product = 1;
  for (const auto& [axis, value] : plan.mesh) {
    product *= value;
    if (value == 1) continue;
    out += (out.empty() ? "" : " x ") + fmt::format("{} {}", axis, value);
  }
  return fmt::format("{} = {} devices", out.empty() ? "1" : out, product);
}

}  // namespace

AotPlan plan_aot(const YAML::Node& bench, const AotOptions& options) {
  return Planner(bench, options).run();
}

std::string python_float(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, ec == std::errc() ? end : buffer);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // n: inf, nan
  return text;
}

std::string_view maxtext_probe_code() {
  return "import importlib.util as u, os, sys; "
         "e = u.find_spec(\"maxtext.training_engine.maxtext_engine_compile\"); "
         "c = u.find_spec(\"maxtext.configs\"); "
         "e and c or sys.exit(1); "
         "print(os.path.join(list(c.submodule_search_locations)[0], \"base.yml\"))";
}

std::string aot_log_path(std::chrono::system_clock::time_point now) {
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  return fmt::format("logs/aot-bench-{}.log", stamp);
}

std::string explain_aot_keys(const AotPlan& plan) {
  std::string out;
  for (const AotKey& k : plan.keys) out += fmt::format("{}={}  <- {}\n", k.key, k.value, k.origin);
  for (const auto& [name, value] : plan.env) out += fmt::format("env {}={}\n", name, value);
  return out;
}

std::string aot_script(const AotPlan& plan, const AotOptions& options) {
  std::string s = "#!/usr/bin/env bash\n";
  s += fmt::format(
      "# AOT memory check rendered by aot-check {} from {}: MaxText's trainer-engine compile of\n"
      "# the bench trainer {}, on abstract weights (no TPU needed: a CPU host with MaxText, Tunix\n"
      "# and libtpu installed).\n",
      comment_safe(options.tool_version), comment_safe(options.source), plan.bench_name);
  s += fmt::format("#   trainer slice  {}: compile_topology={}, {} chips, {} devices, 1 slice\n",
                   plan.slice, plan.compile_topology, plan.chips, plan.devices);
  s += fmt::format("#   mesh           {}\n", mesh_text(plan));
  s += fmt::format(
      "#   micro-batch    {} sequences (per_device_batch_size={}) of {} prompt + {} response "
      "tokens\n",
      plan.train_micro_batch_size, plan.per_device_batch_size, plan.max_prompt_length,
      plan.max_response_length);
  if (plan.max_seq_token_per_tpu > 0) {
    s += fmt::format("#   packing        {} rows of {} tokens per micro-batch", plan.packed_rows,
                     plan.max_seq_token_per_tpu);
    if (plan.max_segments_per_packed_row > 0)
      s += fmt::format(", at most {} segments each", plan.max_segments_per_packed_row);
    s += "\n";
  }
  s += plan.logps_chunk > 0
           ? fmt::format("#   log-probs      chunks of {} tokens\n", plan.logps_chunk)
           : "#   log-probs      not chunked (whole-sequence logits)\n";
  s += fmt::format("#   HBM            {} GiB per device ({})\n", plan.hbm_gib_per_device,
                   plan.chip);
  for (const std::string& n : plan.notes) s += "# note: " + comment_safe(n) + "\n";
  s += "set -uo pipefail\n\n";
  s += "PYTHON=" + k8s::shell::quote(options.python) + "\n";
  if (options.log) {
    s += "LOG=" + k8s::shell::quote(*options.log) + "\n";
  } else {
    s += "LOG=\"logs/aot-bench-$(date -u +%Y%m%dT%H%M%SZ).log\"\n";
  }
  std::string probe = k8s::shell::quote(maxtext_probe_code());
  std::string missing = fmt::format(
      "  echo \"aot-check: $PYTHON cannot import {} (run this where MaxText, Tunix and libtpu are "
      "installed, or set PYTHON)\" >&2\n  exit {}\n",
      kEngineCompileModule, kAotNoMaxText);
  if (options.base_config) {
    s += "if ! \"$PYTHON\" -c " + probe + " >/dev/null 2>&1; then\n" + missing + "fi\n";
    s += "BASE_CONFIG=" + k8s::shell::quote(*options.base_config) + "\n";
  } else {
    s += "if ! BASE_CONFIG=$(\"$PYTHON\" -c " + probe + " 2>/dev/null); then\n" + missing + "fi\n";
  }
  s += "mkdir -p -- \"$(dirname -- \"$LOG\")\" || exit 2\n";
  s +=
      fmt::format("echo \"aot-check: compiling for {}; log: $LOG\" >&2\n\n", plan.compile_topology);
  std::vector<std::string> lines;
  for (const auto& [name, value] : plan.env) lines.push_back(name + "=" + k8s::shell::quote(value));
  lines.push_back("\"$PYTHON\" -m " + std::string(kEngineCompileModule) + " \"$BASE_CONFIG\"");
  for (const AotKey& k : plan.keys) lines.push_back(k8s::shell::quote(k.key + "=" + k.value));
  for (std::size_t i = 0; i < lines.size(); ++i) {
    s += (i == 0 ? "" : "  ") + lines[i] + " \\\n";
  }
  s += "  2>&1 | tee -- \"$LOG\" >&2\n";
  s += "STATUS=${PIPESTATUS[0]}\n";
  s += fmt::format(
      "echo \"aot-check: the compile exited with status $STATUS; summarize it with: aot-summarize "
      "--chip {} $LOG\" >&2\n",
      plan.chip);
  s += "exit \"$STATUS\"\n";
  return s;
}

std::string aot_plan_json(const AotPlan& plan, const AotOptions& options) {
  std::string out = "{\n  \"schema\": \"rtb.aot-check/1\",\n";
  out += fmt::format("  \"bench\": {},\n", json::quote(plan.bench_name));
  out += fmt::format("  \"module\": {},\n", json::quote(kEngineCompileModule));
  out += fmt::format("  \"python\": {},\n", json::quote(options.python));
  out += fmt::format("  \"base_config\": {},\n",
                     options.base_config ? json::quote(*options.base_config) : "null");
  out += fmt::format("  \"log\": {},\n", options.log ? json::quote(*options.log) : "null");
  out += fmt::format("  \"slice\": {},\n", json::quote(plan.slice));
  out += fmt::format("  \"chip\": {},\n", json::quote(plan.chip));
  out += fmt::format("  \"compile_topology\": {},\n", json::quote(plan.compile_topology));
  out += fmt::format("  \"chips\": {},\n  \"devices\": {},\n", plan.chips, plan.devices);
  out += fmt::format("  \"hbm_gib_per_device\": {},\n", plan.hbm_gib_per_device);
  out += "  \"mesh\": {";
  for (std::size_t i = 0; i < plan.mesh.size(); ++i)
    out += fmt::format("{}{}: {}", i ? ", " : "", json::quote(plan.mesh[i].first),
                       plan.mesh[i].second);
  out += "},\n";
  out += fmt::format(
      "  \"micro_batch\": {{\"sequences\": {}, \"per_device_batch_size\": {}, "
      "\"max_prompt_length\": {}, \"max_response_length\": {}, \"packed_row_tokens\": {}, "
      "\"packed_rows\": {}, \"max_segments_per_packed_row\": {}}},\n",
      plan.train_micro_batch_size, json::quote(plan.per_device_batch_size), plan.max_prompt_length,
      plan.max_response_length, plan.max_seq_token_per_tpu, plan.packed_rows,
      plan.max_segments_per_packed_row);
  out += fmt::format("  \"logps_chunk_size\": {},\n", plan.logps_chunk);
  out += fmt::format("  \"grpo_config\": {},\n", json::quote(plan.grpo_config));
  out += "  \"env\": [";
  for (std::size_t i = 0; i < plan.env.size(); ++i) {
    out += fmt::format("{}\n    {{\"name\": {}, \"value\": {}}}", i ? "," : "",
                       json::quote(plan.env[i].first), json::quote(plan.env[i].second));
  }
  out += plan.env.empty() ? "],\n" : "\n  ],\n";
  out += "  \"keys\": [";
  for (std::size_t i = 0; i < plan.keys.size(); ++i) {
    const AotKey& k = plan.keys[i];
    out += fmt::format("{}\n    {{\"key\": {}, \"value\": {}, \"from\": {}}}", i ? "," : "",
                       json::quote(k.key), json::quote(k.value), json::quote(k.origin));
  }
  out += plan.keys.empty() ? "],\n" : "\n  ],\n";
  out += "  \"notes\": [";
  for (std::size_t i = 0; i < plan.notes.size(); ++i)
    out += fmt::format("{}{}", i ? ", " : "", json::quote(plan.notes[i]));
  out += "]\n}\n";
  return out;
}

int run_bash(const std::string& script) {
  std::vector<std::string> args{"bash", "-c", script, "aot-check"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "bash", nullptr, nullptr, argv.data(), environ);
  if (rc != 0) fail("cannot start bash: {}", std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail("waiting for bash: {}", std::strerror(errno));
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

int run_quiet(const std::vector<std::string>& command) {
  if (command.empty()) return 127;
  std::vector<std::string> args = command;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace rtb::bench
