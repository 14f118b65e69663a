#include "rtb/k8s/jobset.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <set>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"
#include "rtb/base/text.h"
#include "rtb/k8s/yaml.h"

namespace rtb::k8s {
namespace {

constexpr std::string_view kProcessMain = "--process_main=";

// The `--process_main=` value inside a script, found textually so that roles can be told apart
// without parsing every JobSet's startup line.
std::optional<std::string> find_process_main(std::string_view script) {
  std::size_t at = script.find(kProcessMain);
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t start = at + kProcessMain.size();
  std::size_t end = start;
  while (end < script.size() && script[end] != ' ' && script[end] != '\t' && script[end] != '\n' &&
         script[end] != '"' && script[end] != '\'' && script[end] != '\\') {
    ++end;
  }
  return std::string(script.substr(start, end - start));
}

}  // namespace

std::string_view role_name(Role role) {
  return enum_name<Role::kUnknown>(role, {"trainer", "orchestrator", "rollout", "unknown"});
}

StartupBlock find_startup_block(std::string_view script) {
  std::size_t pos = 0;
  std::size_t line = 0;
  std::optional<std::size_t> open_after;  // offset just after the `(` line
  std::size_t open_line = 0;
  while (pos <= script.size()) {
    std::size_t end = script.find('\n', pos);
    std::size_t stop = end == std::string_view::npos ? script.size() : end;
    std::string_view text = trim(script.substr(pos, stop - pos), kLineBlanks);
    if (!open_after && text == "(") {
      open_after = stop + 1;
      open_line = line + 1;
    } else if (open_after && text.rfind(")", 0) == 0 &&
               text.find("& PID=$!") != std::string_view::npos) {
      StartupBlock block;
      block.begin = std::min(*open_after, script.size());
      block.end = pos == 0 ? 0 : pos - 1;
      if (block.end < block.begin) block.end = block.begin;
      block.first_line = open_line;
      return block;
    }
    if (end == std::string_view::npos) break;
    pos = end + 1;
    ++line;
  }
  if (open_after)
    throw Error("the startup block opened by a line `(` is never closed by `) & PID=$!`");
  throw Error("no startup block (a line `(` ... a line `) & PID=$!`) in the client command");
}

std::string ContainerRef::name() const { return yaml::scalar_at(node, "name").value_or(""); }

std::string ContainerRef::path() const {
  return fmt::format("spec.replicatedJobs[{}].template.spec.template.spec.{}[{}]", job,
                     init ? "initContainers" : "containers", name());
}

std::optional<YAML::Node> bash_script_node(const YAML::Node& container) {
  YAML::Node command = yaml::lookup(container, "command");
  if (!command.IsDefined() || !command.IsSequence() || command.size() < 3) return std::nullopt;
  for (const YAML::Node& word : command) {
    if (!word.IsScalar()) return std::nullopt;
  }
  if (!runs_shell_script(command[0].Scalar(), command[1].Scalar())) return std::nullopt;
  return command[2];
}

bool runs_shell_script(std::string_view shell, std::string_view flag) {
  return (shell == "bash" || shell == "/bin/bash" || shell == "sh" || shell == "/bin/sh") &&
         flag == "-c";
}

std::string JobSetView::name() const {
  return yaml::scalar_at(yaml::lookup(doc_->root, "metadata"), "name").value_or("");
}

std::vector<std::string> JobSetView::job_names() const {
  std::vector<std::string> names;
  YAML::Node jobs = yaml::lookup(yaml::lookup(doc_->root, "spec"), "replicatedJobs");
  if (!jobs.IsSequence()) return names;
  for (const auto& job : jobs) names.push_back(yaml::scalar_at(job, "name").value_or(""));
  return names;
}

YAML::Node JobSetView::pod_spec(std::string_view job) const {
  YAML::Node jobs = yaml::lookup(yaml::lookup(doc_->root, "spec"), "replicatedJobs");
  if (jobs.IsSequence()) {
    for (const auto& candidate : jobs) {
      if (yaml::scalar_at(candidate, "name") == std::string(job)) {
        return yaml::descend(candidate, {"template", "spec", "template", "spec"});
      }
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

std::vector<ContainerRef> JobSetView::containers() const {
  std::vector<ContainerRef> out;
  for (const std::string& job : job_names()) {
    YAML::Node spec = pod_spec(job);
    if (!spec.IsMap()) continue;
    // Document order: initContainers may come before or after containers.
    for (const auto& kv : spec) {
      if (!kv.first.IsScalar() || !kv.second.IsSequence()) continue;
      bool init = kv.first.Scalar() == "initContainers";
      if (!init && kv.first.Scalar() != "containers") continue;
      for (const auto& container : kv.second) {
        if (container.IsMap()) out.push_back(ContainerRef{job, init, container});
      }
    }
  }
  return out;
}

std::optional<ContainerRef> JobSetView::container(std::string_view name) const {
  for (ContainerRef& ref : containers()) {
    if (ref.name() == name) return ref;
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, ContainerRef>> JobSetView::process_main() const {
  for (ContainerRef& ref : containers()) {
    std::optional<YAML::Node> script = bash_script_node(ref.node);
    if (!script) continue;
    // Look in the startup block first: text before it (a bench's embedded driver, comments)
    // may mention other --process_main values.
    std::string_view text = script->Scalar();
    try {
      StartupBlock block = find_startup_block(text);
      if (auto main = find_process_main(text.substr(block.begin, block.end - block.begin))) {
        return std::make_pair(*main, ref);
      }
    } catch (const Error&) {
      // No startup block: fall back to the whole script.
    }
    if (auto main = find_process_main(text)) return std::make_pair(*main, ref);
  }
  return std::nullopt;
}

std::vector<WrapperExport> wrapper_exports(const ClientCommand& client) {
  std::vector<WrapperExport> found;
  std::string_view script = client.script;
  // The script's first line in the input: the block's line less its line in the script.
  std::size_t first_line = client.startup_line - client.block.first_line;
  std::size_t offset = 0, line = 0;
  for (std::string_view text : split_lines(script)) {
    std::size_t begin = offset;
    offset += text.size() + 1;
    ++line;
    if (begin >= client.block.begin && begin < client.block.end) continue;
    std::string_view rest = trim(text);
    if (!rest.starts_with("export ")) continue;
    rest.remove_prefix(std::string_view("export ").size());
    // `export A=1 B='x y'` exports A and B.
    while (!(rest = trim_front(rest)).empty()) {
      std::size_t end = 0;
      while (end < rest.size() &&
             (std::isalnum(static_cast<unsigned char>(rest[end])) || rest[end] == '_'))
        ++end;
      if (end == 0 || std::isdigit(static_cast<unsigned char>(rest[0]))) break;  // not a name
      found.push_back({std::string(rest.substr(0, end)), first_line + line - 1});
      if (end < rest.size() && rest[end] == '=') {
        ++end;
        if (end < rest.size() && (rest[end] == '"' || rest[end] == '\'')) {
          std::size_t close = rest.find(rest[end], end + 1);
          end = close == std::string_view::npos ? rest.size() : close + 1;
        }
      }
      std::size_t blank = rest.find_first_of(" \t", end);
      if (blank == std::string_view::npos) break;
      rest.remove_prefix(blank);
    }
  }
  return found;
}

ClientCommand JobSetView::client(const std::string& source) const {
  auto found = process_main();
  if (!found) {
    fail_at(source, static_cast<std::int64_t>(doc_->first_line),
            "JobSet '{}' has no client container (a `bash -c` command naming --process_main=)",
            name());
  }
  ClientCommand client;
  client.container = found->second;
  client.script_node.reset(*bash_script_node(client.container.node));
  client.script = client.script_node.Scalar();
  // The literal block's content starts on the line after its `|` indicator.
  std::size_t script_line = doc_->line_of(client.script_node) + 1;
  try {
    client.block = find_startup_block(client.script);
  } catch (const Error& e) {
    fail_at(source, static_cast<std::int64_t>(script_line), "JobSet '{}', container '{}': {}",
            name(), client.container.name(), e.message());
  }
  client.startup_line = script_line + client.block.first_line;
  std::string_view block_text =
      std::string_view(client.script)
          .substr(client.block.begin, client.block.end - client.block.begin);
  try {
    client.startup = shell::parse_command(block_text);
  } catch (const shell::SyntaxError& e) {
    // Place the error in the input file: the block's line, and its column in the file, where the
    // literal block's indentation precedes the script's own text.
    std::string_view before = block_text.substr(0, e.offset());
    auto line_in_block = static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
    std::size_t line_start = before.rfind('\n');
    std::size_t begin = line_start == std::string_view::npos ? 0 : line_start + 1;
    std::size_t column = e.offset() - begin + 1;
    std::size_t file_line = client.startup_line + line_in_block;
    std::string_view script_line = block_text.substr(begin);
    script_line = script_line.substr(0, script_line.find('\n'));
    std::string_view input_line = doc_->input_line(file_line);
    if (!input_line.empty() && input_line.back() == '\r') input_line.remove_suffix(1);
    if (input_line.size() >= script_line.size() &&
        input_line.substr(input_line.size() - script_line.size()) == script_line) {
      column += input_line.size() - script_line.size();
    }
    fail_at(source, static_cast<std::int64_t>(file_line),
            "JobSet '{}', container '{}': startup command: {} at column {}", name(),
            client.container.name(), e.problem(), column);
  } catch (const Error& e) {
    fail_at(source, static_cast<std::int64_t>(client.startup_line),
            "JobSet '{}', container '{}': startup command: {}", name(), client.container.name(),
            e.message());
  }
  return client;
}

bool is_jobset(const Document& doc) {
  return yaml::scalar_at(doc.root, "kind") == std::string("JobSet");
}

namespace {

Role role_of_main(std::string_view main, const RoleMains& mains) {
  if (main == mains.trainer) return Role::kTrainer;
  if (main == mains.orchestrator) return Role::kOrchestrator;
  if (main == mains.rollout) return Role::kRollout;
  return Role::kUnknown;
}

// The role the --process_main in a bench client's TRAINER_ARGV names.
Role bench_client_role(const JobSetView& jobset, const RoleMains& mains) {
  try {
    ClientCommand client = jobset.client("");
    for (const shell::Assignment& assignment : client.startup.env) {
      if (assignment.name != "TRAINER_ARGV") continue;
      for (const shell::Word& word : shell::split(assignment.value)) {
        if (word.value.rfind(kProcessMain, 0) != 0) continue;
        Role role = role_of_main(std::string_view(word.value).substr(kProcessMain.size()), mains);
        if (role != Role::kUnknown) return role;
      }
    }
  } catch (const Error&) {
    // Not a readable client: the role stays unknown.
  }
  return Role::kUnknown;
}

}  // namespace

Role role_of(const JobSetView& jobset, const RoleMains& mains) {
  auto found = jobset.process_main();
  if (!found) return Role::kUnknown;
  Role role = role_of_main(found->first, mains);
  return role != Role::kUnknown ? role : bench_client_role(jobset, mains);
}

namespace {

// Whether `chunk` names `--process_main=<main>` (followed by its end, a blank or a quote).
bool names_main(std::string_view chunk, const std::string& main) {
  std::string needle = std::string(kProcessMain) + main;
  for (std::size_t at = chunk.find(needle); at != std::string_view::npos;
       at = chunk.find(needle, at + 1)) {
    std::size_t end = at + needle.size();
    if (end == chunk.size() ||
        std::string_view(" \t\n\r\"'\\").find(chunk[end]) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

ChunkFilter trainer_and_orchestrator_chunks(const RoleMains& mains) {
  return [mains](std::string_view chunk) {
    std::optional<std::string> main = find_process_main(chunk);
    if (!main) return true;
    // A chunk could hold several documents' worth of text only if a separator were missing; look
    // for each wanted role anywhere in it rather than trusting the first match.
    return names_main(chunk, mains.trainer) || names_main(chunk, mains.orchestrator);
  };
}

ChunkFilter render_chunks(const RoleMains& mains, std::vector<std::string> rollout_words) {
  auto seen = std::make_shared<std::set<std::string>>();
  ChunkFilter base = trainer_and_orchestrator_chunks(mains);
  return [mains, base, seen, words = std::move(rollout_words)](std::string_view chunk) {
    if (base(chunk)) return true;
    if (!names_main(chunk, mains.rollout)) return false;
    // The text around each word: from it to the end of the next line (an env list's value).
    std::string signature;
    for (const std::string& word : words) {
      for (std::size_t at = chunk.find(word); at != std::string_view::npos;
           at = chunk.find(word, at + 1)) {
        std::size_t end = chunk.find('\n', at);
        if (end != std::string_view::npos) end = chunk.find('\n', end + 1);
        signature += chunk.substr(at, end == std::string_view::npos ? end : end - at);
        signature += '\0';
      }
    }
    return !signature.empty() && seen->insert(signature).second;
  };
}

Roles select_roles(const DryRun& dryrun, const RoleMains& mains, RoleSelection selection) {
  Roles roles;
  std::vector<std::string> trainers, orchestrators, seen, others;
  const Document* lone_jobset = nullptr;
  for (const Document& doc : dryrun.documents) {
    if (!is_jobset(doc)) {
      if (auto kind = yaml::scalar_at(doc.root, "kind")) {
        others.push_back(
            fmt::format("{} '{}' (line {})", *kind,
                        yaml::scalar_at(yaml::lookup(doc.root, "metadata"), "name").value_or(""),
                        doc.first_line));
      }
      continue;
    }
    lone_jobset = seen.empty() ? &doc : nullptr;
    JobSetView view(doc);
    auto main = view.process_main();
    seen.push_back(fmt::format("{} (line {}, {})", view.name(), doc.first_line,
                               main ? "--process_main=" + main->first : "no --process_main"));
    switch (role_of(view, mains)) {
      case Role::kTrainer:
        trainers.push_back(fmt::format("{} (line {})", view.name(), doc.first_line));
        if (!roles.trainer) roles.trainer = &doc;
        break;
      case Role::kOrchestrator:
        orchestrators.push_back(fmt::format("{} (line {})", view.name(), doc.first_line));
        if (!roles.orchestrator) roles.orchestrator = &doc;
        break;
      case Role::kRollout:
        roles.rollouts.push_back(&doc);
        break;
      case Role::kUnknown:
        break;
    }
  }
  auto join = [](const std::vector<std::string>& items) {
    return items.empty() ? std::string("none") : fmt::format("{}", fmt::join(items, ", "));
  };
  if (trainers.empty() && selection.lone_jobset_is_trainer && lone_jobset && seen.size() == 1) {
    roles.trainer = lone_jobset;
    return roles;
  }
  if (trainers.empty() && seen.empty() && !others.empty()) {
    fail_at(dryrun.source, static_cast<std::int64_t>(dryrun.documents.front().first_line),
            "no trainer JobSet (--process_main={}): not a JobSet: the input holds {}",
            mains.trainer, join(others));
  }
  if (trainers.empty()) {
    fail_at(dryrun.source, 0, "no trainer JobSet (--process_main={}); JobSets found: {}",
            mains.trainer, join(seen));
  }
  if (trainers.size() > 1) {
    fail_at(dryrun.source, 0, "more than one trainer JobSet: {}", join(trainers));
  }
  if (orchestrators.size() > 1) {
    fail_at(dryrun.source, 0, "more than one orchestrator JobSet: {}", join(orchestrators));
  }
  return roles;
}

}  // namespace rtb::k8s
