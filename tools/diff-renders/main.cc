// diff-renders: the body is rtb::tool::diff_renders_main in diff_renders.cc.
#include "common/mains.h"

int main(int argc, char** argv) { return rtb::tool::diff_renders_main(argc, argv); }
