#include "rtb/hlo/chunk.h"

namespace rtb::hlo {

ChunkMasks classify_chunk_portable(const char* bytes) {
  ChunkMasks m;
  for (int i = 0; i < 64; ++i) {
    std::uint64_t bit = std::uint64_t{1} << i;
    switch (bytes[i]) {
      case '"':
        m.quote |= bit;
        break;
      case '\\':
        m.backslash |= bit;
        break;
      case '(':
      case '[':
      case '{':
        m.open |= bit;
        break;
      case ')':
      case ']':
      case '}':
        m.close |= bit;
        break;
      case '\n':
        m.newline |= bit;
        break;
      case '\0':
        m.zero |= bit;
        break;
      default:
        break;
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
