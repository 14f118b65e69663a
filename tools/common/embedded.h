// The data embedded into the tools at build time (CMakeLists.txt rtb_embed; the library's own,
// the default routing table, is declared in lib/rtb/payload/routing.cc).
#pragma once

#include <string_view>

namespace rtb::embedded {

std::string_view bench_driver();  // tools/render-bench/driver/bench_driver.py
std::string_view
bench_driver_packed();           // the same, gzip + base64 (76-column lines), from the build
std::string_view demo_dryrun();  // testdata/launch_dryrun.txt, for --demo

}  // namespace rtb::embedded
