// diff-configs' log reader on a 1 GB log (make bench). The log is generated once into a temporary
// directory, deleted at exit: the real TPU log testdata/configlog_maxtext_dpo_*.log (776 config
// lines among absl-prefixed step lines and warnings, about a quarter of its bytes are config
// lines) repeated until it passes 1 GiB, as a log of many restarts would be, which is the
// heavy case: every repetition is a dump to parse and compare. Baselines measured in the same run
// and reported as ratios: a plain read() of the same file (the bound any reader has) and a naive
// std::getline + std::regex reader of the first 64 MiB.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "rtb/base/io.h"
#include "rtb/logs/configlog.h"

namespace {

constexpr std::size_t kLogBytes = std::size_t{1} << 30;
constexpr std::size_t kRegexBytes = std::size_t{64} << 20;

// The generated log; the directory is removed when the program exits.
class GeneratedLog {
 public:
  GeneratedLog() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "rtb_configlog_perf_XXXXXX").string();
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (::mkdtemp(name.data()) == nullptr) std::perror("mkdtemp");
    dir_ = name.data();
    path_ = dir_ + "/generated.log";
    std::string unit = rtb::read_file(RTB_PERF_TESTDATA_DIR
                                      "/configlog_maxtext_dpo_qwen3-0.6b_tpu-v5p-8_train.log");
    std::FILE* out = std::fopen(path_.c_str(), "wb");
    while (size_ < kLogBytes) {
      std::fwrite(unit.data(), 1, unit.size(), out);
      size_ += unit.size();
      ++repeats_;
    }
    std::fclose(out);
  }
  ~GeneratedLog() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  const std::string& path() const { return path_; }
  std::size_t size() const { return size_; }
  std::size_t repeats() const { return repeats_; }

 private:
  std::string dir_, path_;
  std::size_t size_ = 0, repeats_ = 0;
};

const GeneratedLog& generated() {
  static const GeneratedLog log;
  return log;
}

// Reads the file with read() into a 4 MiB buffer; returns a byte sum so nothing is optimised away.
std::size_t plain_read(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  std::vector<char> buffer(4u << 20);
  std::size_t sum = 0;
  for (;;) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n <= 0) break;
    sum += static_cast<unsigned char>(buffer[static_cast<std::size_t>(n) - 1]);
  }
  ::close(fd);
  return sum;
}

// The naive reader: every line through std::regex; returns the number of config lines.
std::size_t getline_regex(const std::string& path, std::size_t bytes) {
  static const std::regex kLine("Config param ([A-Za-z0-9_.]+): (.*)$");
  std::ifstream in(path);
  std::string line;
  std::size_t read = 0, found = 0;
  std::smatch match;
  while (read < bytes && std::getline(in, line)) {
    read += line.size() + 1;
    if (std::regex_search(line, match, kLine)) ++found;
  }
  return found;
}

double seconds_of(const std::function<void()>& run) {
  auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void BM_ConfigLogRead1GB(benchmark::State& state) {
  const GeneratedLog& log = generated();
  // The baselines, once, in this run: throughput ratios below are against them.
  plain_read(log.path());  // warm the page cache
  double plain_s = seconds_of([&] { benchmark::DoNotOptimize(plain_read(log.path())); });
  double regex_s =
      seconds_of([&] { benchmark::DoNotOptimize(getline_regex(log.path(), kRegexBytes)); });
  double regex_bytes_per_s = static_cast<double>(kRegexBytes) / regex_s;
  double total_s = 0;
  std::size_t dumps = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    rtb::logs::ConfigLog result = rtb::logs::read_config_log(log.path());
    total_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    dumps = result.dumps.size();
    benchmark::DoNotOptimize(result.params.data());
  }
  double bytes_per_s =
      static_cast<double>(log.size()) * static_cast<double>(state.iterations()) / total_s;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * log.size()));
  state.counters["input_MB"] = static_cast<double>(log.size()) / 1e6;
  state.counters["dumps"] = static_cast<double>(dumps);
  state.counters["MB_per_s"] = bytes_per_s / 1e6;
  state.counters["plain_read_MB_per_s"] = static_cast<double>(log.size()) / plain_s / 1e6;
  state.counters["vs_plain_read"] = bytes_per_s / (static_cast<double>(log.size()) / plain_s);
  state.counters["regex_MB_per_s"] = regex_bytes_per_s / 1e6;
  state.counters["x_regex"] = bytes_per_s / regex_bytes_per_s;
}
BENCHMARK(BM_ConfigLogRead1GB)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

// --list-dumps keeps no values: the scan alone.
void BM_ConfigLogListDumps1GB(benchmark::State& state) {
  const GeneratedLog& log = generated();
  rtb::logs::ConfigLogOptions options;
  options.list_only = true;
  for (auto _ : state) {
    rtb::logs::ConfigLog result = rtb::logs::read_config_log(log.path(), options);
    benchmark::DoNotOptimize(result.dumps.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * log.size()));
}
BENCHMARK(BM_ConfigLogListDumps1GB)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void BM_BaselinePlainRead1GB(benchmark::State& state) {
  const GeneratedLog& log = generated();
  for (auto _ : state) benchmark::DoNotOptimize(plain_read(log.path()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * log.size()));
}
BENCHMARK(BM_BaselinePlainRead1GB)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void BM_BaselineGetlineRegex64MB(benchmark::State& state) {
  const GeneratedLog& log = generated();
  for (auto _ : state) benchmark::DoNotOptimize(getline_regex(log.path(), kRegexBytes));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kRegexBytes));
}
BENCHMARK(BM_BaselineGetlineRegex64MB)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace
