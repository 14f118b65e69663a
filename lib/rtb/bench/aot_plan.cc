// plan_aot: the compile's keys, environment and notes from a bench render (aot.h).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>

#include "rtb/base/error.h"
#include "rtb/base/slice.h"
#include "rtb/base/text.h"
#include "rtb/bench/aot.h"
#include "rtb/bench/aot_input.h"
#include "rtb/bench/trainer_config.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/shell.h"

namespace rtb::bench {
namespace {

// Environment variables of the trainer that the compile does not get: the run's persistent
// compilation cache (a workstation compile must not read or write it), the platform choice, and
// the checkpoint Tunix's trainer would load (kCheckpointEnv; the compile uses abstract weights).
bool withheld_variable(std::string_view name) {
  return name.rfind("JAX_COMPILATION_CACHE", 0) == 0 ||
         name.rfind("JAX_PERSISTENT_CACHE", 0) == 0 || name == "JAX_PLATFORMS" ||
         name == "MAXTEXT_EXTRA_FLAGS" || name == kCheckpointEnv;
}

std::string yaml_single_quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

class Planner {
 public:
  Planner(const YAML::Node& bench, const AotOptions& options)
      : bench_{bench, 0}, options_(options), client_(read_bench_client(bench)) {
    plan_.bench_name = client_.bench_name;
  }

