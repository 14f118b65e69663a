// Input and output files. `-` means stdin (inputs) or stdout (outputs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace rtb {

// Reads a whole (small) input file, or stdin for "-". Throws Error naming the path.
std::string read_file(const std::string& path);

// The name used for `path` in messages: "<stdin>" for "-", else the path itself.
std::string display_name(const std::string& path);

// Reads a (possibly huge) input line by line with bounded memory, calling `on_line` with each
// line without its '\n' (a trailing '\r' is kept) and its 1-based number. `on_line` returns
// false to stop early. Throws Error on read errors.
void for_each_line(const std::string& path,
                   const std::function<bool(std::string_view line, std::size_t number)>& on_line);

// Writes an output file sequentially, so that a reader never sees it half-written:
// - "-" goes to stdout; /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N are written
//   through that descriptor of this process, whatever it leads to (a terminal, a pipe, a file);
// - an existing path that is not a regular file (a pipe, a terminal, /dev/stdout, /dev/null) is
//   written directly, never renamed over;
// - anything else is written to an unnamed temporary file (O_TMPFILE) in the target's directory
//   and given its name by commit() (a link, then one rename over an existing `path`). Until then
//   the old file is intact, and a run that fails, is abandoned (destructor without commit) or is
//   killed, even by SIGKILL, leaves neither a partial file nor a stray temporary one. commit()
//   holds SIGINT, SIGTERM, SIGHUP and SIGQUIT until the rename is done; only a SIGKILL between
//   link and rename (microseconds) leaves a complete `path.tmp.*` beside the old file. On a file
//   system without O_TMPFILE a named `path.tmp.XXXXXX` is used instead (removed on failure; a
//   kill while writing leaves it behind).
// Throws Error naming the path on failure.
class OutputStream {
 public:
  explicit OutputStream(const std::string& path);
  ~OutputStream();
  OutputStream(const OutputStream&) = delete;
  OutputStream& operator=(const OutputStream&) = delete;
  void write(std::span<const std::byte> bytes);
  void write(std::string_view text) { write(std::as_bytes(std::span(text.data(), text.size()))); }
  // Bytes written so far.
  std::uint64_t position() const { return position_; }
  // Flushes to disk and moves the file into place (no-op for stdout and devices beyond closing).
  void commit();

 private:
  std::string path_;
  std::string temp_path_;  // named temporary file (fallback only)
  int fd_ = -1;
  bool owns_fd_ = false;
  bool unnamed_ = false;  // fd_ is an O_TMPFILE file, linked into place by commit()
  bool committed_ = false;
  std::uint64_t position_ = 0;
};

// Writes `content` to `path` through an OutputStream (see there: atomic for regular files).
void write_output(const std::string& path, std::string_view content);

}  // namespace rtb
