// A view of a JobSet document: replicated jobs, pod specs, containers (and initContainers), the
// client command and its startup block, and the JobSet's role in an RL run.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/shell.h"

namespace rtb::k8s {

enum class Role { kTrainer, kOrchestrator, kRollout, kUnknown };
std::string_view role_name(Role role);

// The `--process_main=` value that identifies each role (overridable by tool options).
struct RoleMains {
  std::string trainer = "tunix.experimental.examples.common.run_trainer_node.main";
  std::string orchestrator = "tunix.experimental.examples.deepswe_dist.run_deepswe_dist.main";
  std::string rollout = "tunix.experimental.examples.common.run_rollout_node.main";
};

// The startup block of a client script: the line(s) between a line `(` and a line `) & PID=$!`.
struct StartupBlock {
  std::size_t begin{};       // byte offset of the block's text in the script
  std::size_t end{};         // byte offset just past its text (at the `\n` before `) & PID=$!`)
  std::size_t first_line{};  // 0-based line in the script of the block's first line
};

// Finds the startup block. Throws rtb::Error (no file/line) when there is none or it is not closed.
StartupBlock find_startup_block(std::string_view script);

// A container of one of the JobSet's pod templates.
struct ContainerRef {
  std::string job;    // replicated job name
  bool init = false;  // listed under initContainers
  YAML::Node node;    // the container mapping (a reference into the document)

  ContainerRef() = default;
  ContainerRef(std::string job_name, bool in_init, YAML::Node container)
      : job(std::move(job_name)), init(in_init), node(std::move(container)) {}
  ContainerRef(const ContainerRef&) = default;
  // Rebinds `node` (yaml-cpp's Node::operator= would overwrite the container it refers to).
  ContainerRef& operator=(const ContainerRef& other) {
    job = other.job;
    init = other.init;
    node.reset(other.node);
    return *this;
  }

  std::string name() const;
  // "spec.replicatedJobs[proc].template.spec.template.spec.containers[main]"
  std::string path() const;
};

// The client command `[bash, -c, SCRIPT, ARGUMENTS...]` of a container, with its parsed startup
// block.
struct ClientCommand {
  ContainerRef container;
  YAML::Node script_node;  // command[2]
  std::string script;
  StartupBlock block;
  shell::SimpleCommand startup;
  std::size_t startup_line{};  // 1-based input line of the startup block's first line

  ClientCommand() = default;
  ClientCommand(const ClientCommand&) = default;
  // Rebinds the nodes instead of overwriting what they refer to (see ContainerRef).
  ClientCommand& operator=(const ClientCommand& other) {
    container = other.container;
    script_node.reset(other.script_node);
    script = other.script;
    block = other.block;
    startup = other.startup;
    startup_line = other.startup_line;
    return *this;
  }
};

// A variable the client script exports outside its startup block (`export NAME=value` or
// `export NAME`, before or after it), with the 1-based input line: what the e2e wrapper gives
// the program besides the startup block's own assignments.
struct WrapperExport {
  std::string name;
  std::size_t line{};
};
std::vector<WrapperExport> wrapper_exports(const ClientCommand& client);

class JobSetView {
 public:
  explicit JobSetView(const Document& doc) : doc_(&doc) {}

  const Document& document() const { return *doc_; }
  std::string name() const;
  std::vector<std::string> job_names() const;
  // replicatedJobs[job].template.spec.template.spec, or an undefined node.
  YAML::Node pod_spec(std::string_view job) const;
  // Containers and initContainers of every replicated job, in document order.
  std::vector<ContainerRef> containers() const;
  std::optional<ContainerRef> container(std::string_view name) const;
  // The `--process_main=` value of the first container whose bash -c script names one, with
  // that container; nullopt when none does.
  std::optional<std::pair<std::string, ContainerRef>> process_main() const;
  // The client command with its startup block parsed. Throws rtb::Error with file and line when
  // the JobSet has no client, no startup block, or a startup block bash could not read.
  ClientCommand client(const std::string& source) const;

 private:
  const Document* doc_;
};

bool is_jobset(const Document& doc);
// The role the first --process_main of the JobSet's scripts names; for a bench render (whose
// client runs the bench driver, so its script first names --process_main in the driver's text)
// the role that the --process_main in its client's TRAINER_ARGV names.
Role role_of(const JobSetView& jobset, const RoleMains& mains);

struct Roles {
  const Document* trainer = nullptr;
  const Document* orchestrator = nullptr;  // may be absent
  std::vector<const Document*> rollouts;
};

// A DRY_RUN chunk filter (dryrun.h) that keeps the chunks naming the trainer's or the
// orchestrator's --process_main, and chunks that name none (so that errors about them are still
// reported). Rollout chunks are not parsed.
ChunkFilter trainer_and_orchestrator_chunks(const RoleMains& mains);
// trainer_and_orchestrator_chunks, plus the rollout chunks a bench render reads a setting from:
// those that contain one of `rollout_words`, and of those with the same text around every
// occurrence (from it to the end of the next line), only the first, so that a DRY_RUN of many
// copies of one rollout JobSet parses one. The filter remembers what it kept: one per parse.
ChunkFilter render_chunks(const RoleMains& mains, std::vector<std::string> rollout_words);

struct RoleSelection {
  // An input whose only JobSet has no known role (a bench rendered with other --process_main
  // values, a JobSet file of one trainer) gives that JobSet as the trainer.
  bool lone_jobset_is_trainer = false;
};

// Picks the JobSets of each role (role_of). Throws rtb::Error naming what was found when there is
// no trainer or more than one (or more than one orchestrator), and what the input holds instead
// when it has no JobSet.
Roles select_roles(const DryRun& dryrun, const RoleMains& mains, RoleSelection selection = {});

// The script of a container's command `[bash, -c, SCRIPT, ARGUMENTS...]` (the arguments are the
// script's $0, $1, ...; render-bench packs a large driver there), or nullopt when it is not of
// that form.
std::optional<YAML::Node> bash_script_node(const YAML::Node& container);
// The rule bash_script_node applies to a command's first two words (the command has at least
// three, all scalars): a shell (`bash`, `/bin/bash`, `sh`, `/bin/sh`) and `-c`.
bool runs_shell_script(std::string_view shell, std::string_view flag);

}  // namespace rtb::k8s
