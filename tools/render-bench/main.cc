// render-bench: the body is rtb::tool::render_bench_main in render_bench.cc.
#include "common/mains.h"

int main(int argc, char** argv) { return rtb::tool::render_bench_main(argc, argv); }
