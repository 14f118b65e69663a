#include "rtb/base/io.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "rtb/base/error.h"
#include "test_util.h"

namespace rtb {
namespace {

namespace fs = std::filesystem;

class IoTest : public ::testing::Test {
 protected:
  test::TempDir temp_{"rtb_io_test"};
  fs::path dir_ = temp_.path();
};

TEST_F(IoTest, WriteOutputReplacesAtomicallyAndLeavesNoTemporary) {
  fs::path out = dir_ / "out.yaml";
  write_output(out, "old\n");
  write_output(out, "new\n");
  EXPECT_EQ(read_file(out), "new\n");
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(IoTest, WriteOutputGivesTheUsualMode) {
  fs::path out = dir_ / "mode.yaml";
  write_output(out, "x");
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

TEST_F(IoTest, WriteOutputIntoMissingDirectoryFailsWithPath) {
  fs::path out = dir_ / "missing" / "out.yaml";
  try {
    write_output(out, "x");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), out.string());
  }
}

TEST_F(IoTest, WriteOutputToDeviceWritesDirectly) {
  // /dev/null is not a regular file: it must be written, never renamed over.
  write_output("/dev/null", "discarded");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

int entries_in(const fs::path& dir) {
  int count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++count;
  return count;
}

TEST_F(IoTest, AbandonedOutputStreamKeepsTheOldFileAndLeavesNothing) {
  fs::path out = dir_ / "out.npz";
  write_output(out, "good");
  {
    OutputStream stream(out);
    stream.write(std::string_view("partial"));
    EXPECT_EQ(stream.position(), 7u);
    // Destroyed without commit(), as when an error unwinds the stack.
  }
  EXPECT_EQ(read_file(out), "good");
  EXPECT_EQ(entries_in(dir_), 1);
}

TEST_F(IoTest, KilledWriterKeepsTheOldFileAndLeavesNoTemporary) {
  // A process killed in the middle of a write (SIGKILL: no handler, no destructor runs) must leave
  // the old file as it was, and no temporary file next to it.
  fs::path out = dir_ / "out.txt";
  write_output(out, "good");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    OutputStream stream(out);
    stream.write(std::string(1 << 20, 'x'));
    char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
    ::pause();  // killed here, before commit()
    ::_exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(read_file(out), "good");
  EXPECT_EQ(entries_in(dir_), 1);
}

TEST_F(IoTest, OutputStreamCreatesAMissingFileWithTheWholeContent) {
  fs::path out = dir_ / "new.bin";
  OutputStream stream(out);
  stream.write(std::string_view("abc"));
  EXPECT_FALSE(fs::exists(out)) << "the name must appear only on commit";
  stream.commit();
  EXPECT_EQ(read_file(out), "abc");
  EXPECT_EQ(entries_in(dir_), 1);
}

TEST_F(IoTest, OutputIntoADirectoryIsRefused) {
  try {
    write_output(dir_, "x");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "is a directory");
  }
}

TEST_F(IoTest, OwnDescriptorPathsAreWrittenThroughEvenWhenTheyLeadToAFile) {
  // As in `tool -o /dev/stdout > out.txt`: fd 1 is a regular file, and the path must be written
  // through the descriptor, not replaced by a rename (which cannot work on /proc, and on
  // /dev/stdout would replace the link itself). /proc/self/fd/N is used here because a wrong
  // implementation fails on it without damaging the machine.
  fs::path out = dir_ / "redirected.txt";
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ::dup2(fd, 5) < 0) ::_exit(3);
    try {
      write_output("/proc/self/fd/5", "through fd 5\n");
      OutputStream again("/dev/fd/5");
      again.write(std::string_view("and again\n"));
      again.commit();
    } catch (...) {
      ::_exit(4);
    }
    ::_exit(::fcntl(5, F_GETFD) >= 0 ? 0 : 5);  // the descriptor is still open
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(read_file(out), "through fd 5\nand again\n");
  EXPECT_EQ(entries_in(dir_), 1);
}

TEST_F(IoTest, ReadMissingFileNamesIt) {
  try {
    read_file((dir_ / "nope").string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope: cannot open"), std::string::npos) << e.what();
  }
}

TEST_F(IoTest, ForEachLineNumbersLinesAndKeepsTheLastUnterminatedOne) {
  fs::path in = dir_ / "lines.txt";
  std::ofstream(in) << "a\n\nc\r\nlast";
  std::vector<std::pair<std::string, std::size_t>> seen;
  for_each_line(in, [&](std::string_view line, std::size_t number) {
    seen.emplace_back(std::string(line), number);
    return true;
  });
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0], std::make_pair(std::string("a"), std::size_t{1}));
  EXPECT_EQ(seen[1].first, "");
  EXPECT_EQ(seen[2].first, "c\r");
  EXPECT_EQ(seen[3], std::make_pair(std::string("last"), std::size_t{4}));
}

