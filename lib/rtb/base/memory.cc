#include "rtb/base/memory.h"

#include <sys/mman.h>

#include <new>

namespace rtb {

AnonymousMapping::AnonymousMapping(std::size_t bytes, PageAdvice advice) : bytes_(bytes) {
  if (bytes == 0) return;
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  if (advice == PageAdvice::kHugePages && bytes >= kHugePage / 2 &&
      bytes <= ~std::size_t{0} - kHugePage) {
    // A whole number of huge pages: the kernel then places the mapping on a huge-page boundary,
    // so all of it can be backed by them (a length that is not a multiple gets small pages).
    // From 1 MiB on, one huge page (a fault and a zeroing loop) costs less than 256 small ones.
    bytes_ = bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  }
  void* address =
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED) throw std::bad_alloc();
  data_ = address;
  // Advice is best effort: without it (older kernels) pages are faulted in as they are touched.
  switch (advice) {
    case PageAdvice::kNone:
      break;
    case PageAdvice::kPopulateWrite:
      if (bytes >= (std::size_t{1} << 26)) {
        // Huge pages first: populating 2 MiB pages takes one fault (and one zeroing loop) per 512
        // small pages, which is most of a fresh 160 MB array's first-touch time.
#if defined(MADV_HUGEPAGE)
        ::madvise(address, bytes, MADV_HUGEPAGE);
#endif
#if defined(MADV_POPULATE_WRITE)
        ::madvise(address, bytes, MADV_POPULATE_WRITE);
#endif
      }
      break;
    case PageAdvice::kHugePages:
#if defined(MADV_HUGEPAGE)
      if (bytes >= kHugePage) ::madvise(address, bytes, MADV_HUGEPAGE);
#endif
      break;
  }
}

AnonymousMapping::~AnonymousMapping() {
  if (data_ != nullptr) ::munmap(data_, bytes_);
}

}  // namespace rtb
