// render-bench: the preflight Job (render_steps.h).

#include "rtb/base/error.h"
#include "rtb/bench/render_steps.h"
#include "rtb/k8s/yaml.h"

namespace rtb::bench {
namespace render_steps {

YAML::Node Renderer::preflight_job(PreflightChecks checks) const {
  bool numerics = checks == PreflightChecks::kNumerics;
  std::string name = options_.name + std::string(numerics ? kNumericsSuffix : kPreflightSuffix);
  validate_dns_label(Knob::kName, name, true);
  k8s::JobSetView view(bench_);
  YAML::Node image = k8s::yaml::lookup(client_.container.node, "image");
  if (!image.IsDefined() || !image.IsScalar() || image.Scalar().empty()) {
    fail("the trainer's client container has no image: give --image for the preflight");
  }
  // JAX_PLATFORMS=cpu after the trainer's own assignments, which may name a TPU platform.
  std::vector<std::string> driver_argv = {"python3", std::string(kDriverPath), "--preflight"};
  if (numerics) driver_argv.push_back("--numerics");
  DriverLaunch launch{numerics ? "bench numerics preflight" : "bench preflight",
                      numerics ? "the bench driver's --preflight --numerics checks on CPU, with "
                                 "the bench's settings"
                               : "the bench driver's --preflight checks on CPU, with the bench's "
                                 "settings",
                      trainer_env_words_, driver_argv};
  launch.assignments.push_back("JAX_PLATFORMS=cpu");
  launch.assignments.insert(launch.assignments.end(), driver_setting_words_.begin(),
                            driver_setting_words_.end());
  ScriptCommand script =
      driver_script(launch, options_.driver_source, options_.driver_packed, options_.tool_version);

  YAML::Node labels(YAML::NodeType::Map);
  labels["rl-trainer-bench/bench"] = k8s::yaml::string_scalar(options_.name);
  labels["rl-trainer-bench/role"] = "preflight";

  YAML::Node container(YAML::NodeType::Map);
  container["name"] = "preflight";
  container["image"] = k8s::yaml::string_scalar(image.Scalar());
  if (auto policy = k8s::yaml::scalar_at(client_.container.node, "imagePullPolicy")) {
    container["imagePullPolicy"] = k8s::yaml::string_scalar(*policy);
  }
  YAML::Node command(YAML::NodeType::Sequence);
  command.push_back("bash");
  command.push_back("-c");
  command.push_back("");
  container["command"] = command;
  set_script_command(container, script);
  // The client's env list with JAX_PLATFORMS=cpu in place of its platform (proxy,cpu on Pathways).
  auto cpu_platform = [] {
    YAML::Node entry(YAML::NodeType::Map);
    entry["name"] = "JAX_PLATFORMS";
    entry["value"] = k8s::yaml::string_scalar("cpu");
    return entry;
  };
  YAML::Node env(YAML::NodeType::Sequence);
  bool platform_set = false;
  YAML::Node client_env = k8s::yaml::lookup(client_.container.node, "env");
  if (client_env.IsSequence()) {
    for (const YAML::Node& item : client_env) {
      if (k8s::yaml::scalar_at(item, "name") != std::string("JAX_PLATFORMS")) {
        env.push_back(YAML::Clone(item));
      } else if (!platform_set) {
        env.push_back(cpu_platform());
        platform_set = true;
      }
    }
  }
  if (!platform_set) env.push_back(cpu_platform());
  container["env"] = env;
  // Enough to import Tunix and MaxText and build a small payload; no accelerator. The numerics
  // check also builds a miniature trainer whose embedding keeps the e2e vocabulary, with its
  // optimizer state, in float32.
  YAML::Node requests(YAML::NodeType::Map);
  requests["cpu"] = k8s::yaml::string_scalar("2");
  requests["memory"] = numerics ? "16Gi" : "8Gi";
  container["resources"]["requests"] = requests;

  YAML::Node pod_spec(YAML::NodeType::Map);
  pod_spec["restartPolicy"] = "Never";
  YAML::Node trainer_pod = view.pod_spec(client_.container.job);
  if (auto account = k8s::yaml::scalar_at(trainer_pod, "serviceAccountName")) {
    pod_spec["serviceAccountName"] = k8s::yaml::string_scalar(*account);
  }
  // The same image, so the same credentials to pull it.
  YAML::Node pull_secrets = k8s::yaml::lookup(trainer_pod, "imagePullSecrets");
  if (pull_secrets.IsDefined() && !pull_secrets.IsNull()) {
    pod_spec["imagePullSecrets"] = YAML::Clone(pull_secrets);
  }
  YAML::Node containers(YAML::NodeType::Sequence);
  containers.push_back(container);
  pod_spec["containers"] = containers;

  YAML::Node job(YAML::NodeType::Map);
  job["apiVersion"] = "batch/v1";
  job["kind"] = "Job";
  job["metadata"]["name"] = k8s::yaml::string_scalar(name);
  if (auto ns = k8s::yaml::scalar_at(k8s::yaml::lookup(bench_.root, "metadata"), "namespace")) {
    job["metadata"]["namespace"] = k8s::yaml::string_scalar(*ns);
  }
  job["metadata"]["labels"] = labels;
  job["spec"]["backoffLimit"] = 0;
  job["spec"]["template"]["metadata"]["labels"] = YAML::Clone(labels);
  job["spec"]["template"]["spec"] = pod_spec;
  return job;
}

}  // namespace render_steps

}  // namespace rtb::bench
