#include "rtb/base/io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
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

int open_input(const std::string& path) {
  if (path == "-") return STDIN_FILENO;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_at(path, 0, "cannot open: {}", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail_at(path, 0, "is a directory");
  }
  return fd;
}

}  // namespace

std::string display_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

std::string read_file(const std::string& path) {
  int raw = open_input(path);
  Fd owner(path == "-" ? -1 : raw);
  std::string content;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(raw, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_at(display_name(path), 0, "cannot read: {}", std::strerror(errno));
    }
    if (n == 0) break;
    content.append(buffer, static_cast<std::size_t>(n));
  }
  return content;
}

void for_each_line(const std::string& path,
                   const std::function<bool(std::string_view, std::size_t)>& on_line) {
  int raw = open_input(path);
  Fd owner(path == "-" ? -1 : raw);
  std::vector<char> buffer(1 << 20);
  std::string carry;  // a line split across two reads
  std::size_t number = 0;
  for (;;) {
    ssize_t n = ::read(raw, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_at(display_name(path), 0, "cannot read: {}", std::strerror(errno));
    }
    if (n == 0) break;
    std::string_view chunk(buffer.data(), static_cast<std::size_t>(n));
    while (!chunk.empty()) {
      std::size_t newline = chunk.find('\n');
      if (newline == std::string_view::npos) {
        carry.append(chunk);
        break;
      }
      std::string_view line = chunk.substr(0, newline);
      chunk.remove_prefix(newline + 1);
      ++number;
      bool go_on;
      if (carry.empty()) {
        go_on = on_line(line, number);
      } else {
        carry.append(line);
        go_on = on_line(carry, number);
        carry.clear();
      }
      if (!go_on) return;
    }
  }
  if (!carry.empty()) on_line(carry, ++number);
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

}  // namespace rtb
