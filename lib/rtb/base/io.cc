#include "rtb/base/io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "rtb/base/error.h"

namespace rtb {
namespace {

// Owns a file descriptor; closes it on scope exit unless released.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

std::string display_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

std::string read_file(const std::string& path) {
  FileSource source(path, FileAccess::kStream);
  std::string content;
  char buffer[1 << 16];
  while (std::size_t n = source.read(buffer, sizeof buffer)) content.append(buffer, n);
  return content;
}

void for_each_line(const std::string& path,
                   const std::function<bool(std::string_view, std::size_t)>& on_line) {
  for_each_line(path, SIZE_MAX, [&](std::string_view line, std::size_t number, bool) {
    return on_line(line, number);
  });
}

void for_each_line(const std::string& path, std::size_t max_line_bytes,
                   const std::function<bool(std::string_view, std::size_t, bool)>& on_line) {
  FileSource source(path, FileAccess::kStream);
  std::vector<char> buffer(1 << 20);
  std::string carry;  // the start of a line split across reads, at most max_line_bytes
  bool carry_cut = false;
  std::size_t number = 0;
  while (std::size_t n = source.read(buffer.data(), buffer.size())) {
    std::string_view chunk(buffer.data(), n);
    while (!chunk.empty()) {
      std::size_t newline = chunk.find('\n');
      std::string_view piece = chunk.substr(0, newline);
      std::size_t room = max_line_bytes - carry.size();
      if (piece.size() > room) {
        carry_cut = true;
        piece = piece.substr(0, room);
      }
      if (newline == std::string_view::npos) {
        carry.append(piece);
        break;
      }
      chunk.remove_prefix(newline + 1);
      bool go_on;
      if (carry.empty()) {
        go_on = on_line(piece, ++number, carry_cut);
      } else {
        carry.append(piece);
        go_on = on_line(carry, ++number, carry_cut);
        carry.clear();
      }
      carry_cut = false;
      if (!go_on) return;
    }
  }
  if (!carry.empty()) on_line(carry, ++number, carry_cut);
}

// ---- byte sources ------------------------------------------------------------------------------

std::size_t ByteSource::read(char* buffer, std::size_t capacity) {
  std::uint64_t total = size();
  std::size_t n = static_cast<std::size_t>(
      std::min<std::uint64_t>(capacity, total - std::min(read_position_, total)));
  read_at(read_position_, std::as_writable_bytes(std::span(buffer, n)));
  read_position_ += n;
  return n;
}

std::uint64_t ByteSource::size() const {
  fail_at(name(), 0, "the size is not known before the end (give a regular file)");
}

void ByteSource::read_at(std::uint64_t offset, std::span<std::byte> out) const {
  (void)offset;
  (void)out;
  fail_at(name(), 0, "cannot be read at an offset (give a regular file)");
}

std::size_t MemorySource::read(char* buffer, std::size_t capacity) {
  std::size_t n = std::min({capacity, max_read_, text_.size() - read_offset_});
  if (n > 0) std::memcpy(buffer, text_.data() + read_offset_, n);
  read_offset_ += n;
  return n;
}

void MemorySource::read_at(std::uint64_t offset, std::span<std::byte> out) const {
  if (offset > text_.size() || out.size() > text_.size() - offset) {
    fail_at(name_, 0, "read past the end of the data (offset {}, {} bytes, size {})", offset,
            out.size(), text_.size());
  }
  if (!out.empty()) std::memcpy(out.data(), text_.data() + offset, out.size());
}

FileSource::FileSource(const std::string& path, FileAccess access) : name_(display_name(path)) {
  if (path == "-") {
    fd_ = STDIN_FILENO;
  } else {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail_at(name_, 0, "cannot open: {}", std::strerror(errno));
    owns_fd_ = true;
  }
  Fd owner(owns_fd_ ? fd_ : -1);  // closes the file if the checks below throw
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail_at(name_, 0, "cannot stat: {}", std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail_at(name_, 0, "is a directory");
  regular_ = S_ISREG(st.st_mode);
  if (access == FileAccess::kRandom && !regular_) {
    fail_at(name_, 0, "is not a regular file: it is read at offsets, so give a regular file");
  }
  size_ = regular_ ? static_cast<std::uint64_t>(st.st_size) : 0;
  owner.release();
  // Mapping saves the copy of every byte that read() makes; release() drops the pages behind the
  // reader, so the resident set stays bounded. If mapping fails, read() is used.
  if (access == FileAccess::kMapped && path != "-" && regular_ && size_ > 0) {
    void* address =
        ::mmap(nullptr, static_cast<std::size_t>(size_), PROT_READ, MAP_PRIVATE, fd_, 0);
    if (address != MAP_FAILED) {
      mapping_ = static_cast<char*>(address);
      mapped_size_ = static_cast<std::size_t>(size_);
      ::madvise(mapping_, mapped_size_, MADV_SEQUENTIAL);
      return;
    }
  }
#if defined(POSIX_FADV_SEQUENTIAL)
  if (access != FileAccess::kRandom && regular_) ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
}

FileSource::~FileSource() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapped_size_);
  if (owns_fd_) ::close(fd_);
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

std::uint64_t FileSource::size() const {
  if (!regular_) return ByteSource::size();
  return size_;
}

void FileSource::read_at(std::uint64_t offset, std::span<std::byte> out) const {
  if (!regular_) return ByteSource::read_at(offset, out);
  if (offset > size_ || out.size() > size_ - offset) {
    fail_at(name_, 0, "read past the end of the file (offset {}, {} bytes, size {})", offset,
            out.size(), size_);
  }
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n =
        ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_at(name_, 0, "cannot read: {}", std::strerror(errno));
    }
    if (n == 0) fail_at(name_, 0, "unexpected end of file (did it shrink while being read?)");
    done += static_cast<std::size_t>(n);
  }
}

