// The body of every tool, `int <tool>_main(int argc, char** argv)`: what its tools/<tool>/main.cc
// runs, and what a test can run in-process. Each returns the tool's exit code.
#pragma once

namespace rtb::tool {

int aot_check_main(int argc, char** argv);
int aot_summarize_main(int argc, char** argv);
int bench_report_main(int argc, char** argv);
int check_payload_main(int argc, char** argv);
int diff_configs_main(int argc, char** argv);
int diff_renders_main(int argc, char** argv);
int hlo_overlap_main(int argc, char** argv);
int profile_report_main(int argc, char** argv);
int render_bench_main(int argc, char** argv);

}  // namespace rtb::tool
