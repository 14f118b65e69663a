#include "rtb/hlo_scan.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <immintrin.h>
#endif

#include "rtb/error.h"
#include "rtb/hlo_syntax.h"

namespace rtb::hlo {

// ---- sources ------------------------------------------------------------------------------------

std::size_t MemorySource::read(char* buffer, std::size_t capacity) {
  std::size_t n = std::min({capacity, max_read_, text_.size()});
  std::memcpy(buffer, text_.data(), n);
  text_.remove_prefix(n);
  return n;
}

FileSource::FileSource(const std::string& path, bool map)
    : name_(path == "-" ? "<stdin>" : path), fd_(STDIN_FILENO), owned_(false) {
  if (path == "-") return;
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail_at(path, 0, "cannot open: {}", std::strerror(errno));
  owned_ = true;
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd_);
    fail_at(path, 0, "is a directory");
  }
  // Mapping saves the copy of every byte that read() makes; the mapping is released behind the
  // scan (release()), so the resident set stays bounded. If mapping fails, read() is used.
  if (map && S_ISREG(st.st_mode) && st.st_size > 0) {
    void* address =
        ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd_, 0);
    if (address != MAP_FAILED) {
      mapping_ = static_cast<char*>(address);
      mapped_size_ = static_cast<std::size_t>(st.st_size);
      ::madvise(mapping_, mapped_size_, MADV_SEQUENTIAL);
      return;
    }
  }
#if defined(POSIX_FADV_SEQUENTIAL)
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
}

FileSource::~FileSource() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapped_size_);
  if (owned_) ::close(fd_);
}

std::string_view FileSource::contiguous() {
  return mapping_ == nullptr ? std::string_view() : std::string_view(mapping_, mapped_size_);
}

void FileSource::release(std::size_t offset) {
  constexpr std::size_t kStep = std::size_t{16} << 20;  // madvise at most every 16 MiB
  if (mapping_ == nullptr) return;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::size_t until = std::min(offset, mapped_size_) / page * page;
  if (until < released_ + kStep) return;
  ::madvise(mapping_ + released_, until - released_, MADV_DONTNEED);
  released_ = until;
}

std::size_t FileSource::read(char* buffer, std::size_t capacity) {
  for (;;) {
    ssize_t n = ::read(fd_, buffer, capacity);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    fail_at(name_, 0, "cannot read: {}", std::strerror(errno));
  }
}

// ---- 64-byte classification ---------------------------------------------------------------------

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
namespace {

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

}  // namespace

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

std::uint64_t prefix_xor(std::uint64_t bits) {
  bits ^= bits << 1;
  bits ^= bits << 2;
  bits ^= bits << 4;
  bits ^= bits << 8;
  bits ^= bits << 16;
  bits ^= bits << 32;
  return bits;
}

// ---- statement completeness ---------------------------------------------------------------------

bool instruction_reached_opcode(std::string_view text) {
  InstructionHead head;
  return parse_instruction_head(text, head) != HeadStatus::kIncomplete;
}

// ---- the splitter -------------------------------------------------------------------------------

namespace {

constexpr std::size_t kChunk = 64;

// scan_run is the per-byte hot loop. On x86-64 its body is compiled twice, once for CPUs with
// AVX2/POPCNT/BMI (the AVX2 classification inlined, single instructions for the bit counting)
// and once for any x86-64; the choice is made once per splitter from __builtin_cpu_supports.
// (Not GCC's target_clones: its ifunc resolver runs before the sanitizer runtimes start and
// crashes ASan/TSan builds.)
#if defined(RTB_HLO_HAVE_AVX2)
#define RTB_HLO_TARGET_AVX2 __attribute__((target("avx2,popcnt,bmi,bmi2,pclmul")))
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

inline int popcount64(std::uint64_t x) { return std::popcount(x); }

#if defined(RTB_HLO_HAVE_AVX2)
// prefix_xor in one carry-less multiplication by all ones (inlined into the AVX2 scan loop).
__attribute__((target("pclmul"))) inline std::uint64_t prefix_xor_clmul(std::uint64_t bits) {
  return static_cast<std::uint64_t>(_mm_cvtsi128_si64(
      _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(bits)), _mm_set1_epi8(-1), 0)));
}
#endif

