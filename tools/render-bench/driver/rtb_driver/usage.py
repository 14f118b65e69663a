"""`--help`: how to run the driver, with its environment contract generated from the settings
table (settings.tsv)."""

from __future__ import annotations

from .table import contract_help

INTRO = """\
rl-trainer-bench driver: times the RL trainer program of a Tunix GRPO run on one trainer slice.

render-bench writes this driver to /tmp/bench_driver.py in the bench JobSet's client container and
runs `python3 /tmp/bench_driver.py` in the trainer image (Tunix + MaxText + JAX on Pathways). The
driver builds the trainer worker, the GRPO algorithm and the batch configuration through Tunix's
own parsers and factories from the e2e argv, compiles, then times STEPS optimizer steps of
MICRO_STEPS fwd_bwd calls on a synthetic micro-batch whose MoE routing load is calibrated per layer.

Usage:
  python3 bench_driver.py                    the bench, settings from the environment (the pod)
  python3 bench_driver.py --preflight        the pod's set-up checked on CPU (below)
  python3 bench_driver.py --preflight --numerics
                                             the numerics knobs checked on CPU (below)
  python3 bench_driver.py --print-settings   the settings as the driver reads them, as JSON
  python3 bench_driver.py --dump-payload ... a payload file (below)
  python3 bench_driver.py --help

Environment contract (settings.tsv; every value is validated, a bad one is a one-line error and
exit code 2; an empty value means the default):
"""

DETAILS = """\
Other variables are ignored (the trainer's own environment passes through to Tunix and MaxText).

Timing. Steps count from 0, as the orchestrator's TRAINER_STEP_TIMING does; step 0 includes the
compile (MaxText's compile() only stages) and is reported as first_step_s, never in the means.
A step runs from its first fwd_bwd dispatch until an array its update produced is ready (the
update's readiness token, else a leaf of the trainer's new state; without either: exit 1); that
wait is timed once on the idle device after the last step (fence_s). Micro-batch times are
device times ("microbatch_timing":"device": from the later of the call's dispatch and the
previous call's completion to its own completion), the completion taken from the trainer's
get_step_timing ready times, a readiness token, or the call's own loss array (MaxText's
_cached_losses, or under retry_when_tokens_dropped its _pending_overflow_check, which holds the
newest call's loss one call longer), in that order; without any of them they are host dispatch
intervals ("dispatch"), which lag an asynchronous engine by up to max_inflight_computations
calls. BENCH_SUMMARY "microbatch_timing_why" says which and why.
tokens_per_s_per_chip is rows x tokens_per_row x micro_steps / s per step / chips (padding
included, the seed's definition); real_tokens_per_s_per_chip counts real tokens only.

Log lines (stdout). Human lines start with `[TrainerBench] `. Machine lines start at column 0:
  BENCH_STEP {"step":N,"seconds":S,"train_step_s":S,"boundary_free_step_s":S|null,
              "microbatch_s":[...],"microbatch_timing":"device|dispatch",
              "microbatch_timing_source":"step_timing|token|loss|dispatch","tokens":REAL,
              "padded_tokens":P,"tokens_per_s_per_chip":X,"real_tokens_per_s_per_chip":Y,
              "update":"fused|explicit|deferred","fused_update":B,"staged":B,"profiled":B,
              "replays":N|null,"train_step":N,"metrics":{...},"dropped_tokens":D}
                 one per optimizer step (replays: MoE dropless replays the trainer counted,
                 moe_dropless_replays; dropped_tokens only when the trainer's metrics carry a
                 dropped-token count)
  TRAINER_STEP_TIMING step=%d policy_version=%d rtt_s=%.3f timing=<compact json>
  TRAINER_STEP_TIMING step=N unavailable: <error>      when get_step_timing raises or gives None
  BENCH_SUMMARY {..., "first_step_s", "steady_steps", "profiled_steps", "mean_step_s",
                 "median_microbatch_s", "boundary_free_step_s" (an estimate),
                 "microbatch_timing", "microbatch_timing_why", "tokens_per_s_per_chip",
                 "real_tokens_per_s_per_chip", "update_path", "fence_s", "stage_boundary",
                 "token_dropping", "grad_norm", "definitions", ...}  at the end
Exit codes: 0 success, 2 bad settings, 1 a failure while running.

The payload is laid out as Tunix's sequence packer writes rows: each segment is a trajectory, a
prompt (a seeded length up to the orchestrator's --max_prompt_length) then its completion;
completion_mask, advantages and per-token log-probs cover the completion only; rollout log-probs
are present when the e2e program asks the rollouts for them, and equal the old ones when it uses
the rollout's as old (--use_rollout_logps). Functions are called strictly: an argument a Tunix
signature does not take, or a required one the driver does not know, is an error naming the
function, the argument and the file (exit 1); a warm-up signature mismatch too.

Preflight (on CPU in the trainer image, same environment as the pod, JAX_PLATFORMS=cpu):
  python3 bench_driver.py --preflight
imports every module the run uses (MaxText too), checks each function and signature it will
call, parses both argvs with Tunix's parsers, builds the GRPO config with LOGP_GATES applied, the
batch configuration, the warm-up payload and a small payload to its layout, and prints one line per
check (`preflight: ok|FAIL|skip NAME: detail`). Builds no trainer, loads no weights. Exit 0 all
good, 1 a problem, 2 bad settings.
  python3 bench_driver.py --preflight --numerics
runs the same set-up, then builds the image's own TrainerWorker and engine for a miniature model of
the same family on one CPU device with random weights (NUMERICS_MAXTEXT_FLAGS appended to
MAXTEXT_EXTRA_FLAGS), runs one fwd_bwd and one update() with random advantages and one with zero
advantages, and checks that LOGP_GATES=off masks nothing (the loss's denominator is the completion
mask's token count), that ADVANTAGES=random gives a finite gradient norm > 0 and that
ADVANTAGES=zero gives none (at most 1e-6 of it; skipped when the GRPO config's beta adds a KL
term). Same lines and exit codes.

Payload file mode (needs NumPy only, no Tunix or JAX):
  python3 bench_driver.py --dump-payload OUT.npz --rows R --tokens T --layers L --topk K
      --experts E [--vocab V] [--real-len N] [--segments n] [--final-rows F] [--final]
      [--pad-position end|start] [--pad-align A] [--routing-targets 1.5,2,...|@FILE]
      [--routing-scale S] [--advantages random|zero] [--seed N] [--no-old-logps] [--pad-id P]
      [--max-prompt-length P]
writes an uncompressed .npz with one array per payload field (docs/payload-spec.md) and a
`payload_settings` member (UTF-8 JSON in a uint8 array: how the file was built, which
`check-payload verify` reads), and prints the per-layer routing summary.
"""


def help_text() -> str:
  """What --help prints."""
  return INTRO + "\n" + contract_help() + "\n" + DETAILS
