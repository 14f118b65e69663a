// libFuzzer target: the DRY_RUN splitter (dryrun.h), the JobSet model (jobset.h), the MaxText
// settings of a render (config_diff.h) and render-bench's core with default knobs (render.h).
// Only rtb::Error is an expected outcome; any other exception or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rtb/base/error.h"
#include "rtb/bench/config_diff.h"
#include "rtb/bench/render.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/jobset.h"

namespace {

void walk_jobset(const rtb::k8s::Document& doc, const rtb::k8s::RoleMains& mains) {
  if (!rtb::k8s::is_jobset(doc)) return;
  rtb::k8s::JobSetView view(doc);
  (void)view.name();
  for (const std::string& job : view.job_names()) (void)view.pod_spec(job);
  for (const rtb::k8s::ContainerRef& container : view.containers()) {
    (void)container.name();
    (void)container.path();
    (void)rtb::k8s::bash_script_node(container.node);
  }
  (void)view.process_main();
  (void)rtb::k8s::role_of(view, mains);
  try {
    rtb::k8s::ClientCommand client = view.client("<fuzz>");
    (void)doc.input_line(client.startup_line);
  } catch (const rtb::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  rtb::k8s::RoleMains mains;
  try {
    // The filtered parse that render-bench uses must not differ in what it reports as an error.
    (void)rtb::k8s::parse_dryrun(text, "<fuzz>", rtb::k8s::trainer_and_orchestrator_chunks(mains));
  } catch (const rtb::Error&) {
  }
  rtb::k8s::DryRun dryrun;
  try {
    dryrun = rtb::k8s::parse_dryrun(text, "<fuzz>");
  } catch (const rtb::Error&) {
    return 0;
  }
  for (const rtb::k8s::Document& doc : dryrun.documents) {
    (void)doc.line_of(doc.root);
    walk_jobset(doc, mains);
  }
  try {
    (void)rtb::k8s::select_roles(dryrun, mains);
  } catch (const rtb::Error&) {
  }
  try {
    (void)rtb::bench::config_from_render(dryrun, mains);
  } catch (const rtb::Error&) {
  }
  try {
    rtb::bench::RenderOptions options;
    options.name = "fuzz-bench";
    options.driver_source = "import sys\nsys.exit(0)\n";
    options.tool_version = "fuzz";
    rtb::bench::RenderResult result = rtb::bench::render_bench(dryrun, options);
    (void)rtb::bench::summarize_changes(result);
  } catch (const rtb::Error&) {
  }
  return 0;
}
