// bench-report: the body is rtb::tool::bench_report_main in bench_report.cc.
#include "common/mains.h"

int main(int argc, char** argv) { return rtb::tool::bench_report_main(argc, argv); }
