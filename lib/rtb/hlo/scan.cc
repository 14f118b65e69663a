#include "rtb/hlo/scan.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

#include "rtb/base/error.h"
#include "rtb/base/text.h"
#include "rtb/hlo/syntax.h"

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

// Where a splitter stands between two chunks of a contiguous source: enough to resume the scan
// there. Offsets are from the start of the source; lines are counted from where the scan began.
struct ScanState {
  std::size_t statement_begin = 0;  // start of the pending statement
  std::size_t scan = 0;             // next byte to classify
  std::int64_t line = 0;            // newlines seen so far
  std::int64_t statement_line = 1;  // first line of the pending statement
  std::int64_t depth = 0;           // bracket depth at `scan`
  std::int64_t base_depth = 0;      // depth after the previous statement
  bool in_string = false;
  bool escape_carry = false;

  // What a piece guessed to start at `offset` assumes there (lines counted from it).
  static ScanState piece_start(std::size_t offset) {
    ScanState state;
    state.statement_begin = offset;
    state.scan = offset;
    return state;
  }
  // Whether this is what a piece starting here assumes: a top-level statement boundary.
  bool at_top_level_boundary() const {
    return statement_begin == scan && depth == 0 && base_depth == 0 && !in_string && !escape_carry;
  }
};

// A piece of a contiguous source for one splitter: from `start` to `end`; `final` when `end` is
// the end of the source (else the scan stops there without treating it as the end of the input,
// and the caller reads the splitter's state()).
struct PieceRange {
  ScanState start;
  std::size_t end = 0;
  bool final = true;
};

