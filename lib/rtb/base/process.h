// Child processes: run a program found on PATH with the tool's own environment and wait for it.
// The only place the library spawns anything (aot-check runs its compile script and probes Python).
#pragma once

#include <string>
#include <vector>

namespace rtb {

// Where a child's stdout and stderr go.
enum class ChildOutput {
  kInherit,  // the tool's own stdout and stderr
  kDiscard,  // /dev/null
};

// Runs `argv` (argv[0] looked up on PATH, stdin inherited) and waits for it. Returns its exit
// status, 128 + N when signal N ended it. Throws rtb::Error when `argv` is empty or the program
// cannot be started.
int run_process(const std::vector<std::string>& argv, ChildOutput output = ChildOutput::kInherit);

// Runs `argv` with its output discarded; 127 (as a shell reports it) when it cannot be started.
int run_quiet(const std::vector<std::string>& argv);

}  // namespace rtb
