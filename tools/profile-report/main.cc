// profile-report: the body is rtb::tool::profile_report_main in profile_report.cc.
#include "common/mains.h"

int main(int argc, char** argv) { return rtb::tool::profile_report_main(argc, argv); }
