// Input and output files. `-` means stdin (inputs) or stdout (outputs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

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
// The same with lines cut to their first `max_line_bytes` bytes (`cut` tells), so that memory
// stays bounded whatever the input holds.
void for_each_line(
    const std::string& path, std::size_t max_line_bytes,
    const std::function<bool(std::string_view line, std::size_t number, bool cut)>& on_line);

// ---- byte sources ----------------------------------------------------------------------------
// Where an input's bytes come from: a file (or stdin), text in memory, or a reader's own
// composition (a payload built in memory). Readers take them in one of two ways, and every
// source offers both, so one reader's tests can feed another's source:
//   - in order (the HLO splitter, line readers): read() copies the next block into the caller's
//     buffer; contiguous() hands over the whole input without a copy when the source holds it
//     (text in memory, a memory-mapped file), and release() lets a mapping drop what is behind
//     the reader. One virtual call per block or one for the whole input, never one per byte.
//   - by position (zip/npz, whose index is at the end): size() and read_at(), as pread does; a
//     huge file is never mapped or slurped for this, so memory stays bounded.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // For messages ("<stdin>" for stdin).
  virtual const std::string& name() const = 0;

  // Reads up to `capacity` bytes that follow the previous read into `buffer`; returns 0 at the
  // end. Throws rtb::Error. By default reads by position from where the previous read ended.
  virtual std::size_t read(char* buffer, std::size_t capacity);
  // The whole input as one region when the source has it without copying, else empty (then
  // read() is the way in). Reading by contiguous() and by read() are not mixed.
  virtual std::string_view contiguous() { return {}; }
  // The reader will not look at bytes before `offset` of contiguous() again.
  virtual void release(std::size_t offset) { (void)offset; }

  // Total bytes. Throws rtb::Error when the source cannot tell before the end (a pipe).
  virtual std::uint64_t size() const;
  // Fills `out` with the bytes at [offset, offset + out.size()). Throws rtb::Error for bytes
  // outside the source or a source without random access (a pipe).
  virtual void read_at(std::uint64_t offset, std::span<std::byte> out) const;

 private:
  std::uint64_t read_position_ = 0;  // for the default read()
};

// Text or bytes in memory (borrowed: they must outlive the source).
class MemorySource final : public ByteSource {
 public:
  // `max_read` limits each read() so tests can exercise input split across reads; with a limit
  // the source also stops offering contiguous(), so the read() path is the one tested.
  MemorySource(std::string_view text, std::string name, std::size_t max_read = SIZE_MAX)
      : text_(text), name_(std::move(name)), max_read_(max_read) {}
  MemorySource(std::span<const std::byte> bytes, std::string name, std::size_t max_read = SIZE_MAX)
      : MemorySource(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                     std::move(name), max_read) {}
  const std::string& name() const override { return name_; }
  std::size_t read(char* buffer, std::size_t capacity) override;
  std::string_view contiguous() override {
    return max_read_ == SIZE_MAX ? text_ : std::string_view();
  }
  std::uint64_t size() const override { return text_.size(); }
  void read_at(std::uint64_t offset, std::span<std::byte> out) const override;

 private:
  std::string_view text_;
  std::size_t read_offset_ = 0;
  std::string name_;
  std::size_t max_read_;
};

// How a FileSource is going to be read.
enum class FileAccess {
  kStream,  // in order with read() (blocks of the caller's size); any file, pipe or stdin
  kMapped,  // in order; a non-empty regular file (not stdin) is memory-mapped read-only for
            // contiguous() and released behind the reader, anything else is read in blocks
  kRandom,  // by position (pread); the file must be a regular file, else the constructor throws
};

class FileSource final : public ByteSource {
 public:
  // Opens `path` ("-": stdin). Throws rtb::Error naming it (cannot open, a directory, not a
  // regular file for kRandom).
  FileSource(const std::string& path, FileAccess access);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  const std::string& name() const override { return name_; }
  std::size_t read(char* buffer, std::size_t capacity) override;
  std::string_view contiguous() override;
  void release(std::size_t offset) override;
  std::uint64_t size() const override;
  void read_at(std::uint64_t offset, std::span<std::byte> out) const override;

 private:
  std::string name_;
  int fd_ = -1;
  bool owns_fd_ = false;
  bool regular_ = false;  // a regular file: size known, pread works
  std::uint64_t size_ = 0;
  char* mapping_ = nullptr;
  std::size_t mapped_size_ = 0;
  std::size_t released_ = 0;  // bytes at the start of the mapping already dropped
};

// Up to the first `bytes` bytes of `source` read in order (fewer when it ends first), e.g. to
// detect a format before reading on.
std::string read_prefix(ByteSource& source, std::size_t bytes);

// Hands out `prefix` (bytes already read from `inner`, e.g. to detect a format), then the rest
// of `inner`, in order (read() only).
class PrefixedSource final : public ByteSource {
 public:
  PrefixedSource(std::string prefix, std::unique_ptr<ByteSource> inner)
      : prefix_(std::move(prefix)), inner_(std::move(inner)) {}
  const std::string& name() const override { return inner_->name(); }
  std::size_t read(char* buffer, std::size_t capacity) override;

 private:
  std::string prefix_;
  std::size_t at_ = 0;
  std::unique_ptr<ByteSource> inner_;
};

// Bytes copied to an unlinked temporary file and mapped read-only: an input from a pipe or a
// decompressed one that a reader needs by position, kept out of the resident set.
class SpooledBytes {
 public:
  SpooledBytes(int fd, std::size_t size, const std::string& name);
  ~SpooledBytes();
  SpooledBytes(const SpooledBytes&) = delete;
  SpooledBytes& operator=(const SpooledBytes&) = delete;
  std::string_view bytes() const { return {data_, size_}; }

 private:
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

// Copies `prefix` (bytes already read from `source`, e.g. to detect a format) and the rest of
// `source` to an unlinked temporary file (std::tmpfile) and maps it. Throws rtb::Error
// naming `name`.
std::shared_ptr<const SpooledBytes> spool(std::string_view prefix, ByteSource& source,
                                          const std::string& name);

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
