// libFuzzer target: the .npy/.npz reader (npy.h) over bytes in memory (MemorySource) and, for some
// inputs, through a file descriptor (FileSource on a memfd), plus the routed-experts measurement
// that reads arrays in blocks (routing_load.h). Only rtb::Error is an expected outcome.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/payload/load.h"
#include "rtb/payload/npy.h"

namespace {

void read_some_elements(const rtb::ByteSource& source, const rtb::payload::ArrayInfo& info) {
  const std::int64_t count = std::min<std::int64_t>(info.count, 16);
  std::vector<std::byte> raw(static_cast<std::size_t>(count) *
                             rtb::payload::dtype_size(info.dtype));
  rtb::payload::read_elements_raw(source, info, 0, count, info.dtype, raw);
  if (info.count > count) {
    rtb::payload::read_elements_raw(source, info, info.count - count, count, info.dtype, raw);
  }
  if (info.dtype == rtb::payload::DType::kInt16 || info.dtype == rtb::payload::DType::kInt32 ||
      info.dtype == rtb::payload::DType::kInt64) {
    std::vector<std::int64_t> values(static_cast<std::size_t>(count));
    rtb::payload::read_integers(source, info, 0, values);
  }
  (void)rtb::payload::format_shape(info.shape);
}

void read_source(const rtb::ByteSource& source) {
  std::vector<rtb::payload::ArrayInfo> arrays;
  try {
    arrays = rtb::payload::list_arrays(source);
  } catch (const rtb::Error&) {
    return;
  }
  for (const rtb::payload::ArrayInfo& info : arrays) {
    try {
      read_some_elements(source, info);
    } catch (const rtb::Error&) {
    }
  }
  try {
    rtb::payload::MeasureOptions options;
    options.experts = 64;
    options.ep = 4;
    (void)rtb::payload::measure_routing(source, options);
  } catch (const rtb::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  read_source(rtb::MemorySource(bytes, "<fuzz>"));

  if (size % 4 == 0) {  // the pread path, on a memfd
    int fd = memfd_create("npy_fuzz", MFD_CLOEXEC);
    if (fd < 0) return 0;
    if (size == 0 || write(fd, data, size) == static_cast<ssize_t>(size)) {
      std::string path = "/proc/self/fd/" + std::to_string(fd);
      try {
        read_source(rtb::FileSource(path, rtb::FileAccess::kRandom));
      } catch (const rtb::Error&) {
      }
    }
    close(fd);
  }
  return 0;
}
