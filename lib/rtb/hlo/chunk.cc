#include "rtb/hlo/chunk.h"

namespace rtb::hlo {

namespace {

// The byte of each class, written out one by one (the reference the SIMD classifiers are tested
// against, so it does not use their case-folding trick).
struct ByteClass {
  char byte;
  std::uint64_t ChunkMasks::*mask;
};
constexpr ByteClass kByteClasses[] = {
    {'"', &ChunkMasks::quote}, {'\\', &ChunkMasks::backslash}, {'(', &ChunkMasks::open},
    {'[', &ChunkMasks::open},  {'{', &ChunkMasks::open},       {')', &ChunkMasks::close},
    {']', &ChunkMasks::close}, {'}', &ChunkMasks::close},      {'\n', &ChunkMasks::newline},
    {'\0', &ChunkMasks::zero},
};

}  // namespace

ChunkMasks classify_chunk_portable(const char* bytes) {
  ChunkMasks m;
  for (int i = 0; i < 64; ++i) {
    for (const ByteClass& byte_class : kByteClasses) {
      if (bytes[i] == byte_class.byte) m.*byte_class.mask |= std::uint64_t{1} << i;
    }
  }
  return m;
}

#if defined(__SSE2__)
ChunkMasks classify_chunk(const char* bytes) {
#if defined(RTB_HLO_HAVE_AVX2)
  static const bool avx2 = __builtin_cpu_supports("avx2");  // decided once, never changed
  if (avx2) return classify_chunk_avx2(bytes);
#endif
  return classify_chunk_sse2(bytes);
}
#else
ChunkMasks classify_chunk(const char* bytes) { return classify_chunk_portable(bytes); }
#endif

bool cpu_has_avx2() {
#if defined(RTB_HLO_HAVE_AVX2)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") &&
         __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
         __builtin_cpu_supports("pclmul");
#else
  return false;
#endif
}

}  // namespace rtb::hlo
