// The per-byte layer of the HLO splitter: character classes of 64 bytes at a time, one bit per
// byte (SSE2 and AVX2 where available, the same rules in portable C++), and the prefix XOR that
// turns quote bits into "inside a string" bits. The SIMD variants are inline here so that the
// splitter's scan loop (splitter.h) compiles them into its body.
#pragma once

#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <immintrin.h>
#endif

namespace rtb::hlo {

// Raw character classes of 64 bytes, one bit per byte (bit i = byte i).
struct ChunkMasks {
  std::uint64_t quote = 0;      // "
  std::uint64_t backslash = 0;  // backslash
  std::uint64_t open = 0;       // ( [ {
  std::uint64_t close = 0;      // ) ] }
  std::uint64_t newline = 0;    // \n
  std::uint64_t zero = 0;       // NUL bytes (binary input)
  bool operator==(const ChunkMasks&) const = default;
};

// Classifies 64 bytes starting at `bytes`. The portable and the SIMD version must agree; the
// dispatching one picks the fastest available.
ChunkMasks classify_chunk_portable(const char* bytes);
ChunkMasks classify_chunk(const char* bytes);

// Inclusive prefix XOR: bit i of the result is the XOR of bits 0..i of `bits`.
inline std::uint64_t prefix_xor(std::uint64_t bits) {
  bits ^= bits << 1;
  bits ^= bits << 2;
  bits ^= bits << 4;
  bits ^= bits << 8;
  bits ^= bits << 16;
  bits ^= bits << 32;
  return bits;
}

// Whether this CPU runs the AVX2 variant of the scan loop (AVX2, POPCNT, BMI, BMI2, PCLMUL).
bool cpu_has_avx2();

#if defined(__SSE2__)
// One body for every vector width. `Lanes` holds kBytes bytes of the chunk in a vector register
// and answers with one bit per byte: equal(c) where the byte is c, equal_or_folded(c, f) where it
// is c or its 0x20 bit set makes it f ('[' | 0x20 == '{' and ']' | 0x20 == '}', and no other
// byte maps there: one compare each). Vectors never cross a call, so Lanes' members can carry
// their instruction set's target: its caller compiles the body for that target
// (classify_chunk_avx2 flattens everything into itself).
template <typename Lanes>
[[gnu::always_inline]] inline ChunkMasks classify_chunk_with(const char* bytes) {
  ChunkMasks m;
  for (int part = 0; part < 64 / Lanes::kBytes; ++part) {
    const Lanes lanes(bytes + part * Lanes::kBytes);
    const int shift = part * Lanes::kBytes;
    m.quote |= lanes.equal('"') << shift;
    m.backslash |= lanes.equal('\\') << shift;
    m.open |= lanes.equal_or_folded('(', '{') << shift;
    m.close |= lanes.equal_or_folded(')', '}') << shift;
    m.newline |= lanes.equal('\n') << shift;
    m.zero |= lanes.equal('\0') << shift;
  }
  return m;
}

class Sse2Lanes {
 public:
  static constexpr int kBytes = 16;
  explicit Sse2Lanes(const char* at)
      : bytes_(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at))) {}
  std::uint64_t equal(char c) const { return bits(_mm_cmpeq_epi8(bytes_, _mm_set1_epi8(c))); }
  std::uint64_t equal_or_folded(char c, char f) const {
    __m128i folded = _mm_or_si128(bytes_, _mm_set1_epi8(0x20));
    return bits(_mm_or_si128(_mm_cmpeq_epi8(bytes_, _mm_set1_epi8(c)),
                             _mm_cmpeq_epi8(folded, _mm_set1_epi8(f))));
  }

 private:
  static std::uint64_t bits(__m128i eq) {
    return static_cast<std::uint16_t>(_mm_movemask_epi8(eq));
  }
  __m128i bytes_;
};

inline ChunkMasks classify_chunk_sse2(const char* bytes) {
  return classify_chunk_with<Sse2Lanes>(bytes);
}

#if defined(__GNUC__) && defined(__x86_64__)
#define RTB_HLO_HAVE_AVX2 1
#define RTB_HLO_AVX2 __attribute__((target("avx2")))
class Avx2Lanes {
 public:
  static constexpr int kBytes = 32;
  RTB_HLO_AVX2 explicit Avx2Lanes(const char* at)
      : bytes_(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at))) {}
  RTB_HLO_AVX2 std::uint64_t equal(char c) const {
    return bits(_mm256_cmpeq_epi8(bytes_, _mm256_set1_epi8(c)));
  }
  RTB_HLO_AVX2 std::uint64_t equal_or_folded(char c, char f) const {
    __m256i folded = _mm256_or_si256(bytes_, _mm256_set1_epi8(0x20));
    return bits(_mm256_or_si256(_mm256_cmpeq_epi8(bytes_, _mm256_set1_epi8(c)),
                                _mm256_cmpeq_epi8(folded, _mm256_set1_epi8(f))));
  }

 private:
  RTB_HLO_AVX2 static std::uint64_t bits(__m256i eq) {
    return static_cast<std::uint32_t>(_mm256_movemask_epi8(eq));
  }
  __m256i bytes_;
};

[[gnu::flatten]] RTB_HLO_AVX2 inline ChunkMasks classify_chunk_avx2(const char* bytes) {
  return classify_chunk_with<Avx2Lanes>(bytes);
}
#undef RTB_HLO_AVX2
#endif

#if defined(RTB_HLO_HAVE_AVX2)
// The target of the AVX2 variant of the splitter's scan loop. (Not GCC's target_clones: its
// ifunc resolver runs before the sanitizer runtimes start and crashes ASan/TSan builds.)
#define RTB_HLO_TARGET_AVX2 __attribute__((target("avx2,popcnt,bmi,bmi2,pclmul")))

// prefix_xor in one carry-less multiplication by all ones (inlined into the AVX2 scan loop).
__attribute__((target("pclmul"))) inline std::uint64_t prefix_xor_clmul(std::uint64_t bits) {
  return static_cast<std::uint64_t>(_mm_cvtsi128_si64(
      _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(bits)), _mm_set1_epi8(-1), 0)));
}
#endif
#endif  // __SSE2__

}  // namespace rtb::hlo
