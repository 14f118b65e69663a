// check-payload: the body is rtb::tool::check_payload_main in check_payload.cc.
#include "common/mains.h"

int main(int argc, char** argv) { return rtb::tool::check_payload_main(argc, argv); }
