// libFuzzer target: the shell-word tokenizer (shell.h). Properties:
// - any input that splits: quoting each word's value and joining with spaces splits back into the
//   same values (none of them marked `expands`);
// - any byte string without NUL, quoted, splits back into exactly that one word;
// - parse_command agrees with split on the words it returns.
// Only rtb::Error is an expected outcome; a property violation traps.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/k8s/shell.h"

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "shell_fuzz: property violated: %s\n", what);
  __builtin_trap();
}

void check_round_trip(const std::vector<std::string>& values) {
  std::string joined;
  try {
    joined = rtb::k8s::shell::join(values);
  } catch (const rtb::Error&) {
    return;  // a NUL byte: no shell word can hold it
  }
  std::vector<rtb::k8s::shell::Word> again;
  try {
    again = rtb::k8s::shell::split(joined);
  } catch (const rtb::Error& e) {
    std::fprintf(stderr, "split of quoted words failed: %s\n", e.what());
    violated("quoted words do not split");
  }
  if (again.size() != values.size()) violated("quoted words split into a different count");
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (again[i].value != values[i]) violated("quoted word splits to a different value");
    if (again[i].expands) violated("quoted word is marked as expanding");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  // The whole input as one value.
  if (text.find('\0') == std::string_view::npos) {
    check_round_trip({std::string(text)});
  }

  std::vector<rtb::k8s::shell::Word> words;
  try {
    words = rtb::k8s::shell::split(text);
  } catch (const rtb::Error&) {
    return 0;
  }
  std::vector<std::string> values;
  for (const rtb::k8s::shell::Word& word : words) {
    if (word.offset > text.size() || text.substr(word.offset, word.source.size()) != word.source) {
      violated("a word's source is not its text in the input");
    }
    values.push_back(word.value);
  }
  check_round_trip(values);

  rtb::k8s::shell::SimpleCommand command;
  try {
    command = rtb::k8s::shell::parse_command(text);
  } catch (const rtb::Error&) {
    return 0;  // a leading NAME+=value
  }
  if (command.env.size() + command.words.size() != words.size()) {
    violated("parse_command lost words");
  }
  for (std::size_t i = 0; i < command.words.size(); ++i) {
    if (command.words[i].value != words[command.env.size() + i].value) {
      violated("parse_command changed a word");
    }
  }
  return 0;
}