namespace {

std::string directory_of(const std::string& path) {
  std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A name next to `path` that does not exist yet (for the moment between link and rename).
std::string temporary_name(const std::string& path, std::uint64_t attempt) {
  std::random_device random;
  std::uint64_t salt = (std::uint64_t{random()} << 32) ^ random() ^ attempt;
  return fmt::format("{}.tmp.{:012x}", path, salt & 0xffffffffffffULL);
}

// The descriptor a path names when it is one of the process's own descriptors: /dev/stdout,
// /dev/stderr, /dev/fd/N, /proc/self/fd/N. Such a path may lead to a regular file (`> out.txt`),
// which must still be written through the descriptor, never replaced by a rename (that would
// replace the /dev/stdout link itself).
std::optional<int> own_descriptor(std::string_view path) {
  if (path == "/dev/stdout") return STDOUT_FILENO;
  if (path == "/dev/stderr") return STDERR_FILENO;
  for (std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (path.substr(0, prefix.size()) != prefix) continue;
    std::string_view digits = path.substr(prefix.size());
    int fd = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), fd);
    if (ec == std::errc() && end == digits.data() + digits.size() && fd >= 0) return fd;
  }
  return std::nullopt;
}

}  // namespace

OutputStream::OutputStream(const std::string& path) : path_(path) {
  if (path == "-") {
    fd_ = STDOUT_FILENO;
    return;
  }
  if (std::optional<int> fd = own_descriptor(path)) {
    fd_ = *fd;  // not owned: the caller's descriptor stays open
    return;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) fail_at(path, 0, "is a directory");
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail_at(path, 0, "cannot open for writing: {}", std::strerror(errno));
    owns_fd_ = true;
    return;
  }
  // Same directory as the target, so the final rename stays on one file system. The mode is
  // what a plain open() would give (0666 less the umask).
  fd_ = ::open(directory_of(path).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd_ >= 0) {
    owns_fd_ = true;
    unnamed_ = true;
    return;
  }
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
    fail_at(path, 0, "cannot create the output: {}", std::strerror(errno));
  }
  std::string temp = path + ".tmp.XXXXXX";
  std::vector<char> temp_name(temp.begin(), temp.end());
  temp_name.push_back('\0');
  fd_ = ::mkstemp(temp_name.data());
  if (fd_ < 0) fail_at(path, 0, "cannot create a temporary file: {}", std::strerror(errno));
  owns_fd_ = true;
  temp_path_ = temp_name.data();
  // mkstemp creates 0600; give the file the mode a plain open() would have. Reading the umask
  // means setting it; it is put back at once.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd_, 0666 & ~mask);
}

