// libFuzzer target: the config-log scanner (logs/configlog.h) and the value canonicalizer.
// Property: feeding a log in blocks of any size gives the same dumps and settings as feeding it
// whole. Only rtb::Error is an expected outcome.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "rtb/base/error.h"
#include "rtb/logs/configlog.h"

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "configlog_fuzz: property violated: %s\n", what);
  __builtin_trap();
}

bool same_dump(const rtb::logs::ConfigDumpInfo& a, const rtb::logs::ConfigDumpInfo& b) {
  return a.number == b.number && a.first_line == b.first_line && a.last_line == b.last_line &&
         a.params == b.params && a.first_key == b.first_key && a.last_key == b.last_key &&
         a.complete == b.complete && a.incomplete_reason == b.incomplete_reason;
}

bool same_log(const rtb::logs::ConfigLog& a, const rtb::logs::ConfigLog& b) {
  if (a.lines != b.lines || a.selected != b.selected || a.dumps.size() != b.dumps.size() ||
      a.params.size() != b.params.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.dumps.size(); ++i) {
    if (!same_dump(a.dumps[i], b.dumps[i])) return false;
  }
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    if (a.params[i].key != b.params[i].key || a.params[i].value != b.params[i].value ||
        a.params[i].line != b.params[i].line) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  rtb::logs::ConfigLogOptions options;
  if (size % 5 == 1) options.dump = 1 + size % 3;
  // finish() throws rtb::Error for a damaged log (a NUL byte in a value); then both ways of
  // feeding must throw the same error.
  rtb::logs::ConfigLog whole, blocks;
  std::string whole_error, blocks_error;
  rtb::logs::ConfigLogScanner whole_scanner(options);
  whole_scanner.feed(text);
  try {
    whole = whole_scanner.finish("<fuzz>");
  } catch (const rtb::Error& e) {
    whole_error = e.what();
  }
  rtb::logs::ConfigLogScanner block_scanner(options);
  const std::size_t block = 1 + size % 29;
  for (std::size_t at = 0; at < size; at += block) block_scanner.feed(text.substr(at, block));
  try {
    blocks = block_scanner.finish("<fuzz>");
  } catch (const rtb::Error& e) {
    blocks_error = e.what();
  }
  if (whole_error != blocks_error) violated("block-wise feeding fails differently");
  if (!same_log(whole, blocks)) violated("block-wise feeding differs from feeding the whole log");
  if (!whole_error.empty()) return 0;

  try {
    rtb::logs::require_selected_dump(whole, options);
  } catch (const rtb::Error&) {
  }
  for (const rtb::logs::ConfigSetting& setting : whole.params) {
    (void)rtb::logs::canonical_config_value(setting.value);
  }
  (void)rtb::logs::parse_config_param_line(text.substr(0, text.find('\n')));
  // The canonicalizer on arbitrary text: blanks around a value never matter.
  std::string_view head = text.substr(0, 4096);
  if (rtb::logs::canonical_config_value(head) !=
      rtb::logs::canonical_config_value(" " + std::string(head) + "\t")) {
    violated("canonical_config_value depends on blanks around the value");
  }
  return 0;
}
