// hlo-overlap: the body is rtb::tool::hlo_overlap_main in hlo_overlap.cc.
#include "common/mains.h"

int main(int argc, char** argv) { return rtb::tool::hlo_overlap_main(argc, argv); }
