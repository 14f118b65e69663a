#include "rtb/base/io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/error.h"

namespace rtb {
namespace {

namespace fs = std::filesystem;

class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rtb_io_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
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

TEST(ErrorTest, FormatsFileAndLine) {
  EXPECT_STREQ(Error("a.yaml", 12, "bad").what(), "a.yaml:12: bad");
  EXPECT_STREQ(Error("a.yaml", 0, "bad").what(), "a.yaml: bad");
  EXPECT_STREQ(Error("bad").what(), "bad");
  EXPECT_STREQ(Error("bad").in_file("b.txt", 3).what(), "b.txt:3: bad");
  EXPECT_STREQ(Error("a", 1, "bad").in_file("b.txt", 3).what(), "a:1: bad");
}

}  // namespace
}  // namespace rtb
