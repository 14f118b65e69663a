// The render options the bench domain's tests start from: a name, a one-line driver and a fixed
// tool version, so that renders are small and do not change with the build.
#pragma once

#include "rtb/bench/render.h"

namespace rtb::bench::testing_util {

inline RenderOptions test_render_options() {
  RenderOptions o;
  o.name = "abtest-bench";
  o.driver_source = "print('driver')\n";
  o.tool_version = "test";
  return o;
}

}  // namespace rtb::bench::testing_util