// Last visible character before `end` (blank lines skipped); 0 if none.
char last_visible(const char* begin, const char* end) {
  while (end > begin) {
    char c = end[-1];
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return c;
    --end;
  }
  return 0;
}

// `Sink` receives each statement (a callable taking const Statement&; a template parameter so
// that the pipeline's hand-over is inlined into the scan loop).
template <typename Sink>
class Splitter {
 public:
  // `release_limit`: the sink's progress in the contiguous source (pipelined mode); the mapping
  // is never released beyond it.
  Splitter(ByteSource& source, const SplitOptions& options, Sink sink,
           const std::atomic<std::size_t>* release_limit = nullptr)
      : source_(source), options_(options), sink_(std::move(sink)), release_limit_(release_limit) {
    std::string_view whole = source_.contiguous();
    if (!whole.empty()) {
      // Zero-copy: scan the source's own bytes.
      mapped_ = true;
      base_ = whole.data();
      end_ = whole.size();
      eof_ = true;
      result_.bytes = whole.size();
      return;
    }
    std::size_t block = std::max<std::size_t>(options_.block_bytes, kChunk);
    buffer_.resize(block + kChunk);
    base_ = buffer_.data();
  }

  SplitEnd run() {
    // Slices of 256 KiB between checks of the buffer (or releases of the mapping).
    constexpr std::size_t kSliceChunks = (std::size_t{256} << 10) / kChunk;
    for (;;) {
      if (!fill()) break;
      while (end_ - scan_ >= kChunk) {
        if (!scan_run(std::min((end_ - scan_) / kChunk, kSliceChunks))) {
          return too_long_ ? too_long() : finish_error();
        }
        if (mapped_) release();
      }
      if (eof_) break;
    }
    // The tail (< 64 bytes), scanned from a blank-padded copy so no byte past it is read.
    std::size_t tail = end_ - scan_;
    if (tail > 0) {
      char padded[kChunk];
      std::memset(padded, ' ', kChunk);
      std::memcpy(padded, base_ + scan_, tail);
      if (!scan_masks(classify_chunk(padded), tail)) return finish_error();
      scan_ = end_;
      if (scan_ - statement_begin_ > options_.max_statement_bytes) return too_long();
    }
    result_.lines = line_ + (end_ > statement_begin_ ? 1 : 0);
    result_.depth = depth_;
    // A last statement without a final newline.
    if (end_ > statement_begin_) {
      std::string_view text(base_ + statement_begin_, end_ - statement_begin_);
      bool blank = trim(text).empty();
      bool instruction_end = depth_ == 1 && !in_string_ && base_depth_ == 1;
      bool complete = depth_ == 0 || (instruction_end && instruction_reached_opcode(text));
      if (!blank && complete) {
        emit(text, depth_, nullptr);
      } else if (!blank) {
        result_.partial_statement = true;
      }
    }
    if (in_string_ || depth_ > base_depth_) result_.partial_statement = true;
    return result_;
  }

 private:
  // Makes sure at least one full chunk (or everything that is left) is buffered. Returns false
  // when there is nothing more to scan.
  bool fill() {
    if (end_ - scan_ >= kChunk) return true;
    if (eof_) return end_ > scan_;
    // Keep the current statement and the unscanned bytes; drop everything before.
    if (statement_begin_ > 0) {
      std::size_t keep = end_ - statement_begin_;
      std::memmove(buffer_.data(), base_ + statement_begin_, keep);
      scan_ -= statement_begin_;
      end_ = keep;
      statement_begin_ = 0;
    }
    while (!eof_ && end_ - scan_ < kChunk) {
      std::size_t room = buffer_.size() - end_;
      if (room < options_.block_bytes / 2 + kChunk) {
        // The statement fills the buffer: grow it, bounded by the statement limit.
        buffer_.resize(buffer_.size() * 2);
        base_ = buffer_.data();
        room = buffer_.size() - end_;
      }
      std::size_t n = source_.read(buffer_.data() + end_, room);
      if (n == 0) {
        eof_ = true;
        break;
      }
      end_ += n;
      result_.bytes += n;
    }
    return end_ > scan_;
  }

