// aot-summarize: the body is rtb::tool::aot_summarize_main in aot_summarize.cc.
#include "common/mains.h"

int main(int argc, char** argv) { return rtb::tool::aot_summarize_main(argc, argv); }
