#include "rtb/hlo/scan.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "rtb/base/error.h"
#include "rtb/hlo/pipeline.h"
#include "rtb/hlo/splitter.h"
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

// ---- statement completeness ---------------------------------------------------------------------

bool instruction_reached_opcode(std::string_view text) {
  InstructionHead head;
  return parse_instruction_head(text, head) != HeadStatus::kIncomplete;
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
    return split_pipelined(source, options, scanners, on_statement, filter);
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