// `Sink` receives each statement (a callable taking const Statement&; a template parameter so
// that the pipeline's hand-over is inlined into the scan loop).
template <typename Sink>
class Splitter {
 public:
  // The whole source, or with `piece` a piece of a contiguous one (never released behind the
  // scan: in the pipelined mode the consumer does that).
  Splitter(ByteSource& source, const SplitOptions& options, Sink sink,
           const PieceRange* piece = nullptr)
      : source_(source), options_(options), sink_(std::move(sink)) {
    std::string_view whole = source_.contiguous();
    if (!whole.empty()) {
      // Zero-copy: scan the source's own bytes.
      base_ = whole.data();
      end_ = whole.size();
      eof_ = true;
      result_.bytes = whole.size();
      release_ = piece == nullptr;
      if (piece != nullptr) {
        end_ = piece->end;
        final_ = piece->final;
        const ScanState& start = piece->start;
        statement_begin_ = start.statement_begin;
        scan_ = start.scan;
        line_ = start.line;
        statement_line_ = start.statement_line;
        depth_ = start.depth;
        base_depth_ = start.base_depth;
        in_string_ = start.in_string;
        escape_carry_ = start.escape_carry;
        result_.bytes = end_ - scan_;
      }
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
        if (release_) source_.release(statement_begin_);
      }
      if (eof_) break;
    }
    // The tail (< 64 bytes), scanned from a blank-padded copy so no byte past it is read.
    std::size_t tail = end_ - scan_;
    if (tail > 0) {
      char padded[kChunk];
      std::memset(padded, ' ', kChunk);
      std::memcpy(padded, base_ + scan_, tail);
      if (!scan_masks(classify_chunk(padded), tail)) {
        return too_long_ ? too_long() : finish_error();
      }
      scan_ = end_;
      if (past_limit(scan_)) return too_long();
    }
    if (!final_) {
      result_.lines = line_;
      result_.depth = depth_;
      return result_;
    }
    if (depth_ < 0) {  // after the last newline (see scan_masks)
      error_line_ = line_ + 1;
      error_ = "unbalanced closing bracket";
      return finish_error();
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

  // Where the scan stands (after run(): at the end of the piece, or where it stopped).
  ScanState state() const {
    return ScanState{statement_begin_, scan_,       line_,      statement_line_,
                     depth_,           base_depth_, in_string_, escape_carry_};
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
      if (past_limit(scan_)) {
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
    int nul_at = 0;
    if ((m.zero & input) != 0) {
      nul_at = std::countr_zero(m.zero & input);
      input = (std::uint64_t{1} << nul_at) - 1;
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
      // Past the limit, the statement is too long whatever this line end means (see
      // past_limit).
      std::size_t position = scan_ + static_cast<std::size_t>(at);
      if (past_limit(position)) {
        too_long_ = true;
        return false;
      }
      std::uint64_t below = (std::uint64_t{1} << at) - 1;
      std::int64_t depth = depth_ + popcount64(open & below) - popcount64(close & below);
      if (depth < 0) {
        error_line_ = line_;
        error_ = "unbalanced closing bracket";
        return false;
      }
      if (ends_statement(position, depth)) {
        std::string_view text(base_ + statement_begin_, position - statement_begin_);
        emit(text, depth, head_valid_ ? &head_ : nullptr);
        statement_begin_ = position + 1;
        statement_line_ = line_ + 1;
        base_depth_ = depth;
      }
    }
    if (binary) {
      if (past_limit(scan_ + static_cast<std::size_t>(nul_at))) {
        too_long_ = true;  // the statement passed the limit before the NUL (see past_limit)
        return false;
      }
      error_line_ = line_ + 1;
      error_ = "binary data (NUL byte): not HLO text";
      return false;
    }
    // A negative depth is an error where a line ends (above) or where the input does (run()),
    // not at the end of a chunk: what the reader accepts must not depend on where the 64-byte
    // chunks fall (the pieces of the pipelined mode start at other offsets).
    depth_ += popcount64(open) - popcount64(close);
    return true;
  }

  // Whether the pending statement, still open at `position` (the offset of the next byte to
  // scan, a line end or a NUL), is longer than the limit. Every check of the limit goes through
  // here and depends on the position alone: chunk ends (scan_run) fall elsewhere in the pieces
  // of the pipelined mode, so which error a long statement meets first must not depend on them.
  bool past_limit(std::size_t position) const {
    return position - statement_begin_ > options_.max_statement_bytes;
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

  // At an error, `lines` is the line of the problem: the newlines scanned by then depend on
  // where the chunks fall.
  SplitEnd too_long() {
    result_.clean = false;
    result_.line = statement_line_;
    std::size_t limit = options_.max_statement_bytes;
    std::string size = limit % (std::size_t{1} << 20) == 0 ? fmt::format("{} MiB", limit >> 20)
                                                           : fmt::format("{} bytes", limit);
    result_.message = fmt::format(
        "statement longer than {} (an unterminated string or bracket, or not HLO text?)", size);
    result_.lines = statement_line_;
    result_.depth = depth_;
    return result_;
  }

  SplitEnd finish_error() {
    result_.clean = false;
    result_.line = error_line_;
    result_.message = error_;
    result_.lines = error_line_;
    result_.depth = depth_;
    return result_;
  }

  ByteSource& source_;
  const SplitOptions& options_;
  Sink sink_;
  std::vector<char> buffer_;         // read() mode: the bytes being scanned
  const char* base_ = nullptr;       // buffer_.data(), or the source's contiguous bytes
  bool release_ = false;             // release the source behind the scan
  bool final_ = true;                // the scan runs to the end of the input
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

// ---- pipelined mode: pieces scanned in parallel, one consumer ----------------------------------
//
// On a contiguous source (a mapped file) the statements stay valid as views, so the per-byte work
// can run on other threads while the caller's thread analyses what they found. The text is cut
// into pieces of about SplitOptions::piece_bytes, each starting where a computation's closing
// line ends (next_piece_start: a guess). Scanning threads take the next piece, scan it from the
// state such a boundary has (depth 0, outside strings, no pending statement), parse the
// instruction heads and run a filter of their own (StatementFilter::fork), which drops most
// statements: what crosses over is a small record per kept statement. The consumer takes the
// pieces in order. It checks each guess against the state the scan of the previous piece really
// ended in; where a guess was wrong (a line starting with '}' inside a multi-line string, say),
// it drops that piece's records and scans the piece again itself, from the true state and with
// the previous piece's filter, so the callback always sees what one thread would have given.
// The consumer also releases the mapping behind itself, which bounds the resident text by the
// pieces in flight. Record batches are reused (fresh ones would be newly zeroed pages).
// The tests check that all modes give the same statements.

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

  // Fills `c` (value-initialised, in place in its batch: building one on the stack and copying
  // it in made the copy's wide loads wait on the narrow stores just made).
  static void fill(Candidate& c, const Statement& s, const StatementNote* note) {
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
  }

  std::string_view slice(std::uint32_t from, std::uint32_t length) const {
    return std::string_view(begin + from, length);
  }

  void head_into(InstructionHead& h) const {
    h.root = root;
    h.name = slice(name_offset, name_length);
    h.shape = slice(shape_offset, shape_length);
    h.opcode = slice(opcode_offset, opcode_length);
    std::uint32_t call = opcode_offset + opcode_length;
    h.call = slice(call, this->length - call);
  }

  void note_into(StatementNote& n) const {
    n.kind = kind;
    n.count = count;
    n.hash = hash;
    n.tag = tag;
    n.key = key_length > 0 ? slice(key_offset, key_length) : std::string_view();
  }
};

static_assert(sizeof(Candidate) <= 72, "Candidate is copied across cores: keep it small");

struct Stopped {};  // unwinds a scanning thread when the caller gives up

std::size_t automatic_piece_bytes(std::size_t text_bytes, int scanners) {
  constexpr std::size_t kMin = std::size_t{64} << 10;
  constexpr std::size_t kMax = std::size_t{2} << 20;
  return std::clamp<std::size_t>(text_bytes / (8 * static_cast<std::size_t>(scanners)), kMin, kMax);
}

class Pipeline {
 public:
  Pipeline(ByteSource& source, const SplitOptions& options, int scanners,
           const std::function<void(const Statement&)>& on_statement, StatementFilter* filter)
      : source_(source),
        options_(options),
        on_statement_(on_statement),
        filter_(filter),
        text_(source.contiguous()),
        scanners_(scanners),
        piece_bytes_(options.piece_bytes > 0 ? options.piece_bytes
                                             : automatic_piece_bytes(text_.size(), scanners)),
        max_pieces_ahead_(4 * static_cast<std::size_t>(scanners) + 4) {}

  SplitEnd run() {
    std::vector<std::thread> threads;
    auto stop_and_join = [&] {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
      }
      changed_.notify_all();
      for (std::thread& thread : threads) thread.join();
    };
    SplitEnd end;
    try {
      for (int i = 0; i < scanners_; ++i) threads.emplace_back([this] { scan_pieces(); });
      end = consume();
    } catch (...) {
      stop_and_join();
      if (error_) std::rethrow_exception(error_);
      throw;
    }
    stop_and_join();
    if (error_) std::rethrow_exception(error_);
    return end;
  }

 private:
  static constexpr std::size_t kBatch = 1024;           // records per hand-over
  static constexpr std::size_t kLookahead = 8;          // Statement::ahead: this many places on
  static constexpr std::size_t kPrefetchDistance = 16;  // text prefetched this many places on

  using Batch = std::vector<Candidate>;

  struct Piece {
    std::size_t end = 0;  // the next piece's guessed start
    bool final = false;   // ends at the end of the text
    std::deque<Batch> batches;
    bool finished = false;  // scanned: end_info, end_state, own_filter are set
    SplitEnd end_info;      // lines counted from the piece's start
    ScanState end_state;
    std::unique_ptr<StatementFilter> own_filter;  // pieces after the first (the first: filter_)
  };

  // Scans [range.start, range.end) with `filter`, handing each full batch to `deliver`.
  template <typename Deliver>
  std::pair<SplitEnd, ScanState> scan_range(const PieceRange& range, StatementFilter* filter,
                                            Deliver&& deliver) {
    Batch batch = take_spare();
    Splitter splitter(
        source_, options_,
        [&](const Statement& s) {
          if (filter != nullptr) {
            StatementNote note;
            if (!filter->keep(s, note)) return;
            Candidate::fill(batch.emplace_back(), s, &note);
          } else {
            Candidate::fill(batch.emplace_back(), s, nullptr);
          }
          if (batch.size() == kBatch) {
            deliver(batch);
            batch = take_spare();
          }
        },
        &range);
    SplitEnd end = splitter.run();
    if (!batch.empty()) {
      deliver(batch);
    } else {
      give_spare(std::move(batch));
    }
    return {std::move(end), splitter.state()};
  }

  Batch take_spare() {
    Batch batch;
    {
      std::lock_guard<std::mutex> lock(spare_mutex_);
      if (!spare_.empty()) {
        batch = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    batch.clear();
    batch.reserve(kBatch);
    return batch;
  }

  void give_spare(Batch batch) {
    std::lock_guard<std::mutex> lock(spare_mutex_);
    spare_.push_back(std::move(batch));
  }

  // A scanning thread: takes pieces until there are none left or the consumer stops.
  void scan_pieces() {
    try {
      for (;;) {
        Piece* piece = nullptr;
        std::size_t begin = 0;
        std::size_t end = 0;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          changed_.wait(
              lock, [&] { return stop_ || all_claimed_ || pieces_.size() < max_pieces_ahead_; });
          if (stop_ || all_claimed_) return;
          // Each piece runs from where the previous one ends to the first guessed boundary at
          // least piece_bytes_ on (usually a few KiB further: one search under the lock).
          begin = next_begin_;
          end = text_.size() - begin <= piece_bytes_
                    ? text_.size()
                    : next_piece_start(text_, begin + piece_bytes_);
          next_begin_ = end;
          all_claimed_ = end == text_.size();
          pieces_.push_back(std::make_unique<Piece>());
          piece = pieces_.back().get();
          piece->end = end;
          piece->final = all_claimed_;
        }
        changed_.notify_all();
        std::unique_ptr<StatementFilter> own;
        StatementFilter* filter = filter_;
        if (filter_ != nullptr && begin > 0) {
          own = filter_->fork();
          filter = own.get();
        }
        PieceRange range{ScanState::piece_start(begin), end, piece->final};
        auto [end_info, end_state] = scan_range(range, filter, [&](Batch& batch) {
          {
            std::lock_guard<std::mutex> lock(mutex_);
            if (stop_) throw Stopped{};
            piece->batches.push_back(std::move(batch));
          }
          changed_.notify_all();
        });
        {
          std::lock_guard<std::mutex> lock(mutex_);
          piece->end_info = std::move(end_info);
          piece->end_state = end_state;
          piece->own_filter = std::move(own);
          piece->finished = true;
        }
        changed_.notify_all();
      }
    } catch (const Stopped&) {
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      stop_ = true;
    }
    changed_.notify_all();
  }

  // Waits until `ready` holds (under the lock); throws Stopped if a scanning thread failed.
  template <typename Ready>
  void wait_for(std::unique_lock<std::mutex>& lock, Ready ready) {
    changed_.wait(lock, [&] { return ready() || error_ != nullptr; });
    if (error_ != nullptr) throw Stopped{};
  }

  SplitEnd consume() {
    std::int64_t line_base = 0;  // lines before the point `state` counts its lines from
    ScanState state;             // the true scan state at the start of the current piece
    StatementFilter* filter = filter_;
    std::unique_ptr<StatementFilter> owned_filter;
    StatementNote carry;  // pending notes of earlier filters, for the next kept statement
    bool carrying = false;
    for (std::size_t index = 0;; ++index) {
      Piece* piece = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wait_for(lock, [&] { return !pieces_.empty(); });
        piece = pieces_.front().get();
      }
      SplitEnd end_info;
      if (index == 0 || state.at_top_level_boundary()) {
        // The guess holds: take the piece's records, with its filter.
        if (index > 0) {
          line_base += state.line;
          if (filter_ != nullptr) fold(carry, carrying, filter->pending());
        }
        for (;;) {
          Batch batch;
          {
            std::unique_lock<std::mutex> lock(mutex_);
            wait_for(lock, [&] { return !piece->batches.empty() || piece->finished; });
            if (piece->batches.empty()) break;
            batch = std::move(piece->batches.front());
            piece->batches.pop_front();
          }
          changed_.notify_all();
          deliver(batch, line_base, carry, carrying);
        }
        // The piece is scanned: its filter is the one whose notes come next.
        end_info = std::move(piece->end_info);
        state = piece->end_state;
        if (piece->own_filter) {
          owned_filter = std::move(piece->own_filter);
          filter = owned_filter.get();
        }
      } else {
        // The guess was wrong: wait for the piece's scan to end, drop it and scan the piece
        // again from the true state, with the filter that scanned the text before it.
        {
          std::unique_lock<std::mutex> lock(mutex_);
          wait_for(lock, [&] { return piece->finished; });
          for (Batch& batch : piece->batches) give_spare(std::move(batch));
          piece->batches.clear();
        }
        PieceRange range{state, piece->end, piece->final};
        auto [rescan_end, rescan_state] = scan_range(
            range, filter, [&](Batch& batch) { deliver(batch, line_base, carry, carrying); });
        end_info = std::move(rescan_end);
        state = rescan_state;
      }
      bool final = piece->final;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        pieces_.pop_front();
      }
      changed_.notify_all();
      if (!end_info.clean || final) {
        end_info.line += end_info.clean ? 0 : line_base;
        end_info.lines += line_base;
        end_info.bytes = text_.size();
        if (filter_ != nullptr) {
          end_info.pending = filter->pending();
          if (carrying) filter_->merge_pending(carry, end_info.pending);
        }
        return end_info;
      }
    }
  }

  // Adds a filter's pending note (later) to the carried one (earlier).
  void fold(StatementNote& carry, bool& carrying, const StatementNote& pending) {
    if (carrying) {
      StatementNote merged = pending;
      filter_->merge_pending(carry, merged);
      carry = merged;
    } else {
      carry = pending;
      carrying = true;
    }
  }

  // Hands a batch of records to the callback, lines shifted by `line_base`; the first kept
  // statement after a switch of filters gets the carried pending note merged in.
  void deliver(Batch& batch, std::int64_t line_base, StatementNote& carry, bool& carrying) {
    const bool noted = filter_ != nullptr;
    if (noted) {
      notes_.resize(batch.size());
      for (std::size_t k = 0; k < batch.size(); ++k) batch[k].note_into(notes_[k]);
      if (carrying && !batch.empty()) {
        filter_->merge_pending(carry, notes_[0]);
        carrying = false;
      }
    }
    for (std::size_t k = 0; k < batch.size(); ++k) {
      const Candidate& c = batch[k];
      if (k + kPrefetchDistance < batch.size()) {
        // The consumer reads little of a statement's text, but from another core's cache.
        const Candidate& later = batch[k + kPrefetchDistance];
        __builtin_prefetch(later.has_head ? later.begin + later.opcode_offset : later.begin);
      }
      // Field by field into objects that live across iterations: a temporary copied whole
      // made the copy's wide loads wait on the narrow stores that built it.
      if (c.has_head) c.head_into(head_);
      statement_.text = std::string_view(c.begin, c.length);
      statement_.line = c.line + line_base;
      statement_.depth_after = c.depth_after;
      statement_.head = c.has_head ? &head_ : nullptr;
      statement_.note = noted ? &notes_[k] : nullptr;
      statement_.ahead = noted && k + kLookahead < batch.size() ? &notes_[k + kLookahead] : nullptr;
      on_statement_(statement_);
    }
    if (!batch.empty()) {
      const char* kept = batch.back().begin + batch.back().length;
      source_.release(static_cast<std::size_t>(kept - text_.data()));
    }
    give_spare(std::move(batch));
  }

  ByteSource& source_;
  const SplitOptions& options_;
  const std::function<void(const Statement&)>& on_statement_;
  StatementFilter* const filter_;  // the caller's (first piece; prototype of the others)
  const std::string_view text_;
  const int scanners_;
  const std::size_t piece_bytes_;
  const std::size_t max_pieces_ahead_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Piece>> pieces_;  // claimed and not yet consumed, in order
  std::size_t next_begin_ = 0;                 // where the next piece to claim starts
  bool all_claimed_ = false;                   // the final piece has been claimed
  bool stop_ = false;
  std::exception_ptr error_;
  std::mutex spare_mutex_;
  std::vector<Batch> spare_;          // consumed batches, for reuse
  std::vector<StatementNote> notes_;  // the notes of the batch being delivered
  InstructionHead head_;              // the head of the statement being delivered
  Statement statement_;               // the statement being delivered
};

}  // namespace
std::size_t next_piece_start(std::string_view text, std::size_t from) {
  std::size_t at = from;
  while (at < text.size()) {
    // A line starting with '}': at `at` itself if a line starts there, else after a newline.
    std::size_t brace = at;
    if (at == 0 || text[at - 1] != '\n' || text[at] != '}') {
      brace = text.find("\n}", at == 0 ? 0 : at - 1);
      if (brace == std::string_view::npos) break;
      ++brace;
    }
    std::size_t newline = text.find('\n', brace);
    if (newline == std::string_view::npos || newline + 1 >= text.size()) break;
    std::size_t next = newline + 1;
    char c = text[next];
    if (c == '\n' || (!is_space(c) && c != '}' && c != '"')) return next;
    at = next;
  }
  return text.size();
}

SplitEnd split_statements(ByteSource& source, const SplitOptions& options,
                          const std::function<void(const Statement&)>& on_statement,
                          StatementFilter* filter) {
  constexpr std::size_t kPipelineMinBytes = std::size_t{4} << 20;
  constexpr int kMaxAutomaticScanners = 4;
  std::string_view whole = source.contiguous();
  int scanners = options.threads;
  if (scanners == 0) {
    unsigned cores = std::thread::hardware_concurrency();
    scanners = whole.size() >= kPipelineMinBytes && cores >= 2
                   ? std::min(static_cast<int>(cores), kMaxAutomaticScanners)
                   : 1;
  }
  if (!whole.empty() && scanners >= 2) {
    return Pipeline(source, options, scanners, on_statement, filter).run();
  }
  if (filter == nullptr) {
    Splitter splitter(source, options, [&](const Statement& s) { on_statement(s); });
    return splitter.run();
  }
  Splitter splitter(source, options, [&](const Statement& s) {
    StatementNote note;
    if (!filter->keep(s, note)) return;
    Statement noted = s;
    noted.note = &note;
    on_statement(noted);
  });
  SplitEnd end = splitter.run();
  end.pending = filter->pending();
  return end;
}

}  // namespace rtb::hlo
