// aot-check: the body is rtb::tool::aot_check_main in aot_check.cc.
#include "common/mains.h"

int main(int argc, char** argv) { return rtb::tool::aot_check_main(argc, argv); }
