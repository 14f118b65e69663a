// The render options the bench domain's tests start from: a name, a one-line driver and a fixed
// tool version, so that renders are small and do not change with the build.
#pragma once

#include <string_view>

#include "rtb/bench/render.h"

namespace rtb::bench::testing_util {

// The trainer client's path in the fixtures' JobSets, as changes and differences name it.
inline constexpr std::string_view kClient =
    "spec.replicatedJobs[proc].template.spec.template.spec.containers[main]";

inline RenderOptions test_render_options() {
  RenderOptions o;
  o.name = "abtest-bench";
  o.driver_source = "print('driver')\n";
  o.tool_version = "test";
  return o;
}

}  // namespace rtb::bench::testing_util