TEST_F(IoTest, ForEachLineHandlesLinesLongerThanTheReadBuffer) {
  fs::path in = dir_ / "long.txt";
  std::string long_line(3 << 20, 'x');
  std::ofstream(in) << "short\n" << long_line << "\nend\n";
  std::vector<std::size_t> lengths;
  for_each_line(in, [&](std::string_view line, std::size_t) {
    lengths.push_back(line.size());
    return true;
  });
  EXPECT_EQ(lengths, (std::vector<std::size_t>{5, long_line.size(), 3}));
}

TEST_F(IoTest, ForEachLineCutsLinesAtTheLimitAndSaysSo) {
  fs::path in = dir_ / "cut.txt";
  std::string long_line(3 << 20, 'y');  // longer than one read: cut inside the carry
  std::ofstream(in) << "0123456789\nabc\n" << long_line << "\ntail-longer";
  std::vector<std::tuple<std::string, std::size_t, bool>> seen;
  for_each_line(in, 4, [&](std::string_view line, std::size_t number, bool cut) {
    seen.emplace_back(std::string(line), number, cut);
    return true;
  });
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0], std::make_tuple(std::string("0123"), std::size_t{1}, true));
  EXPECT_EQ(seen[1], std::make_tuple(std::string("abc"), std::size_t{2}, false));
  EXPECT_EQ(seen[2], std::make_tuple(std::string("yyyy"), std::size_t{3}, true));
  EXPECT_EQ(seen[3], std::make_tuple(std::string("tail"), std::size_t{4}, true));
}

TEST_F(IoTest, ForEachLineStopsWhenAsked) {
  fs::path in = dir_ / "stop.txt";
  std::ofstream(in) << "a\nb\nc\n";
  std::size_t calls = 0;
  for_each_line(in, [&](std::string_view, std::size_t) { return ++calls < 2; });
  EXPECT_EQ(calls, 2u);
}

// ---- byte sources ----

std::string read_in_order(ByteSource& source, std::size_t block) {
  std::string out;
  std::string buffer(block, '\0');
  while (std::size_t n = source.read(buffer.data(), buffer.size())) out.append(buffer, 0, n);
  return out;
}

std::string read_at(const ByteSource& source, std::uint64_t offset, std::size_t bytes) {
  std::string out(bytes, '\0');
  source.read_at(offset, std::as_writable_bytes(std::span(out.data(), out.size())));
  return out;
}

TEST(MemorySource, ReadsInOrderAndByPosition) {
  const std::string text = "HloModule m\nline two\n";
  MemorySource source(text, "m.txt");
  EXPECT_EQ(source.name(), "m.txt");
  EXPECT_EQ(source.contiguous(), text);
  EXPECT_EQ(source.size(), text.size());
  EXPECT_EQ(read_at(source, 4, 6), "odule ");
  EXPECT_EQ(read_in_order(source, 5), text);
  EXPECT_EQ(test::what_of([&] { read_at(source, text.size() - 2, 3); }),
            "m.txt: read past the end of the data (offset 19, 3 bytes, size 21)");
}

TEST(MemorySource, MaxReadLimitsEachReadAndHidesTheContiguousView) {
  const std::string text(100, 'z');
  MemorySource source(text, "t", 7);
  EXPECT_TRUE(source.contiguous().empty());
  char buffer[64];
  EXPECT_EQ(source.read(buffer, sizeof buffer), 7u);
  EXPECT_EQ(read_in_order(source, 64).size(), 93u);
}

TEST(MemorySource, TakesBytes) {
  const std::array<std::byte, 3> bytes{std::byte{1}, std::byte{0}, std::byte{255}};
  MemorySource source(std::span<const std::byte>(bytes), "b");
  EXPECT_EQ(source.size(), 3u);
  EXPECT_EQ(read_at(source, 1, 2), std::string("\0\xff", 2));
}

// A source that only knows how to read by position: reading in order comes from the base.
class PositionOnlySource final : public ByteSource {
 public:
  explicit PositionOnlySource(std::string text) : text_(std::move(text)) {}
  const std::string& name() const override { return name_; }
  std::uint64_t size() const override { return text_.size(); }
  void read_at(std::uint64_t offset, std::span<std::byte> out) const override {
    ASSERT_LE(offset + out.size(), text_.size());
    std::memcpy(out.data(), text_.data() + offset, out.size());
  }

 private:
  std::string text_;
  std::string name_ = "positions";
};

