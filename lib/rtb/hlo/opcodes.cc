#include "rtb/hlo/opcodes.h"

#include <algorithm>

namespace rtb::hlo {

namespace {

constexpr bool every_plain_opcode_found() {
  for (std::size_t i = 0; i < std::size(kPlainOpcodes); ++i) {
    if (plain_opcode_tag(kPlainOpcodes[i]) != i + 1) return false;
  }
  return plain_opcode_tag("fusion") == 0 && plain_opcode_tag("all-gather-start") == 0;
}
static_assert(every_plain_opcode_found());

}  // namespace

bool is_collective_kind(std::string_view kind) {
  static constexpr std::string_view kKinds[] = {"all-gather",
                                                "all-reduce",
                                                "reduce-scatter",
                                                "all-to-all",
                                                "ragged-all-to-all",
                                                "collective-permute",
                                                "collective-broadcast",
                                                "send",
                                                "recv"};
  return std::find(std::begin(kKinds), std::end(kKinds), kind) != std::end(kKinds);
}

Category category_of(std::string_view kind) {
  if (kind == "copy") return Category::kCopy;
  bool any = false;
  while (!kind.empty()) {
    std::size_t plus = kind.find('+');
    if (!is_collective_kind(kind.substr(0, plus))) return Category::kOther;
    any = true;
    if (plus == std::string_view::npos) break;
    kind.remove_prefix(plus + 1);
  }
  return any ? Category::kCollective : Category::kOther;
}

std::string_view sugar_kind(std::string_view opcode) {
  if (opcode == "send" || opcode == "recv") return opcode;
  if (opcode == "send-done") return "send";
  if (opcode == "recv-done") return "recv";
  for (std::string_view suffix : {"-start", "-done", "-update"}) {
    if (ends_with(opcode, suffix) && opcode.size() > suffix.size()) {
      return opcode.substr(0, opcode.size() - suffix.size());
    }
  }
  return opcode.empty() ? std::string_view("async") : opcode;
}

}  // namespace rtb::hlo
