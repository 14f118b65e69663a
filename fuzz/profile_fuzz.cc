// libFuzzer target: the XSpace reader (profile/xspace.h), every plane, line, event and stat of
// the input taken as an XSpace file, then the summary over it (profile/summary.h); only
// rtb::Error may come out.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/profile/summary.h"
#include "rtb/profile/xspace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    std::vector<std::unique_ptr<rtb::profile::XSpaceFile>> files;
    files.push_back(std::make_unique<rtb::profile::XSpaceFile>(bytes, "<fuzz>"));
    rtb::profile::Capture capture(std::move(files));
    const auto& file = *capture.files()[0];
    for (const auto& plane : file.planes()) {
      for (const auto& line : plane.lines) {
        auto cursor = capture.events(file, line);
        rtb::profile::Event event;
        while (cursor.next(event)) {
          rtb::profile::for_each_stat(file.bytes(), event.stats,
                                      [&](const auto& stat) { (void)plane.stat_string(stat); });
        }
      }
    }
  } catch (const rtb::Error&) {
  }
  return 0;
}
