#include "rtb/base/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rtb/base/error.h"

extern char** environ;

namespace rtb {
namespace {

// posix_spawn's file actions, released on every path out.
class FileActions {
 public:
  FileActions() { posix_spawn_file_actions_init(&actions_); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

}  // namespace

int run_process(const std::vector<std::string>& argv, ChildOutput output) {
  if (argv.empty()) fail("no program to run");
  std::vector<std::string> words = argv;  // posix_spawn takes char*, not const char*
  std::vector<char*> pointers;
  for (std::string& word : words) pointers.push_back(word.data());
  pointers.push_back(nullptr);
  FileActions actions;
  if (output == ChildOutput::kDiscard) {
    posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(actions.get(), STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, pointers[0], actions.get(), nullptr, pointers.data(), environ);
  if (rc != 0) fail("cannot start {}: {}", argv[0], std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail("waiting for {}: {}", argv[0], std::strerror(errno));
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

int run_quiet(const std::vector<std::string>& argv) {
  try {
    return run_process(argv, ChildOutput::kDiscard);
  } catch (const Error&) {
    return 127;
  }
}

}  // namespace rtb