  AotPlan run() {
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
  void note(std::string text) {
    plan_.diagnostics.push_back({Severity::kNote, "", std::move(text)});
  }

  const k8s::shell::Assignment* env(std::string_view name) const {
    const k8s::shell::Assignment* found = nullptr;
    for (const k8s::shell::Assignment& a : client_.trainer_env) {
      if (a.name == name) found = &a;
    }
    return found;
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

  // The keys Tunix's trainer passes (trainer_config.h's table, in build_maxtext_config's order) and
  // in their place what is aot-check's own: no checkpoint and no profiler, enable_checkpointing,
  // the batch keys, the compile's max_target_length, the KV heads the rollout replicates; with the
  // checks and notes on them.
  void add_trainer_keys() {
    const Args& t = client_.trainer;
    std::map<std::string, std::string> env_values;  // bash keeps the last assignment
    for (const k8s::shell::Assignment& a : client_.trainer_env) env_values[a.name] = a.value;
    const std::vector<TrainerKey> trainer = trainer_keys(t.items(), env_values);
    auto integer_key = [&](std::string_view name, long long fallback) {
      auto k = std::find_if(trainer.begin(), trainer.end(),
                            [&](const TrainerKey& tk) { return tk.key == name; });
      if (k == trainer.end()) return fallback;
      return parse_integer(k->value, "trainer argv " + k->origin);
    };
    // trainer_config.h decides what loads a checkpoint (render-bench --weights random drops the
    // same); the compile takes none of it.
    std::vector<std::string> checkpoint_flags;
    for (const std::string& item : t.items()) {
      std::string flag(k8s::flag_key(item, k8s::FlagStyle::kDashDash));
      if (is_checkpoint_flag(flag) && std::find(checkpoint_flags.begin(), checkpoint_flags.end(),
                                                flag) == checkpoint_flags.end()) {
        checkpoint_flags.push_back(flag);
        // An empty value loads nothing in the trainer either: nothing to say.
        if (loads_checkpoint(flag, t.text_or(flag, "")))
          note(fmt::format("--{} is not passed: the compile uses abstract weights", flag));
      }
    }

    long long micro = t.integer("train_micro_batch_size", 1);
    long long mini = t.integer("mini_batch_size", 1);
    long long fsdp = integer_key("ici_fsdp_parallelism", 1);
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
    // Tunix replicates KV heads up to the rollout's tensor parallelism (build_maxtext_config);
    // without --base_num_kv_heads it reads them from the model's YAML, which aot-check does not.
    long long rollout_tp = integer_key("rollout_tensor_parallelism", 0);
    long long kv_heads = integer_key("base_num_kv_heads", 0);
    if (kv_heads > 0 && rollout_tp > kv_heads) {
      if (rollout_tp % kv_heads != 0) {
        fail("--rollout_mesh_tp={} is not a multiple of --base_num_kv_heads={}", rollout_tp,
             kv_heads);
      }
      kv_heads = rollout_tp;
    }

    for (const TrainerKey& k : trainer) {
      // An option run_trainer_node does not declare, the checkpoint (abstract weights) and the
      // profiler (the compile runs none) do not reach the compile.
      if (!k.rule || k.rule->applies == KeyApplies::kProfiling || is_checkpoint_key(k.key))
        continue;
      // build_maxtext_config passes enable_checkpointing after the checkpoint keys.
      if (k.key == "scan_layers")
        key("enable_checkpointing", "False", "aot-check (the abstract engine never saves)");
      if (k.key == "max_target_length") {
        add_batch_keys(micro, mini, sequence);
        continue;
      }
      if (k.key == "base_num_kv_heads") {
        key(k.key, std::to_string(kv_heads), "--base_num_kv_heads, --rollout_mesh_tp");
        continue;
      }
      if (k.key == "learning_rate") check_number(k.value, "learning_rate");
      if (k.key == "warmup_steps_fraction") check_number(k.value, k.origin);
      key(k.key, k.value, k.origin);
    }

    if (integer_key("padded_base_moe_mlp_dim", 0) <= 0 && rollout_tp > 1) {
      note(fmt::format(
          "Tunix derives padded_base_moe_mlp_dim for --rollout_mesh_tp={} from the model's YAML, "
          "which aot-check does not read: pass --compile-key padded_base_moe_mlp_dim=D if the "
          "trainer pads",
          rollout_tp));
    }
    if (kv_heads == 0 && rollout_tp > 1) {
      note(
          "Tunix reads base_num_kv_heads from the model's YAML to replicate KV heads for the "
          "rollout's tensor parallelism; not reproduced (pass --base_num_kv_heads in the trainer "
          "argv)");
    }
    for (std::string_view checkpoint_env :
         {"ENABLE_PATHWAYS_PERSISTENCE", "CHECKPOINT_ASYNC", "CKPT_D2H_CONCURRENT_GB"}) {
      if (env(checkpoint_env)) {
        note(fmt::format("{}: checkpoint settings are not passed (the compile saves nothing)",
                         checkpoint_env));
      }
    }
  }

  // The batch keys where Tunix passes them (before max_target_length), and the compile's
  // max_target_length: it builds rollouts of max_prefill_predict_length prompt tokens and the rest
  // of max_target_length as completion, with the packed row width a key of its own
  // (add_compile_keys), so it takes prompt + response where the trainer declares its packed row.
  void add_batch_keys(long long micro, long long mini, long long sequence) {
    key("per_device_batch_size", plan_.per_device_batch_size,
        fmt::format("--train_micro_batch_size {} / {} devices", micro, plan_.devices));
    long long accumulation = std::max(1LL, (mini + micro - 1) / micro);
    key("gradient_accumulation_steps", std::to_string(accumulation),
        "ceil(--mini_batch_size / --train_micro_batch_size)");
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
  }

  void compare_with_orchestrator(std::string_view flag, long long trainer, long long fallback) {
    long long orch = client_.orchestrator.integer(flag, fallback);
    if (client_.orchestrator.has(flag) && orch != trainer) {
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
      if (is_checkpoint_key(item.substr(0, eq))) {
        if (loads_checkpoint(item.substr(0, eq),
                             eq == std::string::npos ? "" : item.substr(eq + 1))) {
          note(fmt::format(
              "MAXTEXT_EXTRA_FLAGS {} is not passed: the compile uses abstract weights", item));
        }
        continue;
      }
      key(item.substr(0, eq), item.substr(eq + 1), "MAXTEXT_EXTRA_FLAGS");
    }
  }

  // The GRPOConfig options run_deepswe_dist's _build_algo passes: always those older GRPOConfig
  // versions have too (with the orchestrator's defaults, which differ from GRPOConfig's: beta is
  // 0.0 there), the others only when the orchestrator argv gives them.
  std::string grpo_config() {
    const Args& o = client_.orchestrator;
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
    std::string chunk_origin = "aot-check default (the render sets no chunk)";
    plan_.logps_chunk = options_.default_logps_chunk;
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
    if (client_.trainer.has("compute_logps_chunk_size")) {
      plan_.logps_chunk = client_.trainer.integer("compute_logps_chunk_size", 0);
      chunk_origin = "--compute_logps_chunk_size";
    }
    if (plan_.logps_chunk < 0) fail("compute_logps_chunk_size={}: negative", plan_.logps_chunk);
    key("compile_engine_logps_chunk_size", std::to_string(plan_.logps_chunk), chunk_origin);
    if (plan_.max_seq_token_per_tpu > 0) {
      key("compile_engine_max_seq_token_per_tpu", std::to_string(plan_.max_seq_token_per_tpu),
          "--max_seq_token_per_tpu");
      plan_.max_segments_per_packed_row =
          client_.orchestrator.integer("max_segments_per_packed_row", 0);
      if (plan_.max_segments_per_packed_row > 0) {
        key("compile_engine_max_segments_per_packed_row",
            std::to_string(plan_.max_segments_per_packed_row),
            "orchestrator --max_segments_per_packed_row");
      }
      long long orch_budget =
          client_.orchestrator.integer("max_seq_token_per_tpu", plan_.max_seq_token_per_tpu);
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
    for (const k8s::shell::Assignment& a : client_.trainer_env) {
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
  BenchClient client_;
  AotPlan plan_;
};

}  // namespace

long long aot_logps_chunk_default(const char* env_value) {
  if (env_value == nullptr || *env_value == '\0') return kAotDefaultLogpsChunk;
  long long value = parse_integer(env_value, "AOT_LOGPS_CHUNK_SIZE");
  if (value < 0) fail("AOT_LOGPS_CHUNK_SIZE={}: negative", value);
  return value;
}

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

}  // namespace rtb::bench