OutputStream::~OutputStream() {
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void OutputStream::write(std::span<const std::byte> bytes) {
  const std::string name = path_ == "-" ? std::string("<stdout>") : path_;
  while (!bytes.empty()) {
    ssize_t n = ::write(fd_, bytes.data(), std::min<std::size_t>(bytes.size(), 1 << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_at(name, 0, "cannot write: {}", std::strerror(errno));
    }
    bytes = bytes.subspan(static_cast<std::size_t>(n));
    position_ += static_cast<std::uint64_t>(n);
  }
}

namespace {

// Holds back the signals that stop a tool (Ctrl-C, kill, a closed terminal) while the output is
// being put in place, so that they take effect after the rename, never between the link and
// the rename. Only SIGKILL can still land there (leaving a complete `.tmp.` file, never a partial
// target).
class StopSignalsHeld {
 public:
  StopSignalsHeld() {
    sigset_t held;
    sigemptyset(&held);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&held, sig);
    ::pthread_sigmask(SIG_BLOCK, &held, &previous_);
  }
  ~StopSignalsHeld() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  StopSignalsHeld(const StopSignalsHeld&) = delete;
  StopSignalsHeld& operator=(const StopSignalsHeld&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace

void OutputStream::commit() {
  if (committed_) return;
  if (unnamed_ || !temp_path_.empty()) {
    if (::fsync(fd_) != 0) fail_at(path_, 0, "cannot write: {}", std::strerror(errno));
  }
  StopSignalsHeld held;
  if (unnamed_) {
    std::string proc_path = fmt::format("/proc/self/fd/{}", fd_);
    auto link_as = [&](const std::string& name) {
      return ::linkat(AT_FDCWD, proc_path.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0;
    };
    // A new file gets its name in one step. An existing one cannot be replaced by link(): the
    // file gets a temporary name, then rename() replaces the target atomically.
    if (link_as(path_)) {
      unnamed_ = false;
    } else if (errno != EEXIST) {
      fail_at(path_, 0, "cannot name the output: {}", std::strerror(errno));
    }
    for (std::uint64_t attempt = 0; unnamed_ && temp_path_.empty(); ++attempt) {
      std::string candidate = temporary_name(path_, attempt);
      if (link_as(candidate)) {
        temp_path_ = candidate;
      } else if (errno != EEXIST || attempt > 100) {
        fail_at(path_, 0, "cannot name the output: {}", std::strerror(errno));
      }
    }
  }
  if (owns_fd_) {
    int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) fail_at(path_, 0, "cannot write: {}", std::strerror(errno));
  }
  if (!temp_path_.empty() && ::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    fail_at(path_, 0, "cannot replace: {}", std::strerror(errno));
  }
  committed_ = true;
}

void write_output(const std::string& path, std::string_view content) {
  OutputStream out(path);
  out.write(content);
  out.commit();
}

std::string read_prefix(ByteSource& source, std::size_t bytes) {
  std::string prefix(bytes, '\0');
  std::size_t have = 0;
  while (have < prefix.size()) {
    std::size_t n = source.read(prefix.data() + have, prefix.size() - have);
    if (n == 0) break;
    have += n;
  }
  prefix.resize(have);
  return prefix;
}

std::size_t PrefixedSource::read(char* buffer, std::size_t capacity) {
  if (at_ < prefix_.size()) {
    std::size_t n = std::min(capacity, prefix_.size() - at_);
    std::memcpy(buffer, prefix_.data() + at_, n);
    at_ += n;
    return n;
  }
  return inner_->read(buffer, capacity);
}

SpooledBytes::SpooledBytes(int fd, std::size_t size, const std::string& name) : size_(size) {
  if (size == 0) return;
  void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (address == MAP_FAILED) fail_at(name, 0, "cannot map the input: {}", std::strerror(errno));
  data_ = static_cast<const char*>(address);
}

SpooledBytes::~SpooledBytes() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

std::shared_ptr<const SpooledBytes> spool(std::string_view prefix, ByteSource& source,
                                          const std::string& name) {
  std::FILE* file = std::tmpfile();
  if (file == nullptr) fail_at(name, 0, "cannot create a temporary file: {}", std::strerror(errno));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(file, &std::fclose);
  std::size_t total = 0;
  auto write = [&](const char* data, std::size_t size) {
    if (size > 0 && std::fwrite(data, 1, size, file) != size) {
      fail_at(name, 0, "cannot write a temporary file: {}", std::strerror(errno));
    }
    total += size;
  };
  write(prefix.data(), prefix.size());
  std::vector<char> block(std::size_t{1} << 20);
  while (std::size_t n = source.read(block.data(), block.size())) write(block.data(), n);
  if (std::fflush(file) != 0) fail_at(name, 0, "cannot write a temporary file");
  return std::make_shared<const SpooledBytes>(::fileno(file), total, name);
}

}  // namespace rtb
