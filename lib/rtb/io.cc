#include "rtb/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "rtb/error.h"

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

void write_all(int fd, std::string_view content, const std::string& name) {
  while (!content.empty()) {
    ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_at(name, 0, "cannot write: {}", std::strerror(errno));
    }
    content.remove_prefix(static_cast<std::size_t>(n));
  }
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

void write_output(const std::string& path, std::string_view content) {
  if (path == "-") {
    write_all(STDOUT_FILENO, content, "<stdout>");
    return;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) fail_at(path, 0, "is a directory");
    Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (fd.get() < 0) fail_at(path, 0, "cannot open for writing: {}", std::strerror(errno));
    write_all(fd.get(), content, path);
    return;
  }
  // Temporary file next to the target, so the rename stays on one file system.
  std::string temp = path + ".tmp.XXXXXX";
  std::vector<char> temp_name(temp.begin(), temp.end());
  temp_name.push_back('\0');
  Fd fd(::mkstemp(temp_name.data()));
  if (fd.get() < 0) fail_at(path, 0, "cannot create a temporary file: {}", std::strerror(errno));
  std::string temp_path(temp_name.data());
  try {
    write_all(fd.get(), content, path);
    // mkstemp creates 0600; give the file the mode a plain open() would have.
    mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd.get(), 0666 & ~mask);
    if (::fsync(fd.get()) != 0) fail_at(path, 0, "cannot write: {}", std::strerror(errno));
    if (::close(fd.release()) != 0) fail_at(path, 0, "cannot write: {}", std::strerror(errno));
    if (::rename(temp_path.c_str(), path.c_str()) != 0) {
      fail_at(path, 0, "cannot replace: {}", std::strerror(errno));
    }
  } catch (...) {
    ::unlink(temp_path.c_str());
    throw;
  }
}

}  // namespace rtb