  // Scans `chunks` full chunks from scan_, advancing it. False on an error (error_ or too_long_).
  bool scan_run(std::size_t chunks) {
#if defined(RTB_HLO_HAVE_AVX2)
    if (avx2_) return scan_run_avx2(chunks);
#endif
    return scan_run_body<false>(chunks);
  }

#if defined(RTB_HLO_HAVE_AVX2)
  RTB_HLO_TARGET_AVX2 bool scan_run_avx2(std::size_t chunks) { return scan_run_body<true>(chunks); }
#endif

  template <bool kAvx2>
  [[gnu::always_inline]] inline bool scan_run_body(std::size_t chunks) {
    for (std::size_t k = 0; k < chunks; ++k) {
      ChunkMasks masks;
#if defined(RTB_HLO_HAVE_AVX2)
      if constexpr (kAvx2) {
        masks = classify_chunk_avx2(base_ + scan_);
      } else {
        masks = classify_chunk_sse2(base_ + scan_);
      }
#elif defined(__SSE2__)
      masks = classify_chunk_sse2(base_ + scan_);
#else
      masks = classify_chunk_portable(base_ + scan_);
#endif
      if (!scan_masks<kAvx2>(masks, kChunk)) return false;
      scan_ += kChunk;
      if (scan_ - statement_begin_ > options_.max_statement_bytes) {
        too_long_ = true;
        return false;
      }
    }
    return true;
  }

  // Handles the masks of the chunk at scan_, of which the first `valid` bytes are input.
  // kClmul: the caller is compiled for PCLMULQDQ (the AVX2 variant), which computes the prefix
  // XOR in one carry-less multiplication by all ones.
  template <bool kClmul = false>
  [[gnu::always_inline]] inline bool scan_masks(const ChunkMasks& m, std::size_t valid) {
    // A NUL byte: not text. Statements before it still count; stop at its line.
    std::uint64_t input = valid >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << valid) - 1;
    bool binary = false;
    if ((m.zero & input) != 0) {
      input = (std::uint64_t{1} << std::countr_zero(m.zero & input)) - 1;
      binary = true;
    }
    // Escaped characters: the byte after an unescaped backslash.
    std::uint64_t escaped = escape_carry_ ? 1 : 0;
    escape_carry_ = false;
    if (m.backslash != 0) {
      std::uint64_t bits = m.backslash;
      while (bits != 0) {
        int at = std::countr_zero(bits);
        bits &= bits - 1;
        if ((escaped >> at) & 1) continue;  // this backslash is itself escaped
        if (at == 63) {
          escape_carry_ = true;
        } else {
          escaped |= std::uint64_t{1} << (at + 1);
        }
      }
    }
    std::uint64_t quotes = m.quote & ~escaped;
    std::uint64_t inside = 0;
#if defined(RTB_HLO_HAVE_AVX2)
    if constexpr (kClmul) {
      inside = prefix_xor_clmul(quotes);
    } else {
      inside = prefix_xor(quotes);
    }
#else
    inside = prefix_xor(quotes);
#endif
    std::uint64_t in_string = inside ^ (in_string_ ? ~std::uint64_t{0} : 0);
    in_string_ = (in_string >> 63) != 0;
    const std::uint64_t open = m.open & ~in_string;
    const std::uint64_t close = m.close & ~in_string;

