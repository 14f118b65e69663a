#include "perf_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

extern char** environ;

namespace rtb::perf {

ChildRun run_child(const std::vector<std::string>& args, bool discard_stdout) {
  ChildRun run;
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (discard_stdout) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  } else {
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  }
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  auto begin = std::chrono::steady_clock::now();
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    throw std::runtime_error("cannot run " + args[0]);
  }
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) run.output.append(buffer, n);
  ::close(pipe_fds[0]);
  struct rusage usage {};
  ::wait4(pid, &run.status, 0, &usage);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  run.max_rss_kib = usage.ru_maxrss;
  return run;
}

bool succeeded(const ChildRun& run) {
  return WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

std::optional<Medians> alternate(benchmark::State& state, const std::vector<std::string>& first,
                                 const std::vector<std::string>& second, int rounds,
                                 const char* failure) {
  std::vector<double> first_times, second_times;
  for (auto _ : state) {
    for (int round = 0; round < rounds; ++round) {
      ChildRun a = run_child(first, /*discard_stdout=*/true);
      ChildRun b = run_child(second, /*discard_stdout=*/true);
      if (!succeeded(a) || !succeeded(b)) {
        state.SkipWithError(failure);
        return std::nullopt;
      }
      first_times.push_back(a.seconds);
      second_times.push_back(b.seconds);
    }
  }
  return Medians{median(first_times), median(second_times)};
}

void set_reader_counters(benchmark::State& state, std::uint64_t bytes, double rss_floor_mib) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["file_MiB"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["GB_per_s"] = benchmark::Counter(static_cast<double>(bytes) / 1e9,
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_rss_MiB"] = peak_rss_mib();
  state.counters["rss_floor_MiB"] = rss_floor_mib;
}

double reset_peak_rss_mib() {
  std::ofstream("/proc/self/clear_refs") << "5";
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  }
  return 0;
}

double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  }
  return 0;
}

GeneratedFile::GeneratedFile(const std::string& prefix, const std::string& name,
                             const std::function<bool(std::string& chunk)>& more) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  path_ = (std::filesystem::path(dir_) / name).string();
  std::FILE* out = std::fopen(path_.c_str(), "wb");
  if (out == nullptr) throw std::runtime_error("cannot write " + path_);
  std::string chunk;
  bool again = true;
  while (again) {
    again = more(chunk);
    if (chunk.size() > (std::size_t{8} << 20) || !again) {
      std::fwrite(chunk.data(), 1, chunk.size(), out);
      bytes_ += chunk.size();
      chunk.clear();
    }
  }
  if (std::fflush(out) != 0 || ::fsync(::fileno(out)) != 0) {
    std::fclose(out);
    throw std::runtime_error("cannot write " + path_);
  }
  if (std::fclose(out) != 0) throw std::runtime_error("cannot write " + path_);
}

GeneratedFile::~GeneratedFile() {
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

}  // namespace rtb::perf
