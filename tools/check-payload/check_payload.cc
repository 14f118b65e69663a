// check-payload: builds the bench's synthetic micro-batch with calibrated MoE routing, checks any
// payload file against the spec, measures routing loads of a real run (giving a target table),
// and counts attention tiles per context rank for padding at the end or first.
#include <string>
#include <vector>

#include "check-payload/subcommands.h"
#include "common/mains.h"
#include "common/tool.h"

namespace rtb::tool {
namespace {

constexpr const char* kExamples =
    R"(  check-payload build --rows 4 --tokens 8192 --layers 60 --topk 10 --experts 512 -o payload.npz
  check-payload build --rows 2 --tokens 4096 --layers 4 --topk 2 --experts 16 \
      --routing-targets 1.5,2,4,8 --pad-position start --pad-align 1024 --svg loads.svg
  check-payload build --rows 2 --tokens 4096 --layers 4 --topk 2 --experts 16 \
      --routing-targets 1,2,3,4 --segments 4 --max-prompt-length 256 -o prompts.npz
  check-payload verify payload.npz                 # settings from the file; exit 1 if a check fails
  check-payload verify old.npz --experts 512 --routing-targets my-targets.txt --routing-scale 0.5
  check-payload measure routed_experts.npy --ep 2 -o my-targets.txt
  check-payload tiles --cp 4 --block-q 1024 --block-kv 4096 --dkv-block-q 2048 --dkv-block-kv 2048 \
      --rows 1 --tokens 65536                      # the bench's 60,948-token rows
  check-payload tiles payload.npz --cp 4 --block-q 1024 --block-kv 4096 --json
)";

}  // namespace

int check_payload_main(int argc, char** argv) {
  Tool tool(
      {"check-payload",
       "The bench payload: a synthetic micro-batch with the trainer's fields, shapes and dtypes "
       "and "
       "replayed top-k routing whose per-layer max/mean expert load hits a target table "
       "(docs/payload-spec.md). build writes one (.npz) and checks it; verify runs every "
       "check of the spec on any payload file (either builder's), reading it row by row; measure "
       "computes per-layer and per-expert-parallel-rank loads of a routed-experts array of a real "
       "run and writes the target table --routing-targets reads; tiles counts attention tiles per "
       "context rank with the padding at the end and first.",
       kExamples});
  CLI::App& app = tool.app();
  app.require_subcommand(1);
  app.fallthrough();  // -v, -q and the like also after the subcommand
  // A repeated option takes its last value (as the driver's argparse does), so a script can
  // append an override to a base command line.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  std::vector<check_payload::Subcommand> subcommands = {
      check_payload::add_build(app, tool), check_payload::add_verify(app, tool),
      check_payload::add_measure(app), check_payload::add_tiles(app, tool)};

  return tool.run(argc, argv, [&] {
    for (const check_payload::Subcommand& subcommand : subcommands) {
      if (subcommand.command->parsed()) return subcommand.run();
    }
    fail("no subcommand (see --help)");  // require_subcommand(1) makes this unreachable
  });
}

}  // namespace rtb::tool