    std::uint64_t newlines = m.newline & input;
    while (newlines != 0) {
      int at = std::countr_zero(newlines);
      newlines &= newlines - 1;
      ++line_;
      if ((in_string >> at) & 1) continue;
      std::uint64_t below = (std::uint64_t{1} << at) - 1;
      std::int64_t depth = depth_ + popcount64(open & below) - popcount64(close & below);
      if (depth < 0) {
        error_line_ = line_;
        error_ = "unbalanced closing bracket";
        return false;
      }
      std::size_t position = scan_ + static_cast<std::size_t>(at);
      if (ends_statement(position, depth)) {
        std::string_view text(base_ + statement_begin_, position - statement_begin_);
        emit(text, depth, head_valid_ ? &head_ : nullptr);
        statement_begin_ = position + 1;
        statement_line_ = line_ + 1;
        base_depth_ = depth;
      }
    }
    if (binary) {
      error_line_ = line_ + 1;
      error_ = "binary data (NUL byte): not HLO text";
      return false;
    }
    depth_ += popcount64(open) - popcount64(close);
    if (depth_ < 0) {
      error_line_ = line_ + 1;
      error_ = "unbalanced closing bracket";
      return false;
    }
    return true;
  }

  // Whether the newline at `newline` (bracket depth `depth` there) ends the pending statement.
  // Inside a computation this parses the instruction head; the parse is handed to the callback.
  bool ends_statement(std::size_t newline, std::int64_t depth) {
    head_valid_ = false;
    if (depth == 0) return true;
    if (depth > 1) return false;
    const char* begin = base_ + statement_begin_;
    const char* end = base_ + newline;
    char last = last_visible(begin, end);
    if (base_depth_ == 0) return last == '{';  // a computation header
    if (last == ',' || last == '=') return false;
    HeadStatus status = parse_instruction_head(
        std::string_view(begin, static_cast<std::size_t>(end - begin)), head_);
    head_valid_ = status == HeadStatus::kOk;
    return status != HeadStatus::kIncomplete;
  }

  void emit(std::string_view text, std::int64_t depth_after, const InstructionHead* head) {
    sink_(Statement{text, statement_line_, depth_after, head});
  }

  void release() {
    std::size_t until = statement_begin_;
    if (release_limit_ != nullptr) {
      until = std::min(until, release_limit_->load(std::memory_order_acquire));
    }
    source_.release(until);
  }

  SplitEnd too_long() {
    result_.clean = false;
    result_.line = statement_line_;
    result_.message = fmt::format(
        "statement longer than {} MiB (an unterminated string or bracket, or not HLO text?)",
        options_.max_statement_bytes >> 20);
    result_.lines = line_;
    result_.depth = depth_;
    return result_;
  }

  SplitEnd finish_error() {
    result_.clean = false;
    result_.line = error_line_;
    result_.message = error_;
    result_.lines = line_;
    result_.depth = depth_;
    return result_;
  }

  ByteSource& source_;
  const SplitOptions& options_;
  Sink sink_;
  const std::atomic<std::size_t>* release_limit_;
  std::vector<char> buffer_;         // read() mode: the bytes being scanned
  const char* base_ = nullptr;       // buffer_.data(), or the source's contiguous bytes
  bool mapped_ = false;              // scanning the source's contiguous bytes
  std::size_t statement_begin_ = 0;  // start of the pending statement (offset from base_)
  std::size_t scan_ = 0;             // next byte to classify
  std::size_t end_ = 0;              // end of the buffered bytes
  bool eof_ = false;
  std::int64_t line_ = 0;            // newlines seen so far
  std::int64_t statement_line_ = 1;  // first line of the pending statement
  std::int64_t depth_ = 0;           // bracket depth at scan_
  std::int64_t base_depth_ = 0;      // depth after the previous statement
  bool in_string_ = false;
  bool escape_carry_ = false;
  InstructionHead head_;  // the last instruction head parsed by ends_statement
  bool head_valid_ = false;
  bool too_long_ = false;
  const bool avx2_ = cpu_has_avx2();
  std::int64_t error_line_ = 0;
  std::string error_;
  SplitEnd result_;
};

// ---- pipelined mode: the scan on a second thread ------------------------------------------------
//
// On a mapped file the statements stay valid as views, so one thread can scan (the per-byte work)
// while the caller's thread analyses the statements of the previous batch. The scan thread also
// parses the instruction heads (it decides where instructions end with them, as in the
// single-thread mode) and runs the caller's filter, which drops most statements there: what
// crosses over is a small record per kept statement, and the consumer touches little text (it
// would come from the other core's cache), prefetching what it will read a few statements ahead.
// Batches are reused (fresh ones of this size would be newly zeroed pages from mmap each time).
// The tests check that both modes give the same statements.

