// diff-configs: the body is rtb::tool::diff_configs_main in diff_configs.cc.
#include "common/mains.h"

int main(int argc, char** argv) { return rtb::tool::diff_configs_main(argc, argv); }