TEST(ByteSource, ReadsInOrderThroughReadAtByDefault) {
  PositionOnlySource source("abcdefghij");
  EXPECT_TRUE(source.contiguous().empty());
  EXPECT_EQ(read_in_order(source, 3), "abcdefghij");
  char buffer[4];
  EXPECT_EQ(source.read(buffer, sizeof buffer), 0u);  // stays at the end
}

TEST_F(IoTest, FileSourceReadsTheSameBytesWhateverTheAccess) {
  fs::path in = dir_ / "bytes.bin";
  std::string text;
  for (int i = 0; i < 300000; ++i) text += static_cast<char>(i * 7 % 256);
  std::ofstream(in, std::ios::binary) << text;
  for (FileAccess access : {FileAccess::kStream, FileAccess::kMapped, FileAccess::kRandom}) {
    FileSource source(in.string(), access);
    EXPECT_EQ(source.name(), in.string());
    EXPECT_EQ(source.size(), text.size());
    EXPECT_EQ(source.contiguous().empty(), access != FileAccess::kMapped);
    EXPECT_EQ(read_at(source, 1000, 17), text.substr(1000, 17));
    EXPECT_EQ(read_in_order(source, 4096), text);
    source.release(text.size());  // a no-op without a mapping; drops the pages with one
    EXPECT_EQ(
        test::what_of([&] { read_at(source, text.size() - 1, 2); }),
        in.string() + ": read past the end of the file (offset 299999, 2 bytes, size 300000)");
  }
}

TEST_F(IoTest, FileSourceMapsOnlyNonEmptyFiles) {
  fs::path in = dir_ / "empty.txt";
  std::ofstream(in) << "";
  FileSource source(in.string(), FileAccess::kMapped);
  EXPECT_TRUE(source.contiguous().empty());
  char buffer[8];
  EXPECT_EQ(source.read(buffer, sizeof buffer), 0u);
}

TEST_F(IoTest, FileSourceRefusesWhatItCannotRead) {
  std::string dir = dir_.string();
  for (FileAccess access : {FileAccess::kStream, FileAccess::kMapped, FileAccess::kRandom}) {
    EXPECT_EQ(test::what_of([&] { FileSource source(dir, access); }), dir + ": is a directory");
    EXPECT_THAT(test::what_of([&] { FileSource source(dir + "/nope", access); }),
                ::testing::StartsWith(dir + "/nope: cannot open: "));
  }
}

TEST_F(IoTest, PipesAreReadInOrderButNotByPosition) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "piped\n", 6), 6);
  ::close(fds[1]);
  std::string path = "/dev/fd/" + std::to_string(fds[0]);
  EXPECT_THAT(test::what_of([&] { FileSource source(path, FileAccess::kRandom); }),
              ::testing::HasSubstr("is not a regular file"));
  {
    FileSource source(path, FileAccess::kMapped);
    EXPECT_TRUE(source.contiguous().empty());
    EXPECT_THAT(test::what_of([&] { (void)source.size(); }), ::testing::HasSubstr("not known"));
    EXPECT_THAT(test::what_of([&] { read_at(source, 0, 1); }),
                ::testing::HasSubstr("cannot be read at an offset"));
    EXPECT_EQ(read_in_order(source, 2), "piped\n");
  }
  ::close(fds[0]);
}

TEST(ErrorTest, FormatsFileAndLine) {
  EXPECT_STREQ(Error("a.yaml", 12, "bad").what(), "a.yaml:12: bad");
  EXPECT_STREQ(Error("a.yaml", 0, "bad").what(), "a.yaml: bad");
  EXPECT_STREQ(Error("bad").what(), "bad");
  EXPECT_STREQ(Error("bad").in_file("b.txt", 3).what(), "b.txt:3: bad");
  EXPECT_STREQ(Error("a", 1, "bad").in_file("b.txt", 3).what(), "a:1: bad");
}

TEST(Spool, CopiesAPrefixAndTheRestToAMappedTemporaryFile) {
  std::string rest(5000, 'r');
  auto inner = std::make_unique<MemorySource>(rest, "pipe", 100);
  PrefixedSource prefixed("ab", std::move(inner));
  EXPECT_EQ(prefixed.name(), "pipe");
  std::shared_ptr<const SpooledBytes> spooled = spool("<", prefixed, "pipe");
  EXPECT_EQ(spooled->bytes(), "<ab" + rest);
  MemorySource parts(rest, "pipe", 7);
  EXPECT_EQ(read_prefix(parts, 20), rest.substr(0, 20));
  MemorySource short_one("ab", "short");
  EXPECT_EQ(read_prefix(short_one, 20), "ab");
  MemorySource empty(std::string_view(), "empty");
  EXPECT_EQ(spool("", empty, "empty")->bytes(), "");
}

}  // namespace
}  // namespace rtb