// A statement in transit between the threads, compact (the consumer reads every byte of it
// from the other core's cache): views as offsets from `begin`.
struct Candidate {
  const char* begin;
  std::int64_t line;
  std::uint64_t hash;  // the filter's note
  std::uint32_t length;
  std::uint32_t count;  // the filter's note
  std::uint32_t name_offset, name_length;
  std::uint32_t shape_offset, shape_length;
  std::uint32_t opcode_offset, opcode_length;  // the call runs from the opcode's end to the end
  std::uint32_t key_offset, key_length;        // the filter's note
  std::uint8_t depth_after;                    // statements end at depth 0 or 1
  bool has_head;
  bool root;
  std::uint8_t kind;  // the filter's note
  std::uint16_t tag;  // the filter's note (fits in the padding)

  static std::uint32_t offset(const char* begin, std::string_view part) {
    return part.data() == nullptr ? 0 : static_cast<std::uint32_t>(part.data() - begin);
  }

  static Candidate make(const Statement& s, const StatementNote* note) {
    Candidate c{};
    c.begin = s.text.data();
    c.line = s.line;
    c.length = static_cast<std::uint32_t>(s.text.size());
    c.depth_after = static_cast<std::uint8_t>(s.depth_after);
    if (s.head != nullptr) {
      c.has_head = true;
      c.root = s.head->root;
      c.name_offset = offset(c.begin, s.head->name);
      c.name_length = static_cast<std::uint32_t>(s.head->name.size());
      c.shape_offset = offset(c.begin, s.head->shape);
      c.shape_length = static_cast<std::uint32_t>(s.head->shape.size());
      c.opcode_offset = offset(c.begin, s.head->opcode);
      c.opcode_length = static_cast<std::uint32_t>(s.head->opcode.size());
    }
    if (note != nullptr) {
      c.hash = note->hash;
      c.count = note->count;
      c.kind = note->kind;
      c.tag = note->tag;
      c.key_offset = offset(c.begin, note->key);
      c.key_length = static_cast<std::uint32_t>(note->key.size());
    }
    return c;
  }

  std::string_view slice(std::uint32_t from, std::uint32_t length) const {
    return std::string_view(begin + from, length);
  }

  InstructionHead head() const {
    InstructionHead h;
    h.root = root;
    h.name = slice(name_offset, name_length);
    h.shape = slice(shape_offset, shape_length);
    h.opcode = slice(opcode_offset, opcode_length);
    std::uint32_t call = opcode_offset + opcode_length;
    h.call = slice(call, this->length - call);
    return h;
  }

  StatementNote note() const {
    StatementNote n;
    n.kind = kind;
    n.count = count;
    n.hash = hash;
    n.tag = tag;
    if (key_length > 0) n.key = slice(key_offset, key_length);
    return n;
  }
};

static_assert(sizeof(Candidate) <= 72, "Candidate is copied across cores: keep it small");

struct Stopped {};  // unwinds the scan thread when the caller gives up

class Pipeline {
 public:
  Pipeline(ByteSource& source, const SplitOptions& options,
           const std::function<void(const Statement&)>& on_statement, const StatementFilter& filter)
      : source_(source),
        options_(options),
        on_statement_(on_statement),
        filter_(filter),
        base_(source.contiguous().data()) {}

