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
inline std::uint64_t mask16(__m128i eq, int shift) {
  return static_cast<std::uint64_t>(static_cast<std::uint16_t>(_mm_movemask_epi8(eq))) << shift;
}

// '[' | 0x20 == '{' and ']' | 0x20 == '}', and no other byte maps there: one compare each.
inline ChunkMasks classify_chunk_sse2(const char* bytes) {
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i paren_open = _mm_set1_epi8('(');
  const __m128i paren_close = _mm_set1_epi8(')');
  const __m128i case_bit = _mm_set1_epi8(0x20);
  const __m128i curly_open = _mm_set1_epi8('{');
  const __m128i curly_close = _mm_set1_epi8('}');
  const __m128i newline = _mm_set1_epi8('\n');
  const __m128i zero = _mm_setzero_si128();
  ChunkMasks m;
  for (int part = 0; part < 4; ++part) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + part * 16));
    __m128i folded = _mm_or_si128(v, case_bit);
    int shift = part * 16;
    m.quote |= mask16(_mm_cmpeq_epi8(v, quote), shift);
    m.backslash |= mask16(_mm_cmpeq_epi8(v, backslash), shift);
    m.open |= mask16(
        _mm_or_si128(_mm_cmpeq_epi8(v, paren_open), _mm_cmpeq_epi8(folded, curly_open)), shift);
    m.close |= mask16(
        _mm_or_si128(_mm_cmpeq_epi8(v, paren_close), _mm_cmpeq_epi8(folded, curly_close)), shift);
    m.newline |= mask16(_mm_cmpeq_epi8(v, newline), shift);
    m.zero |= mask16(_mm_cmpeq_epi8(v, zero), shift);
  }
  return m;
}

#if defined(__GNUC__) && defined(__x86_64__)
#define RTB_HLO_HAVE_AVX2 1
__attribute__((target("avx2"))) inline std::uint64_t mask32(__m256i eq, int shift) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(_mm256_movemask_epi8(eq))) << shift;
}

__attribute__((target("avx2"))) inline ChunkMasks classify_chunk_avx2(const char* bytes) {
  const __m256i quote = _mm256_set1_epi8('"');
  const __m256i backslash = _mm256_set1_epi8('\\');
  const __m256i paren_open = _mm256_set1_epi8('(');
  const __m256i paren_close = _mm256_set1_epi8(')');
  const __m256i case_bit = _mm256_set1_epi8(0x20);
  const __m256i curly_open = _mm256_set1_epi8('{');
  const __m256i curly_close = _mm256_set1_epi8('}');
  const __m256i newline = _mm256_set1_epi8('\n');
  const __m256i zero = _mm256_setzero_si256();
  ChunkMasks m;
  for (int part = 0; part < 2; ++part) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + part * 32));
    __m256i folded = _mm256_or_si256(v, case_bit);
    int shift = part * 32;
    m.quote |= mask32(_mm256_cmpeq_epi8(v, quote), shift);
    m.backslash |= mask32(_mm256_cmpeq_epi8(v, backslash), shift);
    m.open |= mask32(
        _mm256_or_si256(_mm256_cmpeq_epi8(v, paren_open), _mm256_cmpeq_epi8(folded, curly_open)),
        shift);
    m.close |= mask32(
        _mm256_or_si256(_mm256_cmpeq_epi8(v, paren_close), _mm256_cmpeq_epi8(folded, curly_close)),
        shift);
    m.newline |= mask32(_mm256_cmpeq_epi8(v, newline), shift);
    m.zero |= mask32(_mm256_cmpeq_epi8(v, zero), shift);
  }
  return m;
}
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