  SplitEnd run() {
    std::thread scanner([this] { scan(); });
    try {
      consume();
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
      }
      changed_.notify_all();
      scanner.join();
      throw;
    }
    scanner.join();
    if (error_) std::rethrow_exception(error_);
    return end_;
  }

 private:
  static constexpr std::size_t kBatch = 1024;           // statements per hand-over
  static constexpr std::size_t kMaxInFlight = 4;        // batches queued at most
  static constexpr std::size_t kLookahead = 8;          // Statement::ahead: this many places on
  static constexpr std::size_t kPrefetchDistance = 16;  // text prefetched this many places on

  void scan() {
    try {
      std::vector<Candidate> batch;
      batch.reserve(kBatch);
      auto flush = [&] {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return queue_.size() < kMaxInFlight || stop_; });
        if (stop_) throw Stopped{};
        queue_.push_back(std::move(batch));
        // Reuse a consumed batch: a fresh one of this size would come from mmap, i.e. newly
        // zeroed pages for every batch.
        if (spare_.empty()) {
          batch = {};
        } else {
          batch = std::move(spare_.back());
          spare_.pop_back();
        }
        changed_.notify_all();
        lock.unlock();
        batch.clear();
        batch.reserve(kBatch);
      };
      Splitter splitter(
          source_, options_,
          [&](const Statement& s) {
            if (filter_) {
              StatementNote note;
              if (!filter_(s, note)) return;
              batch.push_back(Candidate::make(s, &note));
            } else {
              batch.push_back(Candidate::make(s, nullptr));
            }
            if (batch.size() == kBatch) flush();
          },
          &consumed_);
      SplitEnd end = splitter.run();
      if (!batch.empty()) flush();
      std::lock_guard<std::mutex> lock(mutex_);
      end_ = end;
      done_ = true;
    } catch (const Stopped&) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      done_ = true;
    }
    changed_.notify_all();
  }

  void consume() {
    for (;;) {
      std::vector<Candidate> batch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return !queue_.empty() || done_; });
        if (queue_.empty()) return;
        batch = std::move(queue_.front());
        queue_.pop_front();
      }
      changed_.notify_all();
      const bool noted = static_cast<bool>(filter_);
      if (noted) {
        notes_.resize(batch.size());
        for (std::size_t k = 0; k < batch.size(); ++k) notes_[k] = batch[k].note();
      }
      for (std::size_t k = 0; k < batch.size(); ++k) {
        const Candidate& c = batch[k];
        if (k + kPrefetchDistance < batch.size()) {
          // The consumer reads little of a statement's text, but from the other core's cache.
          const Candidate& later = batch[k + kPrefetchDistance];
          __builtin_prefetch(later.has_head ? later.begin + later.opcode_offset : later.begin);
        }
        InstructionHead head;
        if (c.has_head) head = c.head();
        bool has_ahead = noted && k + kLookahead < batch.size();
        on_statement_(Statement{std::string_view(c.begin, c.length), c.line, c.depth_after,
                                c.has_head ? &head : nullptr, noted ? &notes_[k] : nullptr,
                                has_ahead ? &notes_[k + kLookahead] : nullptr});
      }
      const char* kept = batch.back().begin + batch.back().length;
      consumed_.store(static_cast<std::size_t>(kept - base_), std::memory_order_release);
      std::lock_guard<std::mutex> lock(mutex_);
      spare_.push_back(std::move(batch));
    }
  }

  ByteSource& source_;
  const SplitOptions& options_;
  const std::function<void(const Statement&)>& on_statement_;
  const StatementFilter& filter_;
  const char* const base_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::vector<Candidate>> queue_;
  std::vector<std::vector<Candidate>> spare_;  // consumed batches, for reuse
  std::vector<StatementNote> notes_;           // the notes of the batch being consumed
  bool done_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  SplitEnd end_;
  std::atomic<std::size_t> consumed_{0};  // the caller's progress (offset from base_)
};

}  // namespace

SplitEnd split_statements(ByteSource& source, const SplitOptions& options,
                          const std::function<void(const Statement&)>& on_statement,
                          const StatementFilter& filter) {
  constexpr std::size_t kPipelineMinBytes = std::size_t{4} << 20;
  std::string_view whole = source.contiguous();
  bool pipelined = !whole.empty() && (options.threads == 2 ||
                                      (options.threads == 0 && whole.size() >= kPipelineMinBytes &&
                                       std::thread::hardware_concurrency() >= 2));
  if (pipelined) return Pipeline(source, options, on_statement, filter).run();
  if (!filter) {
    Splitter splitter(source, options, [&](const Statement& s) { on_statement(s); });
    return splitter.run();
  }
  Splitter splitter(source, options, [&](const Statement& s) {
    StatementNote note;
    if (!filter(s, note)) return;
    Statement noted = s;
    noted.note = &note;
    on_statement(noted);
  });
  return splitter.run();
}

}  // namespace rtb::hlo
