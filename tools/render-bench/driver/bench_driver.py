"""rl-trainer-bench driver: times the RL trainer program of a Tunix GRPO run on one trainer slice.

render-bench writes this file to /tmp/bench_driver.py in the bench JobSet's client container and
runs `python3 /tmp/bench_driver.py` in the trainer image (Tunix + MaxText + JAX on Pathways). The
driver builds the trainer worker, the GRPO algorithm and the batch configuration through Tunix's
own parsers and factories from the e2e argv, compiles, then times STEPS optimizer steps of
MICRO_STEPS fwd_bwd calls on a synthetic micro-batch whose MoE routing load is calibrated per layer.

Environment contract (every value is validated; a bad one is a one-line error and exit code 2):

  TRAINER_ARGV    required. The trainer's argv as one shell-quoted string (shlex.split gives the
                  words): everything after `python -m tunix.experimental.distributed.runtime.main`,
                  starting with `--process_main=...run_trainer_node.main`. The runtime's own flags
                  (--process_main, --process_executor, --discovery_*) are dropped, the rest goes to
                  the trainer module's argument parser.
  ORCH_ARGV       required. The orchestrator's argv, likewise (run_deepswe_dist flags).
  STEPS           optimizer steps to time, integer >= 1, default 5.
  MICRO_STEPS     fwd_bwd calls per optimizer step, integer >= 1, default 9.
  SEED            integer, default 0. Everything synthetic is derived from it.
  ROUTING_TARGETS per-layer max/mean expert-load targets: comma-separated numbers (`1.8,2.1,...`),
                  one per decoder layer, each >= 1, or `@FILE` (one number per line, or 0-based
                  `layer,target` lines, `#` comments). Required when the trainer reports a routing
                  shape; a count different from the model's layer count is an error.
  ROUTING_SCALE   float >= 0, default 1: each target t becomes 1 + s * (t - 1).
  LOGP_GATES      on|off, default on. off disables the GRPO config's log-prob based gates (sequence
                  log-prob error threshold, truncated importance sampling, sampler IS weighting:
                  whichever fields the parsed config has), so that on random weights no token is
                  dropped because the policy disagrees with the payload's old log-probs.
  ADVANTAGES      random|zero, default random (seeded normal, one value per segment).
  PAD_POSITION    end|start. start moves each real row right by its trailing padding rounded
                  down to a multiple of PAD_ALIGN (rows with less padding do not move). Default:
                  the e2e orchestrator's --pack_pad_position, else its PACK_PAD_POSITION
                  environment (ORCH_PACK_PAD_POSITION), else end; the source is logged.
  PAD_ALIGN       integer > 0, a multiple of the segment alignment 64. Default: the
                  orchestrator's --pack_pad_align / PACK_PAD_ALIGN (ORCH_PACK_PAD_ALIGN), else 4096.
  ROUTING         auto|on|off, default auto: whether the payload replays MoE routing
                  (routed_experts). auto follows the orchestrator's --return_routed_experts, else
                  its RETURN_ROUTED_EXPERTS environment (ORCH_RETURN_ROUTED_EXPERTS), else on (the
                  seed always replayed); the source is logged.
  LOGPS_PASS      auto|on|off, default auto: score each micro-batch with the actor
                  (per_token_logps) before it trains, timed inside the step (BENCH_STEP
                  logps_pass_s), as the e2e program does when it checks the sampler against the
                  trainer outside the loss; auto follows the parsed GRPO config and argv.
  ALLOW_FALLBACKS 0|1, default 0. A tokenizer that does not load, a missing compile_warmup and
                  other fallbacks stop the run (exit 1) unless 1; BENCH_SUMMARY lists those taken.
  REAL_LEN        real tokens per regular row, 1..T, default T - round(T * 4588 / 65536)
                  (60,948 of a 65,536-token budget).
  SEGMENTS        segments (trajectories) per row, integer >= 1, at most the payload's
                  num_segments - 1, --max_segments_per_packed_row and REAL_LEN. Default, as the
                  e2e packs: each row's count of a concrete warm-up payload (the seed's rule), else
                  as many max-length trajectories (--max_prompt_length + --max_response_length, on
                  the 64-token grid) as fit REAL_LEN, at least 1; the rule is logged.
  FINAL_ROWS      real rows in the last micro-batch of a step, 1..R, default R (all rows).
  PROFILE_WINDOW  optional `START:COUNT`: trace fwd_bwd calls START..START+COUNT-1 (0-based,
                  counted over the whole run) with jax.profiler. When set, the trainer's own
                  profiler (--profiler_steps) is turned off so that only one trace runs.
  PROFILE_DIR     trace directory, default <--maxtext_output_directory>/bench_profile.
  BENCH_NAME      the bench JobSet name, used in log lines (default: JOBSET_NAME, else "bench").
  STAGE_BOUNDARY  auto|on|off, default auto: the seed's staged step boundary. The next step's
                  first micro-batch is staged on the trainer host (stage_fwd_bwd) while the
                  device computes this step's last one, before the update (deferred with
                  fwd_bwd(..., defer_update=True) and apply_deferred_update() when the worker
                  fuses it). auto follows the e2e orchestrator: --pipeline_step_boundary /
                  --stage_next_microbatch / --stage_before_update in ORCH_ARGV, else
                  ORCH_PIPELINE_STEP_BOUNDARY / ORCH_STAGE_NEXT_MICROBATCH (its environment,
                  copied by render-bench). on with a worker that lacks one of those calls: exit
                  2 naming it; auto: a loud warning, and off. A stage that fails, or finds the
                  device already idle, turns staging off for the rest of the run (one line).
Other variables are ignored (the trainer's own environment passes through to Tunix and MaxText).

Timing. Steps count from 0, as the orchestrator's TRAINER_STEP_TIMING does; step 0 includes the
compile (MaxText's compile() only stages) and is reported as first_step_s, never in the means.
A step runs from its first fwd_bwd dispatch until all of its device work, the update included,
is done. Micro-batch times are device times ("microbatch_timing":"device": from the later of the
call's dispatch and the previous call's completion to its own completion), the completion taken
from the trainer's get_step_timing ready times, a readiness token, or the call's own loss array
(MaxText's _cached_losses), in that order; without any of them they are host dispatch intervals
("dispatch"), which lag an asynchronous engine by up to max_inflight_computations calls.
tokens_per_s_per_chip is rows x tokens_per_row x micro_steps / s per step / chips (padding
included, the seed's definition); real_tokens_per_s_per_chip counts real tokens only.

Log lines (stdout). Human lines start with `[TrainerBench] `. Machine lines start at column 0:
  BENCH_STEP {"step":N,"seconds":S,"microbatch_s":[...],"microbatch_timing":"device|dispatch",
              "microbatch_timing_source":"step_timing|token|loss|dispatch","tokens":REAL,
              "padded_tokens":P,"tokens_per_s_per_chip":X,"real_tokens_per_s_per_chip":Y,
              "update":"fused|explicit|deferred","fused_update":B,"staged":B,"profiled":B,
              "train_step":N,"metrics":{...},"dropped_tokens":D}     one per optimizer step
                 (dropped_tokens only when the trainer's metrics carry a dropped-token count)
  TRAINER_STEP_TIMING step=%d policy_version=%d rtt_s=%.3f timing=<compact json>
  TRAINER_STEP_TIMING step=N unavailable: <error>      when get_step_timing raises or gives None
  BENCH_SUMMARY {..., "first_step_s", "steady_steps", "profiled_steps", "mean_step_s",
                 "median_microbatch_s", "microbatch_timing", "tokens_per_s_per_chip",
                 "real_tokens_per_s_per_chip", "stage_boundary", "token_dropping",
                 "definitions", ...}  at the end
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

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import inspect
import io
import json
import math
import os
import re
import shlex
import signal
import statistics
import sys
import threading
import time
import traceback
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

TAG = "[TrainerBench]"
PROG = "bench_driver"

# Segment starts sit on this grid (the GatedDeltaNet chunk, Tunix's segment_align_multiple).
SEGMENT_ALIGN = 64
# The bench's regular rows: 4,588 padding tokens in a 65,536-token budget (docs/payload-spec.md).
REGULAR_PADDING = 4588
REGULAR_BUDGET = 65536
# Qwen3.5-397B-A17B, the default vocabulary of the payload file mode.
DEFAULT_VOCAB = 248320
# A target is "hit" when the achieved max/mean is within this relative distance.
TARGET_TOLERANCE = 0.01

DEFAULT_TRAINER_MODULE = "tunix.experimental.examples.common.run_trainer_node"
DEFAULT_ORCH_MODULE = "tunix.experimental.examples.deepswe_dist.run_deepswe_dist"
RUNTIME_FLAGS = ("--process_main", "--process_executor", "--discovery_id", "--discovery_port",
                 "--discovery_addrs")


class SettingsError(Exception):
  """A bad setting or an impossible combination: exit code 2."""


class TunixMissing(RuntimeError):
  """The image's Tunix lacks a module or function the driver needs, or a check of what Tunix
  built failed (a warm-up signature mismatch, a gate that stays on): exit code 1."""


def say(message: str) -> None:
  print(f"{TAG} {message}", flush=True)


def emit(line: str) -> None:
  print(line, flush=True)


def one_line(text: Any) -> str:
  return " ".join(str(text).split())


def describe_exception(exc: BaseException) -> str:
  text = one_line(exc)
  return text if text else type(exc).__name__


# ------------------------------------------------------------------------------------------------
# Settings: the environment contract.
# ------------------------------------------------------------------------------------------------


def parse_int(name: str, text: str, minimum: Optional[int] = None) -> int:
  try:
    value = int(text.strip(), 10)
  except ValueError:
    raise SettingsError(f"{name}={text!r}: not an integer") from None
  if minimum is not None and value < minimum:
    raise SettingsError(f"{name}={text!r}: must be >= {minimum}")
  return value


def parse_float(name: str, text: str, minimum: Optional[float] = None) -> float:
  try:
    value = float(text.strip())
  except ValueError:
    raise SettingsError(f"{name}={text!r}: not a number") from None
  if not math.isfinite(value):
    raise SettingsError(f"{name}={text!r}: must be finite")
  if minimum is not None and value < minimum:
    raise SettingsError(f"{name}={text!r}: must be >= {minimum:g}")
  return value


def parse_choice(name: str, text: str, choices: Sequence[str]) -> str:
  value = text.strip().lower()
  if value not in choices:
    raise SettingsError(f"{name}={text!r}: must be one of {'|'.join(choices)}")
  return value


def parse_pad_align(name: str, text: str) -> int:
  value = parse_int(name, text, 1)
  if value % SEGMENT_ALIGN:
    raise SettingsError(f"{name}={text!r}: must be a multiple of the segment alignment "
                        f"{SEGMENT_ALIGN}")
  return value


def parse_window(name: str, text: str) -> Tuple[int, int]:
  match = re.fullmatch(r"\s*(-?\d+)\s*:\s*(-?\d+)\s*", text)
  if not match:
    raise SettingsError(f"{name}={text!r}: expected START:COUNT (fwd_bwd calls, 0-based start)")
  start, count = int(match.group(1)), int(match.group(2))
  if start < 0:
    raise SettingsError(f"{name}={text!r}: START must be >= 0")
  if count < 1:
    raise SettingsError(f"{name}={text!r}: COUNT must be >= 1")
  return start, count


def parse_argv_words(name: str, text: str) -> List[str]:
  try:
    words = shlex.split(text)
  except ValueError as exc:
    raise SettingsError(f"{name}: cannot split into shell words: {exc}") from None
  if not words:
    raise SettingsError(f"{name} is empty")
  return words


def _parse_target_value(source: str, line: int, text: str) -> float:
  where = f"{source}:{line}" if line else source
  try:
    value = float(text)
  except ValueError:
    raise SettingsError(f"{where}: {text!r} is not a number") from None
  if not math.isfinite(value):
    raise SettingsError(f"{where}: routing target {text!r} is not finite")
  if value < 1.0:
    raise SettingsError(f"{where}: routing target {text!r} is below 1 "
                        "(max/mean load is at least 1)")
  return value


def parse_routing_table(text: str, source: str) -> List[float]:
  """Parses a routing target table in the forms that render-bench and check-payload accept.

  One inline line of comma-separated numbers; or one number per line (line i is layer i); or
  `layer,target` lines with 0-based layers, each exactly once (an optional `layer,...` header is
  skipped). `#` starts a comment; blank lines are ignored.
  """
  lines = []
  for number, raw in enumerate(text.splitlines(), 1):
    content = raw.split("#", 1)[0].strip()
    if content:
      lines.append((number, [field.strip() for field in content.split(",")]))
  if lines and len(lines[0][1]) == 2 and lines[0][1][0].lower() == "layer":
    lines.pop(0)
  if not lines:
    raise SettingsError(f"{source}: empty routing target table (no values)")
  if len(lines) == 1 and len(lines[0][1]) >= 2 and not (len(lines[0][1]) == 2 and
                                                        lines[0][1][0] == "0"):
    number, fields = lines[0]
    return [_parse_target_value(source, number, field) for field in fields]
  width = len(lines[0][1])
  if width > 2:
    raise SettingsError(f"{source}:{lines[0][0]}: {width} values on a line of a multi-line table "
                        "(expected one target, or `layer,target`)")
  for number, fields in lines:
    if len(fields) != width:
      raise SettingsError(f"{source}:{number}: {len(fields)} values on this line but {width} on "
                          f"line {lines[0][0]} (the table mixes `target` and `layer,target`)")
  if width == 1:
    return [_parse_target_value(source, number, fields[0]) for number, fields in lines]
  entries = {}
  for number, (layer_text, target_text) in lines:
    if not re.fullmatch(r"\d+", layer_text):
      raise SettingsError(f"{source}:{number}: {layer_text!r} is not a layer index "
                          "(a 0-based integer)")
    layer = int(layer_text)
    if layer in entries:
      raise SettingsError(f"{source}:{number}: layer {layer} given twice "
                          f"(first on line {entries[layer][0]})")
    entries[layer] = (number, _parse_target_value(source, number, target_text))
  for layer in range(len(entries)):
    if layer not in entries:
      raise SettingsError(f"{source}: layer {layer} is missing (layers 0..{max(entries)} must "
                          "each appear once)")
  return [entries[layer][1] for layer in range(len(entries))]


def parse_routing_targets(name: str, text: str) -> List[float]:
  """ROUTING_TARGETS: inline comma-separated numbers, or @FILE."""
  text = text.strip()
  if text.startswith("@"):
    path = text[1:]
    try:
      with open(path, encoding="utf-8") as handle:
        content = handle.read()
    except OSError as exc:
      raise SettingsError(f"{name}: cannot read {path}: {exc.strerror or exc}") from None
    return parse_routing_table(content, path)
  if "\n" in text:
    return parse_routing_table(text, name)
  fields = [field.strip() for field in text.split(",")]
  return [_parse_target_value(f"{name} value {index}", 0, field)
          for index, field in enumerate(fields)]


def scale_targets(targets: Sequence[float], scale: float) -> List[float]:
  return [1.0 + scale * (target - 1.0) for target in targets]


@dataclasses.dataclass
class Settings:
  """The driver's settings, parsed from the environment (None means "use the default")."""
  trainer_argv: List[str]
  orch_argv: List[str]
  steps: int = 5
  micro_steps: int = 9
  seed: int = 0
  routing_targets: Optional[List[float]] = None
  routing_scale: float = 1.0
  logp_gates: bool = True
  advantages: str = "random"
  pad_position: Optional[str] = None  # None: the e2e orchestrator's, else end
  pad_align: Optional[int] = None  # None: the e2e orchestrator's, else 4096
  real_len: Optional[int] = None
  segments: Optional[int] = None
  final_rows: Optional[int] = None
  profile_window: Optional[Tuple[int, int]] = None
  profile_dir: Optional[str] = None
  bench_name: str = "bench"
  stage_boundary: str = "auto"
  routing: str = "auto"
  logps_pass: str = "auto"
  allow_fallbacks: bool = False
  # The orchestrator's environment that auto settings follow (ORCH_* copies by render-bench).
  orch_pack_pad_position: Optional[str] = None
  orch_pack_pad_align: Optional[str] = None
  orch_return_routed_experts: Optional[str] = None
  # The orchestrator's PIPELINE_STEP_BOUNDARY / STAGE_NEXT_MICROBATCH environment in the render
  # (render-bench copies them as ORCH_PIPELINE_STEP_BOUNDARY / ORCH_STAGE_NEXT_MICROBATCH).
  orch_pipeline_step_boundary: Optional[str] = None
  orch_stage_next_microbatch: Optional[str] = None

  def knobs(self) -> Dict[str, Any]:
    """The settings as parsed, for BENCH_SUMMARY."""
    return {
        "steps": self.steps,
        "micro_steps": self.micro_steps,
        "seed": self.seed,
        "routing_targets": self.routing_targets,
        "routing_scale": self.routing_scale,
        "logp_gates": "on" if self.logp_gates else "off",
        "advantages": self.advantages,
        "pad_position": self.pad_position,
        "pad_align": self.pad_align,
        "real_len": self.real_len,
        "segments": self.segments,
        "final_rows": self.final_rows,
        "profile_window": (None if self.profile_window is None else
                           f"{self.profile_window[0]}:{self.profile_window[1]}"),
        "profile_dir": self.profile_dir,
        "stage_boundary": self.stage_boundary,
        "routing": self.routing,
        "logps_pass": self.logps_pass,
        "allow_fallbacks": self.allow_fallbacks,
    }


def parse_settings(env: Mapping[str, str]) -> Settings:
  """Reads and validates the environment contract; raises SettingsError on the first bad value."""

  def get(name: str) -> Optional[str]:
    value = env.get(name)
    if value is None or value.strip() == "":
      return None
    return value

  for name in ("TRAINER_ARGV", "ORCH_ARGV"):
    if get(name) is None:
      role = "trainer" if name == "TRAINER_ARGV" else "orchestrator"
      raise SettingsError(f"{name} is not set (the {role} argv as a shell-quoted string)")
  settings = Settings(trainer_argv=parse_argv_words("TRAINER_ARGV", env["TRAINER_ARGV"]),
                      orch_argv=parse_argv_words("ORCH_ARGV", env["ORCH_ARGV"]))
  def choice(*words: str) -> Callable[[str, str], str]:
    return lambda name, text: parse_choice(name, text, words)

  def kept_text(check: Callable[[str, str], Any]) -> Callable[[str, str], str]:
    """Validates with `check` but keeps the text: it is read where it is resolved."""
    def read(name: str, text: str) -> str:
      check(name, text)
      return text.strip()
    return read

  def at_least(parse: Callable[..., Any], minimum: Any) -> Callable[[str, str], Any]:
    return lambda name, text: parse(name, text, minimum)

  # The optional variables, in the order they are validated; each sets the field of its name in
  # lower case.
  readers: Tuple[Tuple[str, Callable[[str, str], Any]], ...] = (
      ("STEPS", at_least(parse_int, 1)),
      ("MICRO_STEPS", at_least(parse_int, 1)),
      ("SEED", parse_int),
      ("ROUTING_TARGETS", parse_routing_targets),
      ("ROUTING_SCALE", at_least(parse_float, 0.0)),
      ("LOGP_GATES", lambda name, text: parse_choice(name, text, ("on", "off")) == "on"),
      ("ADVANTAGES", choice("random", "zero")),
      ("PAD_POSITION", choice("end", "start")),
      ("PAD_ALIGN", parse_pad_align),
      ("REAL_LEN", at_least(parse_int, 1)),
      ("SEGMENTS", at_least(parse_int, 1)),
      ("FINAL_ROWS", at_least(parse_int, 1)),
      ("PROFILE_WINDOW", parse_window),
      ("PROFILE_DIR", lambda name, text: text.strip()),
      ("STAGE_BOUNDARY", choice("auto", "on", "off")),
      ("ORCH_PIPELINE_STEP_BOUNDARY", kept_text(parse_bool_word)),
      ("ORCH_STAGE_NEXT_MICROBATCH", kept_text(parse_bool_word)),
      ("ORCH_RETURN_ROUTED_EXPERTS", kept_text(parse_bool_word)),
      ("ORCH_PACK_PAD_POSITION", kept_text(choice("end", "start"))),
      ("ORCH_PACK_PAD_ALIGN", kept_text(parse_pad_align)),
      ("ROUTING", choice("auto", "on", "off")),
      ("LOGPS_PASS", choice("auto", "on", "off")),
      ("ALLOW_FALLBACKS", parse_bool_word),
  )
  for name, read in readers:
    if get(name) is not None:
      setattr(settings, name.lower(), read(name, env[name]))
  settings.bench_name = one_line(get("BENCH_NAME") or get("JOBSET_NAME") or "bench")
  return settings


TRUE_WORDS = ("1", "true", "yes", "on", "t", "y")
FALSE_WORDS = ("0", "false", "no", "off", "f", "n", "")


def parse_bool_word(name: str, text: str) -> bool:
  value = text.strip().lower()
  if value in TRUE_WORDS:
    return True
  if value in FALSE_WORDS:
    return False
  raise SettingsError(f"{name}={text!r}: not a boolean (true/false, 1/0, yes/no, on/off)")


def bool_flag(words: Sequence[str], flag: str) -> Optional[bool]:
  """A boolean flag of an argv (`--f`, `--f=V`, `--f V`, `--nof`, `--no_f`, `--no-f`), the last
  one winning; None when absent. A value that is not a boolean is a SettingsError."""
  name = flag.lstrip("-")
  value = None
  for index, word in enumerate(words):
    if word == flag:
      following = words[index + 1] if index + 1 < len(words) else None
      if following is not None and following.strip().lower() in TRUE_WORDS + FALSE_WORDS[:-1]:
        value = parse_bool_word(flag, following)
      else:
        value = True
    elif word.startswith(flag + "="):
      value = parse_bool_word(flag, word[len(flag) + 1:])
    elif word in (f"--no{name}", f"--no_{name}", f"--no-{name}"):
      value = False
  return value


def resolve_stage_boundary(settings: Settings) -> "StagePlan":
  """STAGE_BOUNDARY as the run will use it. `auto` follows the e2e orchestrator: its
  --pipeline_step_boundary / --stage_next_microbatch flags in ORCH_ARGV, else its
  PIPELINE_STEP_BOUNDARY / STAGE_NEXT_MICROBATCH environment in the render (ORCH_* copies);
  the stage goes before the update unless --stage_before_update is false."""
  words = settings.orch_argv
  before = bool_flag(words, "--stage_before_update")
  before_update = True if before is None else before
  if settings.stage_boundary != "auto":
    return StagePlan(settings.stage_boundary, settings.stage_boundary == "on",
                     f"STAGE_BOUNDARY={settings.stage_boundary}", before_update)

  def setting(flag: str, env_name: str, value: Optional[str]) -> Tuple[Optional[bool], str]:
    from_flag = bool_flag(words, flag)
    if from_flag is not None:
      return from_flag, f"ORCH_ARGV {flag}={'true' if from_flag else 'false'}"
    if value is not None:
      parsed = parse_bool_word(env_name, value)
      return parsed, f"orchestrator env {env_name}={value}"
    return None, ""

  pipeline, pipeline_from = setting("--pipeline_step_boundary", "PIPELINE_STEP_BOUNDARY",
                                    settings.orch_pipeline_step_boundary)
  stage_next, stage_from = setting("--stage_next_microbatch", "STAGE_NEXT_MICROBATCH",
                                   settings.orch_stage_next_microbatch)
  if pipeline is None:
    pipeline_from = "PIPELINE_STEP_BOUNDARY not set in the e2e run (off)"
    pipeline = False
  if stage_next is None:
    stage_next = pipeline
    stage_from = "STAGE_NEXT_MICROBATCH follows PIPELINE_STEP_BOUNDARY"
  source = f"auto: {pipeline_from}; {stage_from}"
  if stage_next and not pipeline:
    return StagePlan("auto", False, source + " (the e2e refuses staging without the pipelined "
                     "boundary, so it does not stage)", before_update)
  if before is not None:
    source += f"; ORCH_ARGV --stage_before_update={'true' if before else 'false'}"
  return StagePlan("auto", bool(pipeline and stage_next), source, before_update)


# ------------------------------------------------------------------------------------------------
# The payload builder (NumPy; docs/payload-spec.md).
# ------------------------------------------------------------------------------------------------


def default_real_len(tokens: int) -> int:
  """T minus the regular padding scaled to T: 65,536 gives 60,948 (rounding half up)."""
  padding = int(math.floor(tokens * REGULAR_PADDING / REGULAR_BUDGET + 0.5))
  return max(1, tokens - padding)


def default_segments(num_segments: Optional[int], max_segments_per_row: Optional[int],
                     real_len: int) -> int:
  """Segments per row when SEGMENTS is not given.

  What the warm-up payload allows (num_segments - 1), capped at max_segments_per_packed_row; with
  an unbounded packer (num_segments - 1 is then the whole budget) capped so that every segment can
  start on the 64-token grid.
  """
  segments = (num_segments - 1) if num_segments else 1
  if max_segments_per_row:
    segments = min(segments, max_segments_per_row)
  else:
    segments = min(segments, max(1, real_len // SEGMENT_ALIGN))
  return max(1, min(segments, real_len))


def start_shift(tokens: int, real_len: int, pad_position: str, pad_align: int) -> int:
  """How far PAD_POSITION=start moves a row holding real_len tokens from position 0."""
  if pad_position != "start":
    return 0
  trailing = tokens - real_len
  return (trailing // pad_align) * pad_align


def _rng(seed: int, *stream: int) -> np.random.Generator:
  """An independent, reproducible stream per purpose, so one knob never reshuffles another."""
  return np.random.default_rng(np.random.SeedSequence([abs(seed), 1 if seed < 0 else 0, *stream]))


# Stream identifiers for _rng.
_IDS, _SEGMENTS, _ADVANTAGES, _LOGPS, _ROUTING, _EXTRA, _PROMPTS = 1, 2, 3, 4, 5, 6, 7


def segment_cuts(rng: np.random.Generator, real_len: int, segments: int) -> np.ndarray:
  """The starts of segments 2..n of one row (sorted), on the 64-token grid when it fits.

  A row too short for n segments on the grid falls back to any distinct cut points; choice() is
  only ever asked for at most as many values as its population holds.
  """
  if segments <= 1:
    return np.empty(0, dtype=np.int64)
  grid = np.arange(SEGMENT_ALIGN, real_len, SEGMENT_ALIGN, dtype=np.int64)
  if grid.size >= segments - 1:
    cuts = rng.choice(grid, size=segments - 1, replace=False)
  else:
    population = np.arange(1, real_len, dtype=np.int64)
    if population.size < segments - 1:  # callers keep segments <= real_len; stay total anyway
      segments = population.size + 1
    cuts = rng.choice(population, size=segments - 1, replace=False)
  return np.sort(cuts.astype(np.int64))


def solve_expert_loads(total: int, experts: int, cap: int, target: float) -> np.ndarray:
  """Integer loads (slots per expert, sorted from the busiest) with max/mean = target.

  The busiest expert gets round(target * mean) slots (at least ceil(mean), at most `cap`, the
  number of tokens). The other E-1 experts follow a power law pinned to it,
  load(rank r) = top * (r + 1) ** -alpha for r = 1..E-1, whose exponent alpha >= 0 is solved by
  bisection so that all loads sum to `total`; the loads are then rounded by largest remainder. So
  1.0 gives a uniform load (within rounding) and a larger target a smoothly steeper profile.
  """
  counts = np.zeros(experts, dtype=np.int64)
  if total <= 0:
    return counts
  mean = total / experts
  top = int(math.floor(target * mean + 0.5))
  top = min(max(top, int(math.ceil(mean - 1e-9))), cap)
  counts[0] = top
  rest = total - top
  if experts == 1 or rest <= 0:
    counts[0] = total if experts == 1 else top
    return counts
  ranks = np.arange(2, experts + 1, dtype=np.float64)

  def spread(alpha: float) -> float:
    return float(top * np.power(ranks, -alpha).sum())

  lo, hi = 0.0, 1.0
  if spread(lo) <= rest:
    hi = 0.0
  else:
    while spread(hi) > rest and hi < 1e6:
      lo, hi = hi, hi * 2.0
    for _ in range(200):
      mid = 0.5 * (lo + hi)
      if spread(mid) > rest:
        lo = mid
      else:
        hi = mid
  ideal = np.minimum(top * np.power(ranks, -hi), top)
  base = np.floor(ideal).astype(np.int64)
  deficit = rest - int(base.sum())
  order = np.argsort(-(ideal - base), kind="stable")
  # The power law always has room: top * (E - 1) >= rest because top >= ceil(mean).
  while deficit > 0:
    room = order[base[order] < top]
    take = room[:deficit]
    base[take] += 1
    deficit -= take.size
  while deficit < 0:
    spare = order[::-1][base[order[::-1]] > 0]
    take = spare[:-deficit]
    base[take] -= 1
    deficit += take.size
  counts[1:] = base
  return counts


@dataclasses.dataclass
class LayerRouting:
  layer: int
  target: float
  achieved: Optional[float]
  max_load: int
  mean_load: float

  def as_json(self) -> Dict[str, Any]:
    return {
        "layer": self.layer,
        "target": round(self.target, 6),
        "achieved": None if self.achieved is None else round(self.achieved, 6),
        "max_load": self.max_load,
        "mean_load": round(self.mean_load, 3),
    }


def fill_routing(out: np.ndarray, *, real_rows: int, real_len: int, shift: int, experts: int,
                 targets: Sequence[float], seed: int) -> List[LayerRouting]:
  """Writes calibrated top-k routing for the real tokens into out[R, T, L, K] (already -1).

  Per layer: the loads come from solve_expert_loads. The experts (in a per-layer random order)
  are laid end to end, expert e taking load(e) consecutive slots of a sequence of M * K slots
  (M real tokens), and slot p = k * M + j becomes choice k of column j. A column's K slots are M
  apart and no expert holds more than M consecutive slots, so every column has K distinct
  experts and every expert exactly its load. The M columns then go to the M real tokens in a
  random order (one permutation per micro-batch, rotated by a random offset per layer), which
  spreads each expert's tokens over all rows and sequence shards. Cost per layer: one pass that
  fills the [M, K] columns, one row gather, one strided copy; no loop over tokens.
  """
  rows, tokens, layers, topk = out.shape
  n_tokens = real_rows * real_len
  report = []
  if n_tokens == 0:
    for layer in range(layers):
      report.append(LayerRouting(layer, float(targets[layer]), None, 0, 0.0))
    return report
  total = n_tokens * topk
  mean = total / experts
  permutation = _rng(seed, _ROUTING, 0).permutation(n_tokens)
  rotated = np.empty_like(permutation)
  columns = np.empty((n_tokens, topk), dtype=np.int16)  # columns[j, k] = slot k * M + j
  gathered = np.empty((n_tokens, topk), dtype=np.int16)
  block = out[:real_rows, shift:shift + real_len]  # [rows, real_len, L, K] view
  for layer in range(layers):
    layer_rng = _rng(seed, _ROUTING, 1, layer)
    counts = solve_expert_loads(total, experts, n_tokens, targets[layer])
    expert_of_rank = layer_rng.permutation(experts).astype(np.int16)
    position = 0
    for rank in np.flatnonzero(counts):
      remaining, expert = int(counts[rank]), expert_of_rank[rank]
      while remaining > 0:  # at most two pieces: a load never exceeds M
        choice, column = divmod(position, n_tokens)
        piece = min(remaining, n_tokens - column)
        columns[column:column + piece, choice] = expert
        position += piece
        remaining -= piece
    offset = int(layer_rng.integers(n_tokens))
    rotated[:offset] = permutation[n_tokens - offset:]
    rotated[offset:] = permutation[:n_tokens - offset]
    np.take(columns, rotated, axis=0, out=gathered)
    block[:, :, layer, :] = gathered.reshape(real_rows, real_len, topk)
    max_load = int(counts.max())
    report.append(LayerRouting(layer, float(targets[layer]), max_load / mean, max_load, mean))
  return report


# Fields of the packed micro-batch (docs/payload-spec.md): name -> (dtype, kind). kind "token" is
# [R, T]; "routing" is [R, T, L, K]; "prompt" is [R, 0].
SPEC_FIELDS = {
    "completion_ids": (np.int32, "token"),
    "completion_mask": (np.float32, "token"),
    "segment_ids": (np.int32, "token"),
    "segment_positions": (np.int32, "token"),
    "advantages": (np.float32, "token"),
    "old_per_token_logps": (np.float32, "token"),
    "routed_experts": (np.int16, "routing"),
    "prompt_ids": (np.int32, "prompt"),
    "prompt_mask": (np.float32, "prompt"),
}


def spec_field_layout(rows: int, tokens: int, layers: int, topk: int, old_logps: bool = True,
                      routing: bool = True) -> Dict[str, Tuple[Tuple[int, ...], np.dtype]]:
  """The fields, shapes and dtypes of the spec (the --dump-payload layout)."""
  layout = {}
  for name, (dtype, kind) in SPEC_FIELDS.items():
    if name == "old_per_token_logps" and not old_logps:
      continue
    if name == "routed_experts" and not routing:
      continue
    shape = {"token": (rows, tokens), "routing": (rows, tokens, layers, topk),
             "prompt": (rows, 0)}[kind]
    layout[name] = (shape, np.dtype(dtype))
  return layout


@dataclasses.dataclass
class BuiltPayload:
  arrays: Dict[str, np.ndarray]
  routing: List[LayerRouting]
  real_rows: int
  real_len: int
  segments: Union[int, List[int]]  # one count for every row, or one per row
  shift: int
  real_tokens: int
  notes: List[str]

  def misses(self) -> List[LayerRouting]:
    return [entry for entry in self.routing if entry.achieved is not None and
            abs(entry.achieved - entry.target) > TARGET_TOLERANCE * entry.target]


def segments_per_row(segments: Union[int, Sequence[int]], rows: int) -> List[int]:
  """One segment count per row from an int (every row) or a per-row list."""
  if isinstance(segments, (int, np.integer)):
    return [int(segments)] * rows
  counts = [int(count) for count in segments]
  if len(counts) != rows:
    raise SettingsError(f"{len(counts)} per-row segment counts for {rows} rows")
  return counts


def build_payload(*, rows: int, tokens: int, layout: Mapping[str, Tuple[Tuple[int, ...], Any]],
                  vocab: int, real_len: int, segments: Union[int, Sequence[int]], real_rows: int,
                  pad_position: str, pad_align: int, targets: Optional[Sequence[float]],
                  experts: Optional[int], advantages: str, seed: int, pad_id: int = 0,
                  max_prompt_length: int = 0, rollout_as_old: bool = False) -> BuiltPayload:
  """Builds one micro-batch: every field of `layout` (name -> (shape, dtype)) as a NumPy array.

  Rows 0..real_rows-1 hold real_len real tokens each, cut into `segments` segments (one count
  for every row, or one per row) on the 64-token grid; the other rows are all padding. As Tunix's
  sequence packer writes them, a segment is one trajectory: a prompt (a seeded length in
  [1, min(max_prompt_length, length - 1)], none when max_prompt_length is 0) then its completion.
  Ids, segment ids, in-segment positions and routing cover the whole segment; completion_mask,
  advantages and per-token log-probs its completion only. Padding is at the end of a row, or
  (pad_position "start") the real part is written further right by the trailing padding rounded
  down to a multiple of pad_align, every per-token array alike. With rollout_as_old, the rollout
  log-probs are the old ones (the e2e program uses the rollout's as old).
  """
  notes = []
  if not 1 <= real_len <= tokens:
    raise SettingsError(f"real length {real_len} must be between 1 and the token budget "
                        f"T={tokens}")
  if not 0 <= real_rows <= rows:
    raise SettingsError(f"real rows {real_rows} must be between 0 and the rows R={rows}")
  counts = segments_per_row(segments, rows)
  for count in counts:
    if not 1 <= count <= real_len:
      raise SettingsError(f"segments per row {count} must be between 1 and the real length "
                          f"{real_len}")
  if max_prompt_length < 0:
    raise SettingsError(f"max prompt length {max_prompt_length} must be >= 0")
  if vocab < 2:
    raise SettingsError(f"vocabulary size {vocab}: needs at least 2 ids")
  shift = start_shift(tokens, real_len, pad_position, pad_align)
  span = slice(shift, shift + real_len)

  # Token ids, segments and per-token values for the real rows, in row order.
  ids = _rng(seed, _IDS).integers(1, vocab, size=(rows, real_len), dtype=np.int64)
  if 1 <= pad_id < vocab and vocab > 2:
    ids[ids == pad_id] = pad_id % (vocab - 1) + 1  # a real token never reads as padding
  segment_rng = _rng(seed, _SEGMENTS)
  prompt_rng = _rng(seed, _PROMPTS)
  segment_ids = np.zeros((rows, real_len), dtype=np.int32)
  segment_positions = np.zeros((rows, real_len), dtype=np.int32)
  completion = np.zeros((rows, real_len), dtype=bool)
  positions = np.arange(real_len, dtype=np.int64)
  for row in range(rows):
    starts = np.concatenate([[0], segment_cuts(segment_rng, real_len, counts[row])])
    lengths = np.diff(np.concatenate([starts, [real_len]]))
    segment_ids[row] = np.repeat(np.arange(1, starts.size + 1, dtype=np.int32), lengths)
    segment_positions[row] = positions - np.repeat(starts, lengths)
    prompts = np.zeros(lengths.size, dtype=np.int64)
    if max_prompt_length > 0:
      longest = np.minimum(max_prompt_length, lengths - 1)
      drawn = prompt_rng.integers(1, np.maximum(longest, 1) + 1)
      prompts = np.where(longest >= 1, drawn, 0)
    completion[row] = segment_positions[row] >= np.repeat(prompts, lengths)
  most = max(counts)
  if advantages == "zero":
    per_segment = np.zeros((rows, most), dtype=np.float32)
  else:
    per_segment = _rng(seed, _ADVANTAGES).standard_normal((rows, most)).astype(np.float32)
  token_advantages = np.where(
      completion, np.take_along_axis(per_segment, segment_ids.astype(np.int64) - 1, axis=1),
      np.float32(0)).astype(np.float32)

  def logps(stream: int) -> np.ndarray:
    # Close to a random-weight policy's log-prob (-ln vocab), so that on random weights the
    # policy/old ratio stays near 1; always negative on completion tokens, 0 elsewhere.
    noise = _rng(seed, _LOGPS, stream).standard_normal((rows, real_len))
    values = np.minimum(-math.log(vocab) + 0.05 * noise, -1e-3).astype(np.float32)
    return np.where(completion, values, np.float32(0)).astype(np.float32)

  per_token = {
      "completion_ids": ids,
      "completion_mask": completion.astype(np.float32),
      "segment_ids": segment_ids,
      "segment_positions": segment_positions,
      "advantages": token_advantages,
  }
  arrays = {}
  routing_report: List[LayerRouting] = []
  for name, (shape, dtype) in layout.items():
    shape = tuple(int(dim) for dim in shape)
    dtype = np.dtype(dtype)
    if name == "routed_experts":
      if len(shape) != 4 or shape[:2] != (rows, tokens):
        raise SettingsError(f"routed_experts has shape {shape}, expected [{rows}, {tokens}, L, K]")
      layers, topk = shape[2], shape[3]
      if experts is None or experts < topk:
        raise SettingsError(f"routing needs at least top-k={topk} experts (got {experts})")
      if targets is None:
        raise SettingsError(f"ROUTING_TARGETS is required: the payload replays routing for "
                            f"{layers} layers")
      if len(targets) != layers:
        raise SettingsError(f"ROUTING_TARGETS has {len(targets)} values but the model has "
                            f"{layers} decoder layers")
      for layer, target in enumerate(targets):
        if target > experts / topk + 1e-9:
          raise SettingsError(f"routing target {target:g} of layer {layer} cannot be reached with "
                              f"{experts} experts and top-{topk} (max/mean <= {experts / topk:g})")
      routed = np.full(shape, -1, dtype=np.int16)
      routing_report = fill_routing(routed, real_rows=real_rows, real_len=real_len, shift=shift,
                                    experts=experts, targets=targets, seed=seed)
      arrays[name] = routed if dtype == np.int16 else routed.astype(dtype)
      continue
    array = np.zeros(shape, dtype=dtype)
    if name == "completion_ids":
      array[...] = pad_id  # padding reads as the pad id, as Tunix's packer writes it
    if len(shape) == 2 and shape[1] == 0:
      arrays[name] = array  # prompt_ids / prompt_mask: the packed row lives in completion_*
      continue
    if shape != (rows, tokens):
      notes.append(f"{name}{list(shape)} {dtype.name}: not a per-token field, left at zero")
      arrays[name] = array
      continue
    if name in per_token:
      values = per_token[name]
    elif name in ("old_per_token_logps", "ref_per_token_logps", "rollout_per_token_logps"):
      stream = {"old_per_token_logps": 0, "ref_per_token_logps": 1}.get(name, 2)
      if rollout_as_old and name == "rollout_per_token_logps":
        stream = 0  # the same values as old_per_token_logps
      values = logps(stream)
    elif name == "sampler_is_weights":
      values = completion.astype(np.float32)
    else:
      notes.append(f"{name}[{rows},{tokens}] {dtype.name}: unknown field, left at zero")
      arrays[name] = array
      continue
    array[:real_rows, span] = values[:real_rows].astype(dtype)
    arrays[name] = array
  return BuiltPayload(arrays=arrays, routing=routing_report, real_rows=real_rows,
                      real_len=real_len,
                      segments=counts[0] if len(set(counts)) == 1 else counts, shift=shift,
                      real_tokens=real_rows * real_len, notes=notes)


def format_routing_report(report: Sequence[LayerRouting]) -> List[str]:
  lines = [f"{'layer':>5} {'target':>9} {'achieved':>9} {'max_load':>10} {'mean_load':>12}"]
  for entry in report:
    achieved = "-" if entry.achieved is None else f"{entry.achieved:.4f}"
    lines.append(f"{entry.layer:>5} {entry.target:>9.4f} {achieved:>9} {entry.max_load:>10} "
                 f"{entry.mean_load:>12.2f}")
  return lines


# ------------------------------------------------------------------------------------------------
# Calling the worker, observing the device, profiling: the step loop and its helpers.
# ------------------------------------------------------------------------------------------------


def _find_in(response: Any, key: str) -> Any:
  """response[key], response.key, or the same in its metadata; None when absent."""
  if isinstance(response, Mapping):
    if key in response:
      return response[key]
    metadata = response.get("metadata")
  else:
    if hasattr(response, key) and not callable(getattr(response, key)):
      return getattr(response, key)
    metadata = getattr(response, "metadata", None)
  if isinstance(metadata, Mapping):
    return metadata.get(key)
  return None


def response_updated(response: Any) -> bool:
  """Whether a fwd_bwd response says the optimizer update was applied inside the call."""
  return bool(_find_in(response, "updated"))


def _named_params(function: Any) -> Tuple[Dict[str, inspect.Parameter], bool]:
  """(named parameters, takes **kwargs) of a callable; ({}, False) when it has no signature."""
  try:
    params = dict(inspect.signature(function).parameters)
  except (TypeError, ValueError):
    return {}, False
  var_kw = any(param.kind == inspect.Parameter.VAR_KEYWORD for param in params.values())
  return {name: param for name, param in params.items()
          if param.kind not in (inspect.Parameter.VAR_KEYWORD,
                                inspect.Parameter.VAR_POSITIONAL)}, var_kw


# Update paths of a step (BENCH_STEP "update").
UPDATE_FUSED = "fused"        # the last fwd_bwd(apply_optimizer=True) applies it (tunix#2719)
UPDATE_EXPLICIT = "explicit"  # update() after the last fwd_bwd (the engine's RPC pair)
UPDATE_DEFERRED = "deferred"  # fwd_bwd(apply_optimizer=True, defer_update=True), then
                              # apply_deferred_update() (the staged step boundary)


class WorkerCalls:
  """Calls a TrainerWorker the way its generation expects.

  - A worker whose fwd_bwd takes `request` gets a TrainRequest (the engine's call). The
    optimizer flags are passed only when its signature names them: through **kwargs they would
    travel into the trainer's fwd_bwd.
  - An older worker takes the payload itself and pops accumulate_gradients / apply_optimizer
    from its keyword arguments (it then updates inside the call and reports `updated`).
  - Staging (stage_fwd_bwd, defer_update, apply_deferred_update) exists in no public Tunix
    release: it is the seed's TrainerWorker change (PIPELINE_STEP_BOUNDARY /
    STAGE_NEXT_MICROBATCH, with AI-Hypercomputer/maxtext#5718). It is used only when the worker
    names each call and argument exactly.
  """

  def __init__(self, worker: Any, make_request: Optional[Callable[[Any], Any]] = None):
    self.worker = worker
    self.make_request = make_request
    params, var_kw = _named_params(getattr(worker, "fwd_bwd", None))
    self.takes_request = "request" in params
    self.payload_keyword = next((name for name in ("payload", "batch") if name in params), None)
    legacy = not self.takes_request and var_kw
    self.pass_apply = "apply_optimizer" in params or legacy
    self.pass_accumulate = "accumulate_gradients" in params or legacy
    self.pass_skip_jit = "skip_jit" in params or var_kw
    self.can_defer = "defer_update" in params
    stage = getattr(worker, "stage_fwd_bwd", None)
    stage_params, _ = _named_params(stage) if callable(stage) else ({}, False)
    self.can_stage_request = callable(stage) and "request" in stage_params
    self.can_apply_deferred = callable(getattr(worker, "apply_deferred_update", None))

  @property
  def can_fuse(self) -> bool:
    return self.pass_apply

  def staging_gaps(self, before_update: bool) -> List[str]:
    """What this worker lacks for a staged step boundary (empty: it can stage)."""
    gaps = []
    if not self.takes_request:
      gaps.append("fwd_bwd(request=...) (staging hands the next step's TrainRequest over)")
    if not self.can_stage_request:
      gaps.append("TrainerWorker.stage_fwd_bwd(request)")
    if before_update and self.can_fuse and not (self.can_defer and self.can_apply_deferred):
      # A worker that fuses the update into the last call must defer it, or the stage would
      # follow the update's dispatch.
      if not self.can_defer:
        gaps.append("fwd_bwd(..., defer_update=True)")
      if not self.can_apply_deferred:
        gaps.append("TrainerWorker.apply_deferred_update()")
    return gaps

  def request(self, payload: Any) -> Any:
    """What one fwd_bwd call carries: a TrainRequest for a request-taking worker."""
    if self.takes_request and self.make_request is not None:
      return self.make_request(payload)
    return payload

  def fwd_bwd(self, request: Any, apply_optimizer: bool, defer_update: bool = False) -> Any:
    kwargs: Dict[str, Any] = {}
    if self.pass_skip_jit:
      kwargs["skip_jit"] = False
    if self.pass_accumulate:
      kwargs["accumulate_gradients"] = True
    if self.pass_apply:
      kwargs["apply_optimizer"] = apply_optimizer
    if defer_update:
      kwargs["defer_update"] = True
    if self.takes_request:
      return self.worker.fwd_bwd(request=request, **kwargs)
    if self.payload_keyword:
      kwargs[self.payload_keyword] = request
      return self.worker.fwd_bwd(**kwargs)
    return self.worker.fwd_bwd(request, **kwargs)

  def stage(self, request: Any) -> Any:
    return self.worker.stage_fwd_bwd(request=request)

  def apply_deferred_update(self) -> Any:
    return self.worker.apply_deferred_update()

  def update(self) -> Any:
    return self.worker.update()


def block_tree(tree: Any, depth: int = 0, budget: Optional[List[int]] = None) -> None:
  """Blocks on every leaf of `tree` that has block_until_ready() (JAX arrays do)."""
  budget = [20000] if budget is None else budget
  budget[0] -= 1
  if tree is None or depth > 6 or budget[0] < 0:
    return
  wait = getattr(tree, "block_until_ready", None)
  if callable(wait) and not isinstance(tree, type):
    wait()
    return
  if isinstance(tree, (str, bytes, int, float, bool, np.ndarray, np.generic)):
    return
  if isinstance(tree, Mapping):
    for value in tree.values():
      block_tree(value, depth + 1, budget)
  elif isinstance(tree, (list, tuple, set)):
    for value in tree:
      block_tree(value, depth + 1, budget)
  elif dataclasses.is_dataclass(tree):
    for field in dataclasses.fields(tree):
      block_tree(getattr(tree, field.name, None), depth + 1, budget)
  elif hasattr(tree, "__dict__") and not callable(tree):
    for value in vars(tree).values():
      block_tree(value, depth + 1, budget)


def _blockable(value: Any) -> bool:
  return value is not None and not isinstance(value, type) and callable(
      getattr(value, "block_until_ready", None))


def _find_token(response: Any) -> Any:
  """A blockable array carried by a response (directly, in a mapping, or in its metadata)."""
  if response is None:
    return None
  if _blockable(response):
    return response
  values: List[Any] = []
  if isinstance(response, Mapping):
    values = list(response.values())
  else:
    for name in ("token", "loss", "aux", "result", "metadata"):
      value = getattr(response, name, None)
      if value is not None:
        values.append(value)
  for value in values:
    if isinstance(value, Mapping):
      values.extend(value.values())
      continue
    if _blockable(value):
      return value
  return None


# Where a call's device completion comes from (BENCH_STEP "microbatch_timing_source").
SOURCE_STEP_TIMING = "step_timing"  # the trainer's TRAINER_STEP_TIMING ready times
SOURCE_TOKEN = "token"              # a readiness token (trainer or response)
SOURCE_LOSS = "loss"                # the call's own loss array in the trainer's metric buffer
SOURCE_DISPATCH = "dispatch"        # none: host dispatch intervals


def _trainer_of(worker: Any) -> Any:
  return getattr(worker, "_trainer", None)


def _engines_of(worker: Any) -> List[Any]:
  """The trainer and what it wraps (Tunix's MaxText adapter keeps the engine as `engine` /
  `_engine`), outermost first."""
  found, current = [], _trainer_of(worker)
  while current is not None and len(found) < 4 and all(current is not seen for seen in found):
    found.append(current)
    current = next((getattr(current, name) for name in ("_engine", "engine")
                    if getattr(current, name, None) is not None), None)
  return found


class DeviceObserver:
  """Finds, for each call, something that becomes ready when the call's device work is done.

  In order: a blockable array in the call's response, or the trainer's fresh readiness token
  (`last_fwd_bwd_token` / `last_update_token`, which Tunix's StepTimer reads); else the loss
  that the call's own kernel produced, which MaxText's engine keeps in `_cached_losses` (its
  fwd_bwd returns None at dispatch). Reading that list never changes it. The trainer's own
  ready times (get_step_timing) outrank all of these; the step loop prefers them when a step's
  record has every one.

  `fence()` waits for all device work without consuming anything (`block_all`, in the pod one
  batched wait on every live JAX array): the step end when no update token exists, and the
  profiler's window end when the window's last call has nothing to wait on.
  """

  def __init__(self, block_all: Optional[Callable[[], None]] = None):
    self.block_all = block_all
    # The last token / loss entry seen, held (not only its id) so that a freed array's id can
    # never make a new one look stale.
    self._seen: Dict[str, Any] = {}
    self._seen_loss: Any = None

  def _fresh_trainer_token(self, worker: Any, name: str) -> Any:
    for trainer in _engines_of(worker):
      token = getattr(trainer, name, None)
      if not _blockable(token):
        continue
      if self._seen.get(name) is token:
        return None  # stale: the same array as after the previous call
      self._seen[name] = token
      return token
    return None

  def _fresh_loss(self, worker: Any) -> Any:
    # MaxText's engine appends each fwd_bwd's loss (a WeightedMetric of device arrays, an
    # output of that call's kernel) to `_cached_losses` and clears the list in update()
    # (AI-Hypercomputer/maxtext src/maxtext/training_engine/maxtext_engine.py@e591f30c).
    for trainer in _engines_of(worker):
      losses = getattr(trainer, "_cached_losses", None)
      if not isinstance(losses, list):
        continue
      if not losses:
        return None
      newest = losses[-1]
      if self._seen_loss is newest:
        return None  # the call added nothing: not this call's result
      self._seen_loss = newest
      return newest if _has_blockable(newest) else None
    return None

  def completion(self, worker: Any, response: Any, kind: str) -> Tuple[Any, str]:
    """(waitable, source) for a call just dispatched; (None, "dispatch") when nothing fits."""
    token = _find_token(response)
    if token is not None:
      return token, SOURCE_TOKEN
    name = "last_update_token" if kind == "update" else "last_fwd_bwd_token"
    token = self._fresh_trainer_token(worker, name)
    if token is not None:
      return token, SOURCE_TOKEN
    if kind == "fwd_bwd":
      loss = self._fresh_loss(worker)
      if loss is not None:
        return loss, SOURCE_LOSS
    return None, SOURCE_DISPATCH

  def can_fence(self) -> bool:
    return self.block_all is not None

  def fence(self) -> bool:
    """Waits for all device work; False when there is no way to (the caller says so)."""
    if self.block_all is None:
      return False
    self.block_all()
    return True


def _has_blockable(tree: Any) -> bool:
  """Whether a loss record holds a device array (directly or as a dataclass / mapping field)."""
  if _blockable(tree):
    return True
  if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
    return any(_blockable(getattr(tree, field.name, None)) for field in dataclasses.fields(tree))
  if isinstance(tree, Mapping):
    return any(_blockable(value) for value in tree.values())
  return False


class CompletionWatcher:
  """Records when each watched call's device work completes, without holding up dispatch.

  A daemon thread waits on the calls' waitables in order and notes the clock as each becomes
  ready, as Tunix's StepTimer does with its "step-timer-ready" thread; the step loop never blocks
  between dispatches, so MaxText's own throttle (max_inflight_computations) alone decides how
  far the host runs ahead, as in the e2e run. A call whose waitable was handed over after it was
  already ready gets the hand-over time: an upper bound, reached only when the device was
  waiting for the host anyway.
  """

  def __init__(self, clock: Callable[[], float] = time.monotonic):
    self.clock = clock
    self._lock = threading.Lock()
    self._pending: List[Tuple[Any, Any]] = []
    self._wake = threading.Condition(self._lock)
    self._times: Dict[Any, float] = {}
    self._errors: Dict[Any, BaseException] = {}
    self._done: Dict[Any, threading.Event] = {}
    self._thread = threading.Thread(target=self._run, name="bench-completion", daemon=True)
    self._thread.start()

  def watch(self, key: Any, waitable: Any) -> None:
    with self._lock:
      self._done[key] = threading.Event()
      self._pending.append((key, waitable))
      self._wake.notify()

  def settle(self) -> None:
    """Nothing to do: the thread observes completions as they happen."""

  def _run(self) -> None:
    while True:
      with self._lock:
        while not self._pending:
          self._wake.wait()
        key, waitable = self._pending.pop(0)
      try:
        block_tree(waitable)
        when = self.clock()
        with self._lock:
          self._times[key] = when
      except BaseException as exc:  # pylint: disable=broad-except
        with self._lock:
          self._errors[key] = exc
      self._done[key].set()

  def is_done(self, key: Any) -> bool:
    event = self._done.get(key)
    return event is not None and event.is_set()

  def wait(self, key: Any) -> Optional[float]:
    """Blocks until `key` completed; its completion time (None if it was never watched)."""
    event = self._done.get(key)
    if event is None:
      return None
    event.wait()
    with self._lock:
      if key in self._errors:
        raise self._errors.pop(key)
      return self._times.get(key)

  def drain(self, keys: Sequence[Any]) -> Dict[Any, float]:
    return {key: when for key in keys if (when := self.wait(key)) is not None}

  def forget(self, keys: Sequence[Any]) -> None:
    with self._lock:
      for key in keys:
        self._times.pop(key, None)
        self._done.pop(key, None)


class InlineCompletionWatcher:
  """CompletionWatcher for single-threaded tests on a fake clock: each waitable is waited on
  once the next call has been dispatched (settle), or when asked, in order."""

  def __init__(self, clock: Callable[[], float]):
    self.clock = clock
    self._order: List[Any] = []
    self._waitables: Dict[Any, Any] = {}
    self._times: Dict[Any, float] = {}

  def watch(self, key: Any, waitable: Any) -> None:
    self._order.append(key)
    self._waitables[key] = waitable

  def _resolve_through(self, index: int) -> None:
    for key in self._order[:index + 1]:
      if key not in self._times:
        block_tree(self._waitables[key])
        self._times[key] = self.clock()

  def settle(self) -> None:
    self._resolve_through(len(self._order) - 2)

  def is_done(self, key: Any) -> bool:
    return key in self._times

  def wait(self, key: Any) -> Optional[float]:
    if key not in self._waitables:
      return None
    self._resolve_through(self._order.index(key))
    return self._times[key]

  def drain(self, keys: Sequence[Any]) -> Dict[Any, float]:
    return {key: when for key in keys if (when := self.wait(key)) is not None}

  def forget(self, keys: Sequence[Any]) -> None:
    for key in keys:
      if key in self._waitables:
        self._order.remove(key)
        self._waitables.pop(key)
        self._times.pop(key, None)


# ---- Metrics ------------------------------------------------------------------------------------


def _as_scalar(value: Any) -> Optional[float]:
  """A Python number, a NumPy scalar or a one-element array as a float; None otherwise."""
  if isinstance(value, bool) or value is None:
    return None
  if isinstance(value, (int, float, np.generic)):
    return float(value)
  if hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, Mapping):
    try:
      if int(np.size(value)) == 1:
        return float(np.asarray(value).reshape(()))
    except (TypeError, ValueError):
      return None
  return None


def _as_vector(value: Any) -> Optional[np.ndarray]:
  """A number or a numeric array (any size) as a flat float64 array; None otherwise."""
  if isinstance(value, bool) or value is None or isinstance(value, (str, bytes, Mapping)):
    return None
  if isinstance(value, (int, float, np.generic)) or (hasattr(value, "shape") and
                                                     hasattr(value, "dtype")):
    try:
      array = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
      return None
    return array if array.size else None
  return None


# Field names of a weighted metric: MaxText's and Tunix's WeightedMetric (unreduced_sum /
# denominator: maxtext training_engine/abstract_engine.py@e591f30c, tunix sft/utils.py@c7d8950f),
# and value / weight as other trainers write them.
WEIGHTED_FIELDS = (("unreduced_sum", "denominator"), ("value", "weight"))


def _weighted(value: Any) -> Optional[Tuple[Any, Any]]:
  """(numerator, denominator) of a weighted metric (an object or a mapping), else None."""
  for numerator, denominator in WEIGHTED_FIELDS:
    if isinstance(value, Mapping):
      if numerator in value and denominator in value:
        return value[numerator], value[denominator]
    elif hasattr(value, numerator) and hasattr(value, denominator) and not callable(
        getattr(value, numerator)):
      return getattr(value, numerator), getattr(value, denominator)
  return None


def _is_metrics_buffer(value: Any) -> bool:
  return not isinstance(value, Mapping) and any(
      isinstance(getattr(value, table, None), Mapping)
      for table in ("weighted_metrics", "scalar_metrics"))


def scalar_metrics(tree: Any, warn: Optional[Callable[[str], None]] = None,
                   warned: Optional[set] = None) -> Dict[str, float]:
  """Flattens what a trainer's get_metrics() returns into name -> float for BENCH_STEP.

  Kinds read: Python and NumPy scalars and one-element arrays; weighted metrics (MaxText's and
  Tunix's WeightedMetric: sum(unreduced_sum) / sum(denominator) over the step's micro-batches,
  0 when the denominator is 0); MetricsBuffers (weighted_metrics and scalar_metrics tables whose
  arrays hold one entry per micro-batch: reduced by the buffer's aggregation function for that
  name, else their mean) and lists of them (MaxText's get_metrics() returns one buffer per step
  since the last call; later ones win); lists of numbers (their mean); nested mappings (names
  joined with '/'). Any other kind is named once through `warn`, never dropped silently.
  """
  out: Dict[str, float] = {}
  warned = set() if warned is None else warned

  def note(name: str, value: Any) -> None:
    kind = type(value).__name__
    if warn is not None and (name, kind) not in warned:
      warned.add((name, kind))
      warn(f"metric {name or '<root>'}: a {kind} is not a metric kind the driver reads; left out")

  def weighted(name: str, pair: Tuple[Any, Any], value: Any) -> None:
    numerator, denominator = _as_vector(pair[0]), _as_vector(pair[1])
    if numerator is None or denominator is None:
      note(name, value)
      return
    total = float(denominator.sum())
    out[name] = float(numerator.sum()) / total if total != 0 else 0.0

  def buffer(name: str, value: Any) -> None:
    functions = getattr(value, "aggregation_fns", None)
    functions = functions if isinstance(functions, Mapping) else {}
    for key, item in (getattr(value, "weighted_metrics", None) or {}).items():
      pair = _weighted(item)
      full = f"{name}/{key}" if name else str(key)
      if pair is None:
        note(full, item)
      else:
        weighted(full, pair, item)
    for key, item in (getattr(value, "scalar_metrics", None) or {}).items():
      full = f"{name}/{key}" if name else str(key)
      vector = _as_vector(item)
      if vector is None:
        note(full, item)
        continue
      reduce = functions.get(key)
      try:
        reduced = _as_scalar(reduce(vector)) if callable(reduce) else float(vector.mean())
      except Exception:  # pylint: disable=broad-except
        reduced = None
      if reduced is None:
        note(full, item)
      else:
        out[full] = reduced

  def one(name: str, value: Any, depth: int) -> None:
    if depth > 6 or len(out) >= 256:
      return
    if isinstance(value, (str, bytes, bool)) or value is None:
      return
    scalar = _as_scalar(value)
    if scalar is not None:
      out[name] = scalar  # non-finite values too: they are what the numerics gates catch
      return
    pair = _weighted(value)
    if pair is not None:
      weighted(name, pair, value)
      return
    if _is_metrics_buffer(value):
      buffer(name, value)
      return
    if isinstance(value, Mapping):
      for key, item in value.items():
        one(f"{name}/{key}" if name else str(key), item, depth + 1)
      return
    if isinstance(value, (list, tuple)):
      if value and all(_is_metrics_buffer(item) for item in value):
        for item in value:
          buffer(name, item)
        return
      scalars = [_as_scalar(item) for item in value]
      if value and all(item is not None for item in scalars):
        out[name] = float(np.mean(scalars))
        return
      if value:
        note(name, value)
      return
    note(name, value)

  if tree is not None:
    one("", tree, 0)
  return {name: value for name, value in out.items() if name}


# ---- Profiler, TRAINER_STEP_TIMING --------------------------------------------------------------


class JaxProfiler:
  """jax.profiler traces (the default profiler of the step loop)."""

  def start(self, log_dir: str) -> None:
    import jax  # pylint: disable=import-outside-toplevel
    jax.profiler.start_trace(log_dir)

  def stop(self) -> None:
    import jax  # pylint: disable=import-outside-toplevel
    jax.profiler.stop_trace()


def _json_scalar(value: Any) -> Any:
  """json.dumps fallback for NumPy scalars and small arrays."""
  if isinstance(value, (np.generic, np.ndarray)):
    return value.tolist()
  raise TypeError(f"{type(value).__name__} is not JSON serializable")


@dataclasses.dataclass
class TimingSnapshot:
  """One get_step_timing() record with the driver's clock at the snapshot (call midpoint)."""
  record: Any
  at: float


def log_step_timing(worker: Any, step: int, policy_version: int, clock: Callable[[], float],
                    out: Callable[[str], None] = emit) -> Optional[TimingSnapshot]:
  """Logs one TRAINER_STEP_TIMING line when the worker has get_step_timing (else nothing)."""
  get_timing = getattr(worker, "get_step_timing", None)
  if not callable(get_timing):
    return None
  start = clock()
  snapshot = None
  try:
    timing = get_timing()
    end = clock()
    rtt = end - start
    if timing is None:
      raise ValueError("get_step_timing returned None")
    text = json.dumps(timing, separators=(",", ":"), allow_nan=False, default=_json_scalar)
    snapshot = TimingSnapshot(record=timing, at=start + rtt / 2)
  except Exception as exc:  # pylint: disable=broad-except
    line = f"TRAINER_STEP_TIMING step={step} unavailable: {describe_exception(exc)}"
  else:
    line = "TRAINER_STEP_TIMING step=%d policy_version=%d rtt_s=%.3f timing=%s" % (
        step, policy_version, rtt, text)
  out(line)
  return snapshot


def ready_times(snapshot: Optional[TimingSnapshot],
                calls: int) -> Optional[Tuple[List[float], Optional[float]]]:
  """The trainer's own device completion times of a step's calls and update, on the driver's
  clock ((mb times, update time or None)), when its record has a ready time for every call."""
  if snapshot is None or not isinstance(snapshot.record, Mapping):
    return None
  entries = snapshot.record.get("mb")
  if not isinstance(entries, list) or len(entries) != calls:
    return None
  times = []
  for entry in entries:
    ago = entry.get("ready_ago_s") if isinstance(entry, Mapping) else None
    if isinstance(ago, bool) or not isinstance(ago, (int, float)) or not math.isfinite(ago):
      return None
    times.append(snapshot.at - float(ago))
  update = snapshot.record.get("update")
  update_ago = update.get("ready_ago_s") if isinstance(update, Mapping) else None
  update_at = (snapshot.at - float(update_ago) if isinstance(update_ago, (int, float)) and
               not isinstance(update_ago, bool) else None)
  return times, update_at


# ---- The plan and its records -------------------------------------------------------------------

# What each figure measures; BENCH_SUMMARY carries this table, README explains it.
DEFINITIONS = {
    "seconds": "one optimizer step: from its first fwd_bwd dispatch until all of its device "
               "work, the update included, is done",
    "microbatch_s/device": "from the later of the call's dispatch and the previous call's device "
                           "completion to its own device completion",
    "microbatch_s/dispatch": "host dispatch intervals (the next call's dispatch minus this "
                             "one's; the last call: until the step's end); with an "
                             "asynchronous engine they lag the device by up to "
                             "max_inflight_computations calls",
    "tokens_per_s_per_chip": "rows x tokens_per_row x micro_steps (padding included, the seed's "
                             "definition) / seconds / chips",
    "real_tokens_per_s_per_chip": "real (non-padding) tokens of the step / seconds / chips",
    "first_step_s": "step 0, which includes the compile when the trainer compiles lazily "
                    "(MaxText's compile() only stages)",
}


@dataclasses.dataclass
class BenchPlan:
  """What the step loop runs: payloads, counts, and how to turn time into throughput."""
  name: str
  steps: int
  micro_steps: int
  regular: Any
  final: Any
  tokens_regular: int
  tokens_final: int
  chips: int
  padded_tokens_per_call: int = 0  # rows x tokens_per_row
  profile_window: Optional[Tuple[int, int]] = None
  profile_dir: Optional[str] = None
  stage_boundary: Optional["StagePlan"] = None
  # The actor log-prob pass before each micro-batch (LOGPS_PASS): called with the micro-batch's
  # payload, it returns when the trainer has scored it. None: no pass.
  logps_pass: Optional[Callable[[Any], Any]] = None

  @property
  def tokens_per_step(self) -> int:
    return self.tokens_regular * (self.micro_steps - 1) + self.tokens_final

  @property
  def padded_tokens_per_step(self) -> int:
    return self.padded_tokens_per_call * self.micro_steps

  def profiled(self, step: int) -> bool:
    """Whether any fwd_bwd call of `step` (0-based) is inside PROFILE_WINDOW."""
    if self.profile_window is None:
      return False
    first, last = step * self.micro_steps, (step + 1) * self.micro_steps - 1
    start, count = self.profile_window
    return first <= start + count - 1 and start <= last


@dataclasses.dataclass
class StepRecord:
  step: int
  seconds: float
  microbatch_s: List[float]
  tokens: int
  tokens_per_s_per_chip: float
  fused_update: bool
  microbatch_timing: str = "dispatch"
  microbatch_timing_source: str = SOURCE_DISPATCH
  padded_tokens: int = 0
  real_tokens_per_s_per_chip: float = 0.0
  update: str = UPDATE_EXPLICIT
  staged: bool = False
  profiled: bool = False
  train_step: Optional[int] = None
  metrics: Optional[Dict[str, float]] = None
  logps_pass_s: Optional[List[float]] = None

  def as_json(self) -> Dict[str, Any]:
    record = {
        "step": self.step,
        "seconds": round(self.seconds, 6),
        "microbatch_s": [round(value, 6) for value in self.microbatch_s],
        "microbatch_timing": self.microbatch_timing,
        "microbatch_timing_source": self.microbatch_timing_source,
        "tokens": self.tokens,
        "padded_tokens": self.padded_tokens,
        "tokens_per_s_per_chip": round(self.tokens_per_s_per_chip, 3),
        "real_tokens_per_s_per_chip": round(self.real_tokens_per_s_per_chip, 3),
        "update": self.update,
        "fused_update": self.fused_update,
        "staged": self.staged,
        "profiled": self.profiled,
    }
    if self.logps_pass_s is not None:
      record["logps_pass_s"] = [round(value, 6) for value in self.logps_pass_s]
    if self.train_step is not None:
      record["train_step"] = self.train_step
    if self.metrics:
      record["metrics"] = self.metrics
      dropped, _ = dropped_tokens_of(self.metrics)
      if dropped is not None:
        record["dropped_tokens"] = dropped
    return record


class _Profile:
  """The PROFILE_WINDOW state: starts before the window's first call, stops exactly once."""

  def __init__(self, window: Optional[Tuple[int, int]], log_dir: Optional[str], profiler: Any,
               log: Callable[[str], None]):
    self.window = window
    self.log_dir = log_dir or "/tmp/bench_profile"
    self.profiler = profiler
    self.log = log
    self.started = False
    self.stopped = False

  def is_first(self, call: int) -> bool:
    return self.window is not None and call == self.window[0]

  def is_last(self, call: int) -> bool:
    return self.window is not None and call == self.window[0] + self.window[1] - 1

  def start(self, call: int) -> None:
    if self.started or not self.is_first(call):
      return
    self.log(f"profiler: tracing fwd_bwd calls {self.window[0]}..{sum(self.window) - 1} "
             f"to {self.log_dir}")
    try:
      self.profiler.start(self.log_dir)
    except Exception as exc:  # pylint: disable=broad-except
      # The timings are still worth having; say loudly that there is no trace.
      self.log(f"profiler: start failed, no trace: {describe_exception(exc)}")
      self.window = None
      return
    self.started = True

  def stop(self, reason: str = "") -> None:
    if self.started and not self.stopped:
      self.stopped = True
      self.profiler.stop()
      self.log(f"profiler: trace stopped{reason}")


def _int_or_none(value: Any) -> Optional[int]:
  try:
    return None if value is None or isinstance(value, bool) else int(value)
  except (TypeError, ValueError):
    return None


# ---- The staged step boundary -------------------------------------------------------------------


@dataclasses.dataclass
class StagePlan:
  """STAGE_BOUNDARY as resolved: whether to stage, where, and why (for BENCH_SUMMARY)."""
  requested: str  # auto | on | off
  resolved: bool
  source: str
  before_update: bool = True


class StageState:
  """Staging while it runs: latched off by the first failed or overlap-free stage."""

  def __init__(self, plan: Optional[StagePlan], log: Callable[[str], None]):
    self.plan = plan
    self.active = bool(plan and plan.resolved)
    self.log = log
    self.staged_steps: List[int] = []
    self.latched_off: Optional[str] = None
    self.overlap_unmeasured = False

  def latch_off(self, reason: str) -> None:
    if self.active:
      self.active = False
      self.latched_off = reason
      self.log(f"staged step boundary: off for the rest of the run: {reason}")

  def summary(self) -> Dict[str, Any]:
    return {
        "requested": self.plan.requested if self.plan else "off",
        "resolved": "on" if self.plan and self.plan.resolved else "off",
        "source": self.plan.source if self.plan else "",
        "position": ("before_update" if not self.plan or self.plan.before_update else
                     "after_update"),
        "engaged": bool(self.staged_steps),
        "staged_steps": list(self.staged_steps),
        "latched_off": self.latched_off,
    }


def _stage_reported_no_overlap(response: Any) -> Optional[str]:
  """The worker's own verdict on a stage: a reason when it says it staged nothing or
  overlapped nothing, else None."""
  staged = _find_in(response, "staged")
  if staged is False:
    reason = _find_in(response, "reason")
    if reason:
      return f"the worker staged nothing ({one_line(reason)})"
    return "the worker staged nothing"
  overlap = _find_in(response, "overlap_s")
  if isinstance(overlap, (int, float)) and not isinstance(overlap, bool) and overlap <= 0:
    return "the stage measured no overlap with the device (the worker's overlap_s is 0)"
  return None


# ---- The step loop ------------------------------------------------------------------------------


def run_steps(worker: Any, plan: BenchPlan, *, clock: Callable[[], float] = time.monotonic,
              profiler: Any = None, observer: Optional[DeviceObserver] = None,
              watcher: Any = None, calls: Optional[WorkerCalls] = None,
              out: Callable[[str], None] = emit, log: Callable[[str], None] = say,
              stage_state: Optional[StageState] = None) -> List[StepRecord]:
  """Times plan.steps optimizer steps (numbered from 0) of plan.micro_steps fwd_bwd calls each.

  Every call accumulates gradients; the last of a step asks for the optimizer update, which the
  worker applies inside the call (fused), defers until apply_deferred_update() (staged
  boundary), or leaves to update() (explicit). A step ends when all of its device work, the
  update included, is done: the update's readiness token, else a fence on every device array.
  Micro-batch times are device times when every call of the step has a completion (the
  trainer's ready times, a readiness token, or the call's loss array), else dispatch intervals;
  each BENCH_STEP says which.
  """
  observer = observer or DeviceObserver()
  watcher = watcher if watcher is not None else CompletionWatcher(clock)
  calls = calls or WorkerCalls(worker)
  stage = stage_state or StageState(plan.stage_boundary, log)
  profile = _Profile(plan.profile_window, plan.profile_dir, profiler or JaxProfiler(), log)
  total_calls = plan.steps * plan.micro_steps
  if plan.profile_window is not None and plan.profile_window[0] >= total_calls:
    log(f"profiler: PROFILE_WINDOW starts at call {plan.profile_window[0]} but the run makes "
        f"only {total_calls} fwd_bwd calls: no trace")
  warned_metrics: set = set()
  unfenced_warned = False
  records = []
  call_index = 0
  staged_request = None  # the next step's first request, staged on the trainer host
  try:
    for step in range(plan.steps):
      begins: List[float] = []
      logps_s: List[float] = []
      keys: List[Any] = []
      sources: List[str] = []
      waitables: List[Any] = []
      staged_now = staged_request is not None
      # A worker that fuses the update into the last call defers it while staging is on, so
      # that the stage runs before the update (the seed's --stage_before_update).
      # (The last step defers too, so that every step takes the same path.)
      deferred = bool(stage.active and calls.can_fuse and stage.plan.before_update)
      step_start = clock()
      response = None
      for index in range(plan.micro_steps):
        last = index == plan.micro_steps - 1
        payload = plan.final if last else plan.regular
        if index == 0 and staged_request is not None:
          request, staged_request = staged_request, None
        else:
          request = calls.request(payload)
        if plan.logps_pass is not None:
          # The e2e program scores each micro-batch with the actor before it trains on it.
          pass_start = clock()
          plan.logps_pass(payload)
          logps_s.append(clock() - pass_start)
        profile.start(call_index)
        begins.append(clock())
        if last and deferred:
          response = calls.fwd_bwd(request, apply_optimizer=True, defer_update=True)
        else:
          response = calls.fwd_bwd(request, apply_optimizer=last)
        waitable, source = observer.completion(worker, response, "fwd_bwd")
        key = (step, index)
        keys.append(key if waitable is not None else None)
        waitables.append(waitable)
        sources.append(source)
        if waitable is not None:
          watcher.watch(key, waitable)
          watcher.settle()
        if profile.is_last(call_index) and profile.started:
          # The trace must hold this call's device work: wait for it, consuming nothing.
          if waitable is not None:
            watcher.wait(key)
          elif not observer.fence():
            log("profiler: nothing to wait on for the window's last call; the trace may end "
                "before its device work")
          profile.stop()
        call_index += 1

      # The next step's first micro-batch goes to the trainer host while the device computes
      # this step's last one (before the update when it is deferred or explicit).
      fused = bool(calls.can_fuse and not deferred and response_updated(response))

      def stage_next() -> None:
        nonlocal staged_request
        if not stage.active or step + 1 >= plan.steps:
          return
        # Overlap: the last micro-batch still on the device when the stage begins.
        busy = None
        if keys[-1] is not None:
          is_ready = getattr(waitables[-1], "is_ready", None)
          busy = not (is_ready() if callable(is_ready) else watcher.is_done(keys[-1]))
        next_payload = plan.final if plan.micro_steps == 1 else plan.regular
        request = calls.request(next_payload)
        try:
          result = calls.stage(request)
        except Exception as exc:  # pylint: disable=broad-except
          stage.latch_off(f"stage_fwd_bwd failed: {describe_exception(exc)}; the next "
                          "micro-batch is sent whole")
          return
        staged_request = request  # staged: its train call carries no data
        stage.staged_steps.append(step + 1)
        verdict = _stage_reported_no_overlap(result)
        if verdict is None and busy is False:
          verdict = ("the stage measured no overlap: the step's last micro-batch was done on "
                     "the device before the stage began")
        if busy is None and verdict is None:
          stage.overlap_unmeasured = True
        if verdict is not None:
          stage.latch_off(verdict)

      update_kind = UPDATE_FUSED if fused else (UPDATE_DEFERRED if deferred else UPDATE_EXPLICIT)
      train_step = _int_or_none(_find_in(response, "train_step")) if fused else None
      update_result = None
      if stage.active and stage.plan.before_update and not fused:
        stage_next()
      if deferred:
        update_result = calls.apply_deferred_update()
      elif not fused:
        update_result = calls.update()
      if stage.active and not stage.plan.before_update:
        stage_next()
      if update_result is not None:
        train_step = (int(update_result) if isinstance(update_result, (int, np.integer)) and
                      not isinstance(update_result, bool) else
                      _int_or_none(_find_in(update_result, "train_step")) or train_step)
      update_waitable, _ = observer.completion(worker, update_result, "update")

      # The step's end: every call, then the update.
      observed = watcher.drain([key for key in keys if key is not None])
      if update_waitable is not None:
        block_tree(update_waitable)
      elif not observer.fence() and not unfenced_warned:
        unfenced_warned = True
        log("WARNING: no way to wait for the optimizer update (no update token, no fence): "
            "step times end when the last call's device work is done")
      step_end = clock()
      watcher.forget([key for key in keys if key is not None])

      metrics = None
      if callable(getattr(worker, "get_metrics", None)):
        try:
          metrics = worker.get_metrics()
        except Exception as exc:  # pylint: disable=broad-except
          log(f"get_metrics failed after step {step}: {describe_exception(exc)}")
      snapshot = log_step_timing(worker, step, step, clock, out)

      # Micro-batch times: the trainer's ready times, else observed completions, else dispatch.
      published = ready_times(snapshot, plan.micro_steps)
      ends: Optional[List[float]] = None
      source = SOURCE_DISPATCH
      if published is not None:
        ends, source = published[0], SOURCE_STEP_TIMING
      elif all(key is not None and key in observed for key in keys):
        ends = [observed[key] for key in keys]
        source = SOURCE_LOSS if SOURCE_LOSS in sources else SOURCE_TOKEN
      microbatch_s = []
      if ends is not None:
        for index in range(plan.micro_steps):
          start = begins[index] if index == 0 else max(begins[index], ends[index - 1])
          microbatch_s.append(max(0.0, ends[index] - start))
      else:
        for index in range(plan.micro_steps):
          end = begins[index + 1] if index + 1 < plan.micro_steps else step_end
          microbatch_s.append(max(0.0, end - begins[index]))
      seconds = step_end - step_start
      per_chip = plan.padded_tokens_per_step / seconds / plan.chips if seconds > 0 else 0.0
      real_per_chip = plan.tokens_per_step / seconds / plan.chips if seconds > 0 else 0.0
      record = StepRecord(step=step, seconds=seconds, microbatch_s=microbatch_s,
                          tokens=plan.tokens_per_step, tokens_per_s_per_chip=per_chip,
                          fused_update=fused,
                          microbatch_timing="dispatch" if ends is None else "device",
                          microbatch_timing_source=source,
                          padded_tokens=plan.padded_tokens_per_step,
                          real_tokens_per_s_per_chip=real_per_chip, update=update_kind,
                          staged=staged_now, profiled=plan.profiled(step), train_step=train_step,
                          logps_pass_s=logps_s if plan.logps_pass is not None else None,
                          metrics=scalar_metrics(metrics, warn=log, warned=warned_metrics) or None)
      records.append(record)
      out("BENCH_STEP " + json.dumps(record.as_json(), separators=(",", ":")))
      log(f"{plan.name} step {step} ({step + 1}/{plan.steps}): {seconds:.3f} s, "
          f"{per_chip:.1f} tok/s/chip (padding included), {update_kind} update, micro-batches "
          f"timed by {record.microbatch_timing} ({source})"
          f"{', first micro-batch staged' if staged_now else ''}"
          f"{', profiled' if record.profiled else ''}")
    if profile.started and not profile.stopped:
      profile.stop(f" at the end of the run (the window asked for calls up to "
                   f"{sum(plan.profile_window) - 1}, the run made {total_calls})")
  finally:
    if profile.started and not profile.stopped:
      try:
        profile.stop(" after a failure")
      except Exception as exc:  # pylint: disable=broad-except
        log(f"profiler: stop failed: {describe_exception(exc)}")
  if stage.overlap_unmeasured:
    log("staged step boundary: the driver could not tell whether stages overlapped the device "
        "(no completion to check); staging stayed on")
  return records


# Metric names (their last '/'-separated part) under which a trainer's get_metrics() may report
# the tokens its MoE layers dropped in a step. Neither MaxText (e591f30c) nor Tunix reports one
# today (docs/upstream-trainer-facts.md); a trainer that does is read, and every other run says
# whether its configuration can drop tokens at all.
DROPPED_TOKEN_METRICS = ("dropped_tokens", "tokens_dropped", "num_dropped_tokens",
                         "dropped_token_count")


def dropped_tokens_of(metrics: Optional[Mapping[str, float]]) -> Tuple[Optional[float],
                                                                         Optional[str]]:
  """(count, metric name) of a step's dropped tokens, or (None, None) when it has no such metric.
  Several such metrics (one per layer, say) add up."""
  total, names = None, []
  for name, value in (metrics or {}).items():
    if name.rsplit("/", 1)[-1] in DROPPED_TOKEN_METRICS and math.isfinite(value):
      total = (total or 0.0) + value
      names.append(name)
  return total, (",".join(sorted(names)) if names else None)


def token_dropping(config: Any, records: Sequence[StepRecord],
                   experts: Optional[int]) -> Dict[str, Any]:
  """BENCH_SUMMARY "token_dropping": whether any arm of an A/B can be said to drop no token.

  Counted: every step's metrics carry a dropped-token count (DROPPED_TOKEN_METRICS). Else the
  configuration decides: MaxText drops tokens only when capacity_factor (dense/padded MoE path) or
  ragged_buffer_factor (sparse/ragged path) is positive; -1 (the default) sizes buffers for the
  worst case. "verdict": "none" (counted zero, or dropless by configuration), "dropped" (counted),
  "unknown" (no count and a configuration that may drop), "not-moe".
  """
  counts = [dropped_tokens_of(record.metrics) for record in records]
  known = [count for count, _ in counts if count is not None]
  names = sorted({name for _, name in counts if name})
  factors = {key: getattr(config, key, None) for key in ("capacity_factor", "ragged_buffer_factor")}
  factors = {key: (float(value) if isinstance(value, (int, float)) else None)
             for key, value in factors.items()}
  positive = [key for key, value in factors.items() if value is not None and value > 0]
  known_factors = [value for value in factors.values() if value is not None]
  out: Dict[str, Any] = {
      "dropped_tokens": sum(known) if known else None,
      "counted_steps": len(known),
      "metric": names[0] if len(names) == 1 else (names or None),
      **factors,
  }
  if known and len(known) == len(records):
    out["verdict"] = "dropped" if sum(known) > 0 else "none"
    out["why"] = f"counted by the trainer ({', '.join(names)}) in every step"
  elif known and sum(known) > 0:
    out["verdict"] = "dropped"
    out["why"] = f"counted by the trainer ({', '.join(names)}) in {len(known)} steps"
  elif not experts:
    out["verdict"] = "not-moe"
    out["why"] = "the trainer's config has no experts"
  elif known_factors and not positive:
    out["verdict"] = "none"
    out["why"] = ("dropless by configuration: " + ", ".join(
        f"{key} {value:g}" for key, value in factors.items() if value is not None)
                  + " (not positive: buffers sized for the worst case)")
  else:
    out["verdict"] = "unknown"
    out["why"] = ("the trainer counts no dropped tokens and "
                  + (", ".join(f"{key} {factors[key]:g}" for key in positive)
                     + " lets its MoE layers drop tokens" if positive
                     else "its config names neither capacity_factor nor ragged_buffer_factor"))
  return out


def summarize(plan: BenchPlan, records: Sequence[StepRecord], *, rows: int, tokens_per_row: int,
              real_len: int, segments: int, final_rows: int, layers: Optional[int],
              topk: Optional[int], experts: Optional[int], routing: Sequence[LayerRouting],
              routing_final: Optional[Sequence[LayerRouting]], knobs: Mapping[str, Any],
              stage: Optional[Mapping[str, Any]] = None,
              extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
  """BENCH_SUMMARY. Steps count from 0; step 0 includes the compile (first_step_s).

  The means (mean_step_s, median_microbatch_s, both tokens/s/chip) cover the steady steps: every
  step but step 0 and the profiled ones (step 0 alone when it is the only one). The median
  micro-batch is over micro-batches 3..MICRO_STEPS (1-based; the first two of a step follow the
  step boundary), or all of a step's when it has fewer than 3, and only when every steady step
  timed its micro-batches the same way (microbatch_timing "mixed" otherwise: no median).
  """
  step_s = [record.seconds for record in records]
  steady = [r for r in records[1:] if not r.profiled]
  if len(records) == 1:
    steady = list(records)
  mean_step = statistics.fmean(r.seconds for r in steady) if steady else None
  modes = sorted({record.microbatch_timing for record in steady})
  timing = modes[0] if len(modes) == 1 else ("mixed" if modes else None)
  sources = sorted({record.microbatch_timing_source for record in steady})
  pool = []
  for record in steady:
    values = record.microbatch_s
    pool.extend(values[2:] if len(values) >= 3 else values)
  median_mb = statistics.median(pool) if pool and timing != "mixed" else None
  per_chip = plan.padded_tokens_per_step / mean_step / plan.chips if mean_step else None
  real_per_chip = plan.tokens_per_step / mean_step / plan.chips if mean_step else None
  summary = {
      "name": plan.name,
      "steps": plan.steps,
      "micro_steps": plan.micro_steps,
      "rows": rows,
      "tokens_per_row": tokens_per_row,
      "real_len": real_len,
      "segments": segments,
      "final_rows": final_rows,
      "layers": layers,
      "topk": topk,
      "experts": experts,
      "chips": plan.chips,
      "tokens_per_step": plan.tokens_per_step,
      "padded_tokens_per_step": plan.padded_tokens_per_step,
      "step_s": [round(value, 6) for value in step_s],
      "first_step_s": round(records[0].seconds, 6) if records else None,
      "steady_steps": [record.step for record in steady],
      "profiled_steps": [record.step for record in records if record.profiled],
      "mean_step_s": None if mean_step is None else round(mean_step, 6),
      "median_microbatch_s": None if median_mb is None else round(median_mb, 6),
      "microbatch_timing": timing,
      "microbatch_timing_source": sources[0] if len(sources) == 1 else sources,
      "tokens_per_s_per_chip": None if per_chip is None else round(per_chip, 3),
      "real_tokens_per_s_per_chip": None if real_per_chip is None else round(real_per_chip, 3),
      "update": records[-1].update if records else None,
      "fused_update": bool(records and records[-1].fused_update),
      "stage_boundary": dict(stage) if stage is not None else None,
      "definitions": DEFINITIONS,
      "routing": [entry.as_json() for entry in routing],
      "knobs": dict(knobs),
  }
  if routing_final is not None:
    summary["routing_final"] = [entry.as_json() for entry in routing_final]
  if extra:
    summary.update(extra)
  return summary


def count_chips(devices: Sequence[Any]) -> Tuple[int, int]:
  """(chips, devices per chip) of a device list.

  TPU devices carry chip coordinates: devices that share (slice, coords) are cores of one chip
  (TPU v7x has two). Without coordinates the device kind decides (v2, v3 and 7x: 2 per chip).
  """
  if not devices:
    return 0, 1
  keys = set()
  for device in devices:
    coords = getattr(device, "coords", None)
    if coords is None:
      keys = None
      break
    keys.add((getattr(device, "slice_index", 0), tuple(coords)))
  if keys:
    chips = len(keys)
    return chips, max(1, len(devices) // chips)
  kind = str(getattr(devices[0], "device_kind", "")).lower()
  per_chip = 2 if re.search(r"7x|v7|\bv2\b|\bv3\b", kind) else 1
  return max(1, len(devices) // per_chip), per_chip


# ------------------------------------------------------------------------------------------------
# The Tunix part: build the worker, algorithm, batch config and warm-up payload as the e2e does.
# ------------------------------------------------------------------------------------------------


def split_runtime_argv(name: str, words: Sequence[str]) -> Tuple[Optional[str], List[str]]:
  """Separates tunix.experimental.distributed.runtime.main's flags from the process's argv."""
  if "--process" in words:
    raise SettingsError(f"{name} holds several processes (--process); give one process's argv")
  parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
  for flag in RUNTIME_FLAGS:
    parser.add_argument(flag, default=None)
  known, rest = parser.parse_known_args(list(words))
  return known.process_main, rest


def process_module(process_main: Optional[str], default: str) -> str:
  if not process_main:
    return default
  return process_main.rsplit(".", 1)[0] if "." in process_main else process_main


def flag_value(words: Sequence[str], flag: str) -> Optional[str]:
  """The value of --flag=V or --flag V in argv words (last one wins)."""
  value = None
  for index, word in enumerate(words):
    if word.startswith(flag + "="):
      value = word[len(flag) + 1:]
    elif word == flag and index + 1 < len(words):
      value = words[index + 1]
  return value


# GRPO config fields that gate or re-weight tokens by the policy's log-probs. Fields named here
# or matching the pattern are reset (None, or False for a boolean switch) by LOGP_GATES=off.
LOGP_GATE_FIELDS = ("seq_logprob_error_threshold", "truncated_importance_sampling_type",
                    "truncated_importance_sampling_ratio_min",
                    "truncated_importance_sampling_ratio", "sampler_is")
LOGP_GATE_PATTERN = re.compile(r"logprob_error_threshold|^truncated_importance_sampling|^tis_"
                               r"|^sampler_is$")
LOGP_GATE_KEEP = ("sampler_is_threshold", "sampler_is_length_buckets")


def disable_logp_gates(config: Any) -> List[str]:
  """Turns off every log-prob gate that `config` (a Namespace or a dataclass) has set."""
  if dataclasses.is_dataclass(config):
    names = [field.name for field in dataclasses.fields(config)]
  elif hasattr(config, "__dict__"):
    names = list(vars(config))
  else:
    return []
  changed = []
  for name in names:
    if name in LOGP_GATE_KEEP:
      continue
    if name not in LOGP_GATE_FIELDS and not LOGP_GATE_PATTERN.search(name):
      continue
    value = getattr(config, name, None)
    if value is None or value is False:
      continue
    off = False if isinstance(value, bool) else None
    object.__setattr__(config, name, off)
    changed.append(f"{name}={value!r}")
  return changed


def import_tunix(module: str, purpose: str) -> Any:
  try:
    return importlib.import_module(module)
  except ImportError as exc:
    raise TunixMissing(f"cannot import {module} (needed to {purpose}): "
                       f"{describe_exception(exc)}") from None


def require(module: Any, name: str, purpose: str) -> Any:
  value = getattr(module, name, None)
  if value is None:
    raise TunixMissing(f"{module.__name__}.{name} is missing in this image's Tunix "
                       f"(needed to {purpose})")
  return value


def parse_with(parse: Callable[[List[str]], Any], words: List[str], name: str) -> Any:
  """Runs a Tunix argument parser; its rejection (argparse exits) becomes a one-line error."""
  captured = io.StringIO()
  try:
    with contextlib.redirect_stderr(captured):
      return parse(words)
  except SystemExit as exc:
    lines = [line for line in captured.getvalue().splitlines() if line.strip()]
    reason = lines[-1] if lines else f"exit status {exc.code}"
    raise SettingsError(f"{name} is rejected by Tunix's argument parser: {reason}") from None


def plan_call(function: Callable[..., Any], name: str, required: Mapping[str, Any],
              optional: Optional[Mapping[str, Any]] = None,
              log: Callable[[str], None] = say) -> Dict[str, Any]:
  """The keyword arguments for a strict call of a Tunix function (see call_checked), checked
  against its signature without calling it (the preflight checks calls this way)."""
  where = f"{name} ({source_file(function)})"
  try:
    signature = inspect.signature(function)
  except (TypeError, ValueError):
    raise TunixMissing(f"{where} has no signature the driver can check") from None
  params, var_kw = _named_params(function)
  for key in required:
    if key not in params and not var_kw:
      raise TunixMissing(f"{where} takes no argument {key!r}, which the driver must pass "
                         f"(its signature: {name}{signature})")
  optional = dict(optional or {})
  unknown = [param.name for param in params.values()
             if param.default is inspect.Parameter.empty and param.name not in ("self", "cls")
             and param.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                inspect.Parameter.KEYWORD_ONLY)
             and param.name not in required and param.name not in optional]
  if unknown:
    raise TunixMissing(f"{where} requires {', '.join(map(repr, unknown))}, which the driver "
                       f"does not know (its signature: {name}{signature})")
  kwargs = dict(required)
  for key, value in optional.items():
    if key in params:
      kwargs[key] = value
    else:
      log(f"{name}: this Tunix takes no {key!r} (optional); left out")
  return kwargs


def call_checked(function: Callable[..., Any], name: str, required: Mapping[str, Any],
                 optional: Optional[Mapping[str, Any]] = None,
                 log: Callable[[str], None] = say) -> Any:
  """Calls a Tunix function with keyword arguments, strictly.

  Every `required` argument must be one the signature names (or takes through **kwargs); an
  `optional` one (each call site lists them) is passed only when the signature names it, and a
  line says when it is left out. A parameter without a default that the driver does not know is
  an error too. Errors name the function, the argument and the module's file, so a Tunix whose
  API moved stops the run instead of silently timing something else.
  """
  return function(**plan_call(function, name, required, optional, log))


def source_file(function: Any) -> str:
  """The file a function, class or module comes from, for error messages."""
  try:
    return inspect.getsourcefile(function) or inspect.getfile(function)
  except (TypeError, OSError):
    module = sys.modules.get(getattr(function, "__module__", "") or "")
    return getattr(module, "__file__", None) or "<unknown file>"


class Fallbacks:
  """What the driver does instead when the image lacks something the e2e run has. Each one stops
  the run unless ALLOW_FALLBACKS=1; then BENCH_SUMMARY lists every one taken."""

  def __init__(self, allowed: bool, log: Callable[[str], None] = say):
    self.allowed = allowed
    self.log = log
    self.taken: List[str] = []

  def take(self, problem: str, instead: str) -> None:
    if not self.allowed:
      raise TunixMissing(f"{problem}; ALLOW_FALLBACKS=1 would {instead}")
    self.taken.append(f"{problem}: {instead}")
    self.log(f"FALLBACK (ALLOW_FALLBACKS=1): {problem}: {instead}")


def initialize_jax() -> None:
  """What the runtime's K8s context does: Pathways when JAX_PLATFORMS and JAX_BACKEND_TARGET are
  set, else jax.distributed."""
  try:
    contexts = importlib.import_module(
        "tunix.experimental.distributed.runtime.contexts.k8s_context")
    contexts.K8sJaxContext().initialize()
    return
  except (ImportError, AttributeError):
    pass
  if os.environ.get("JAX_PLATFORMS") and os.environ.get("JAX_BACKEND_TARGET"):
    importlib.import_module("pathwaysutils").initialize()
  else:
    importlib.import_module("jax").distributed.initialize()


def _field_layout(payload: Any) -> Dict[str, Tuple[Tuple[int, ...], Any]]:
  """name -> (shape, dtype) of the array fields of a (possibly abstract) payload."""
  layout = {}
  if dataclasses.is_dataclass(payload):
    items = [(field.name, getattr(payload, field.name, None))
             for field in dataclasses.fields(payload)]
  else:
    items = list(vars(payload).items())
  for name, value in items:
    if value is not None and hasattr(value, "shape") and hasattr(value, "dtype"):
      layout[name] = (tuple(int(dim) for dim in value.shape), np.dtype(value.dtype))
  return layout


def _replace(payload: Any, **changes: Any) -> Any:
  if hasattr(payload, "replace") and callable(payload.replace):
    return payload.replace(**changes)
  return dataclasses.replace(payload, **changes)


def concrete_segment_counts(warmup: Any) -> Optional[List[int]]:
  """Each row's segment count when the warm-up payload holds concrete segment ids (the seed's
  rule), else None (an abstract payload: ShapeDtypeStructs)."""
  segment_ids = getattr(warmup, "segment_ids", None)
  if not isinstance(segment_ids, np.ndarray) or segment_ids.ndim != 2 or not segment_ids.size:
    return None
  counts = [len(np.unique(row[row > 0])) for row in segment_ids]
  if not any(counts):
    return None  # all padding: zeros standing in for shapes, not a packing
  return [max(1, count) for count in counts]


def trajectory_segments(real_len: int, max_prompt: Optional[int],
                        max_response: Optional[int]) -> Optional[int]:
  """As many max-length trajectories (prompt + response, each starting on the 64-token grid) as
  fit the real length, at least 1; None when the lengths are unknown."""
  if not max_prompt or not max_response:
    return None
  longest = int(max_prompt) + int(max_response)
  stride = -(-longest // SEGMENT_ALIGN) * SEGMENT_ALIGN
  return max(1, 1 + (real_len - longest) // stride) if real_len >= longest else 1


@dataclasses.dataclass
class Choice:
  """A setting the driver resolved, and where it came from (logged, and in BENCH_SUMMARY)."""
  value: Any
  source: str


def resolve_padding(settings: Settings) -> Tuple[Choice, Choice]:
  """PAD_POSITION and PAD_ALIGN: the knob, else the e2e orchestrator's --pack_pad_position /
  --pack_pad_align, else its PACK_PAD_POSITION / PACK_PAD_ALIGN environment (ORCH_* copies),
  else Tunix's packer default (end, 4096)."""
  words = settings.orch_argv

  def pick(knob: Optional[Any], knob_name: str, flag: str, env_value: Optional[str],
           env_name: str, default: Any, parse: Callable[[str, str], Any]) -> Choice:
    if knob is not None:
      return Choice(knob, f"{knob_name} (the knob)")
    value = flag_value(words, flag)
    if value is not None:
      return Choice(parse(f"ORCH_ARGV {flag}", value), f"ORCH_ARGV {flag}={value}")
    if env_value is not None:
      return Choice(parse(env_name, env_value), f"orchestrator env {env_name}={env_value}")
    return Choice(default, "the packer's default (the e2e orchestrator sets none)")

  position = pick(settings.pad_position, "PAD_POSITION", "--pack_pad_position",
                  settings.orch_pack_pad_position, "PACK_PAD_POSITION", "end",
                  lambda name, text: parse_choice(name, text, ("end", "start")))
  align = pick(settings.pad_align, "PAD_ALIGN", "--pack_pad_align", settings.orch_pack_pad_align,
               "PACK_PAD_ALIGN", 4096, parse_pad_align)
  return position, align


def resolve_routing(settings: Settings) -> Choice:
  """ROUTING: whether the payload replays routing (routed_experts). auto follows the e2e run:
  ORCH_ARGV --return_routed_experts, else the orchestrator's RETURN_ROUTED_EXPERTS environment;
  when neither says, on, as the seed always replayed (and the source says so)."""
  if settings.routing != "auto":
    return Choice(settings.routing == "on", f"ROUTING={settings.routing}")
  flag = bool_flag(settings.orch_argv, "--return_routed_experts")
  if flag is not None:
    return Choice(flag, f"auto: ORCH_ARGV --return_routed_experts={'true' if flag else 'false'}")
  if settings.orch_return_routed_experts is not None:
    value = parse_bool_word("ORCH_RETURN_ROUTED_EXPERTS", settings.orch_return_routed_experts)
    return Choice(value, "auto: orchestrator env RETURN_ROUTED_EXPERTS="
                  f"{settings.orch_return_routed_experts}")
  return Choice(True, "auto: the e2e run does not say; replaying, as the seed always did")


def rollout_logps_requested(orch_args: Any) -> Choice:
  """Whether the e2e program asks the rollouts for log-probs: it uses them as the old ones
  (--use_rollout_logps, default on in run_deepswe_dist), or a gate or weighting needs them
  (truncated importance sampling, the sequence log-prob error threshold, sampler IS buckets)."""
  reasons = []
  for name in ("use_rollout_logps", "truncated_importance_sampling_type",
               "seq_logprob_error_threshold", "sampler_is_length_buckets"):
    value = getattr(orch_args, name, None)
    if value not in (None, False, "", 0, "none"):
      reasons.append(f"--{name}={value}")
  return Choice(bool(reasons), ", ".join(reasons) if reasons else
                "no --use_rollout_logps, TIS type, sequence log-prob threshold or IS buckets")


def resolve_logps_pass(settings: Settings, algo_config: Any, orch_args: Any,
                       rollout_logps: Choice, worker: Any, request_class: Any,
                       log: Callable[[str], None] = say) -> Choice:
  """LOGPS_PASS: whether each micro-batch is scored by the actor (per_token_logps) before it
  trains, as the e2e program does when it checks the sampler against the trainer outside the
  loss: the batch carries rollout log-probs, --use_rollout_logps is on, and the agreement cannot
  be fused into the GRPO loss (a newer rl_program: policy_loss_fn grpo, no
  log_sampler_trainer_agreement, one iteration, a full mini-batch; an older one never fuses)."""
  missing = []
  if not callable(getattr(worker, "per_token_logps", None)):
    missing.append("TrainerWorker.per_token_logps")
  if request_class is None:
    missing.append("datatypes.LogprobsRequest")
  if settings.logps_pass == "off":
    return Choice(False, "LOGPS_PASS=off")
  if settings.logps_pass == "on":
    if missing:
      raise SettingsError(f"LOGPS_PASS=on but this image's Tunix lacks {', '.join(missing)}")
    return Choice(True, "LOGPS_PASS=on")
  uses = bool(rollout_logps.value and getattr(orch_args, "use_rollout_logps", False))
  reason = "the payload carries rollout log-probs and --use_rollout_logps is on"
  if uses and hasattr(algo_config, "policy_loss_fn"):
    batch = getattr(orch_args, "batch_size", None)
    mini = getattr(orch_args, "mini_batch_size", None) or batch
    fused = (getattr(algo_config, "policy_loss_fn", None) == "grpo" and
             not getattr(algo_config, "log_sampler_trainer_agreement", False) and
             getattr(algo_config, "num_iterations", 1) == 1 and
             (batch is None or mini is None or mini >= batch))
    if fused:
      return Choice(False, f"auto: {reason}, but the GRPO loss checks the agreement itself")
  if not uses:
    return Choice(False, "auto: the e2e program makes no actor log-prob pass (no rollout "
                  "log-probs used as old ones)")
  if missing:
    log(f"WARNING: the e2e program scores each micro-batch with the actor first ({reason}) but "
        f"this image's Tunix lacks {', '.join(missing)}: the bench CANNOT reproduce that pass")
    return Choice(False, f"auto: {reason}; not reproducible: lacks {', '.join(missing)}")
  return Choice(True, f"auto: {reason}")


def logp_gates_left_on(config: Any) -> List[str]:
  """The log-prob gates still set in a config: the fields LOGP_GATES=off turns off, found as
  fields, attributes or properties (a read-only property cannot be turned off)."""
  if config is None:
    return []
  left = []
  for name in sorted(set(dir(config))):
    if name.startswith("_") or name in LOGP_GATE_KEEP:
      continue
    if name not in LOGP_GATE_FIELDS and not LOGP_GATE_PATTERN.search(name):
      continue
    try:
      value = getattr(config, name)
    except Exception:  # pylint: disable=broad-except
      continue
    if callable(value) or value is None or value is False:
      continue
    left.append(f"{name}={value!r}")
  return left


@dataclasses.dataclass
class TunixSetup:
  worker: Any
  make_request: Optional[Callable[[Any], Any]]
  warmup: Any
  warmup_is_abstract: bool
  rows: int
  tokens: int
  num_segments: Optional[int]
  max_segments_per_row: Optional[int]
  routing_shape: Optional[Tuple[int, int]]
  experts: Optional[int]
  vocab: int
  pad_id: int
  eos_id: int
  maxtext_output_directory: Optional[str]
  payload_signature: Optional[Callable[[Any], Any]]
  signature_mismatch: Optional[Callable[[Any, Any], str]]
  outer_context: Any = None
  max_prompt_length: Optional[int] = None
  max_response_length: Optional[int] = None
  warmup_segment_counts: Optional[List[int]] = None
  rollout_as_old: bool = False
  logps_request_class: Any = None
  temperature: float = 1.0
  choices: Dict[str, Choice] = dataclasses.field(default_factory=dict)
  fallbacks: Optional[Fallbacks] = None
  config: Any = None  # the trainer's model config (MaxText's), when it exposes one


def _token_ids(orch_args: Any, trainer_args: Any,
               fallbacks: Fallbacks) -> Tuple[int, int, Optional[int]]:
  """(pad_id, eos_id, tokenizer vocabulary size) as run_deepswe_dist gets them: the tokenizer's
  pad id (its eos when it has none), and its eos id (the pad id when it has none)."""
  path = (getattr(orch_args, "tokenizer_path", "") or os.environ.get("MODEL_DIR") or
          getattr(orch_args, "model_id", None))
  try:
    transformers = importlib.import_module("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=True)
    if tokenizer.pad_token_id is None and tokenizer.eos_token is not None:
      tokenizer.pad_token = tokenizer.eos_token
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    eos_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else pad_id
    return int(pad_id), int(eos_id), len(tokenizer)
  except Exception as exc:  # pylint: disable=broad-except
    fallbacks.take(f"the tokenizer {path!r} did not load ({describe_exception(exc)})",
                   "take the pad id from tunix.utils.maxtext_utils.get_tokenizer_pad_id and use "
                   "it as the eos id too")
  maxtext_utils = import_tunix("tunix.utils.maxtext_utils", "find the tokenizer's pad id")
  get_pad = require(maxtext_utils, "get_tokenizer_pad_id", "find the tokenizer's pad id")
  pad_id = int(get_pad(getattr(trainer_args, "model_id", None),
                       getattr(trainer_args, "tokenizer_path", ""),
                       getattr(trainer_args, "model_dir", None)))
  return pad_id, pad_id, None


# Optional arguments per Tunix function: passed when the signature names them (newer Tunix),
# left out with a line otherwise. Everything else the driver passes is required.
BATCH_CONFIG_OPTIONAL = ("trainer_dp", "trainer_expert", "segment_align_multiple",
                         "pack_pad_position", "pack_pad_align")
WARMUP_OPTIONAL = ("rollout_logprobs", "sampler_is", "sampler_is_threshold",
                   "seq_logprob_error_threshold")


def make_batch_config(orch_node: Any, batch_assembly: Any, orch_args: Any, pad_id: int) -> Any:
  """The orchestrator's BatchConfig: its _batch_config (newer run_deepswe_dist) when the
  signature is one the driver recognises, else BatchConfig from the parsed argv."""
  make_config = getattr(orch_node, "_batch_config", None)
  if callable(make_config):
    params, var_kw = _named_params(make_config)
    names = list(params)
    kinds = [param.kind for param in params.values()]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(names) == 1 and kinds[0] in positional and not var_kw:
      return make_config(orch_args)
    if len(names) == 2 and names[1] == "pad_id" and kinds[0] in positional:
      return (make_config(orch_args, pad_id=pad_id)
              if kinds[1] == inspect.Parameter.KEYWORD_ONLY else make_config(orch_args, pad_id))
    raise TunixMissing(f"_batch_config{inspect.signature(make_config)} in "
                       f"{source_file(make_config)}: not a signature the driver recognises "
                       "((args), (args, pad_id) or (args, *, pad_id))")
  config_class = require(batch_assembly, "BatchConfig", "build the batch configuration")
  required = {"pad_id": pad_id}
  for name in ("max_prompt_length", "max_response_length", "max_seq_token_per_tpu",
               "max_segments_per_packed_row", "trainer_fsdp"):
    required[name] = getattr(orch_args, name, None)
  optional = {name: getattr(orch_args, name) for name in BATCH_CONFIG_OPTIONAL
              if hasattr(orch_args, name)}
  return call_checked(config_class, "BatchConfig", required, optional)


def build_tunix(settings: Settings, fallbacks: Optional[Fallbacks] = None) -> TunixSetup:
  """Builds the trainer worker, GRPO algorithm, assembler and warm-up payload through Tunix."""
  fallbacks = fallbacks or Fallbacks(settings.allow_fallbacks)
  trainer_main, trainer_words = split_runtime_argv("TRAINER_ARGV", settings.trainer_argv)
  orch_main, orch_words = split_runtime_argv("ORCH_ARGV", settings.orch_argv)
  choices: Dict[str, Choice] = {}

  # JAX first: importing the orchestrator module sets JAX_PLATFORMS=cpu when it is unset.
  trainer_node = import_tunix(process_module(trainer_main, DEFAULT_TRAINER_MODULE),
                              "parse the trainer argv")
  trainer_args = parse_with(require(trainer_node, "_parse_args", "parse the trainer argv"),
                            trainer_words, "TRAINER_ARGV")
  if settings.profile_window is not None and getattr(trainer_args, "profiler_steps", 0):
    say(f"PROFILE_WINDOW is set: the trainer's own profiler (--profiler_steps="
        f"{trainer_args.profiler_steps}) is turned off so that one trace runs")
    trainer_args.profiler_steps = 0
  initialize_jax()
  made = require(trainer_node, "_create_trainer_factory", "build the trainer")(trainer_args)
  factory, mesh = made if isinstance(made, tuple) and len(made) == 2 else (made, None)
  worker_module = import_tunix("tunix.experimental.worker.trainer_worker", "build the worker")
  worker_class = require(worker_module, "TrainerWorker", "build the worker")
  worker_kwargs: Dict[str, Any] = {"trainer_factory": factory,
                                   "worker_id": getattr(trainer_args, "worker_id", "trainer-0")}
  params, _ = _named_params(worker_class.__init__)
  outer_context = None
  optional: Dict[str, Any] = {}
  if mesh is not None and "execution_context" in params:
    optional["execution_context"] = mesh  # the worker enters it around every method
  elif mesh is not None:
    outer_context = mesh  # a worker that cannot take it: the driver enters it
  # The log-prob chunk reaches the worker through its constructor when it takes one, as
  # run_trainer_node passes it; otherwise only through the trainer's own config.
  chunk = int(getattr(trainer_args, "compute_logps_chunk_size", 0) or 0)
  if chunk > 0:
    if "logps_chunk_size" in params:
      optional["logps_chunk_size"] = chunk
      choices["logps_chunk"] = Choice(chunk, "TrainerWorker(logps_chunk_size=) from "
                                      "--compute_logps_chunk_size")
    else:
      choices["logps_chunk"] = Choice(chunk, "this TrainerWorker takes no logps_chunk_size: the "
                                      "chunk reaches the loss through the trainer's config only")
  worker = call_checked(worker_class, "TrainerWorker", worker_kwargs, optional)
  if callable(getattr(worker, "initialize", None)):
    worker.initialize()  # builds a lazily constructed trainer; idempotent

  orch_node = import_orchestrator(orch_main)
  orch_args = parse_with(require(orch_node, "_parse_args", "parse the orchestrator argv"),
                         orch_words, "ORCH_ARGV")
  if getattr(orch_args, "mini_batch_size", 0) is None:
    orch_args.mini_batch_size = orch_args.batch_size
  # The payload's log-prob fields follow the e2e program, before LOGP_GATES changes anything.
  rollout_logps = rollout_logps_requested(orch_args)
  choices["rollout_logps"] = rollout_logps
  rollout_as_old = bool(getattr(orch_args, "use_rollout_logps", False))
  algo, algo_config, _ = build_algo(settings, orch_node, orch_args)

  pad_id, eos_id, tokenizer_vocab = _token_ids(orch_args, trainer_args, fallbacks)
  choices["eos_id"] = Choice(eos_id, "the tokenizer's eos id (its pad id when it has none), as "
                             "run_deepswe_dist configures the worker")
  worker.with_loss_fn(algo.loss_fn(), has_aux=True)
  worker.with_gen_model_input_fn(algo.build_gen_model_input_fn(pad_id=pad_id, eos_id=eos_id))

  batch_assembly = import_tunix("tunix.experimental.orchestrator.batch_assembly",
                                "build the batch configuration")
  batch_config = make_batch_config(orch_node, batch_assembly, orch_args, pad_id)
  create = require(batch_assembly, "create_batch_assembler", "build the batch assembler")
  generations = getattr(algo, "num_generations", orch_args.num_generations)
  create_params, _ = _named_params(create)
  group_name = "group_size" if "group_size" in create_params else "num_generations"
  assembler = call_checked(create, "create_batch_assembler", {
      group_name: generations,
      "mini_batch_size": getattr(algo, "mini_batch_size", orch_args.mini_batch_size),
      "train_micro_batch_size": getattr(algo, "train_micro_batch_size",
                                        orch_args.train_micro_batch_size),
      "batch_config": batch_config})
  packed_class = getattr(batch_assembly, "SequencePackedBatchAssembler", None)
  if packed_class is not None and not isinstance(assembler, packed_class):
    raise SettingsError("ORCH_ARGV does not select sequence packing (--max_seq_token_per_tpu): "
                        f"the assembler is {type(assembler).__name__}, whose shapes depend on "
                        "the data")

  # The routing shape the trainer reports, and the model sizes the payload needs.
  routing = resolve_routing(settings)
  choices["routing"] = routing
  trainer_shape = None
  if callable(getattr(worker, "routed_experts_shape", None)):
    trainer_shape = worker.routed_experts_shape()
  config = getattr(getattr(worker, "_trainer", None), "_config", None)
  if trainer_shape is None and config is not None:
    layers = getattr(config, "num_decoder_layers", None)
    topk = getattr(config, "num_experts_per_tok", None)
    trainer_shape = (int(layers), int(topk)) if layers and topk else None
  if routing.value and trainer_shape is None and settings.routing == "on":
    raise SettingsError("ROUTING=on but the trainer reports no routing shape (a dense model?)")
  routing_shape = tuple(trainer_shape) if routing.value and trainer_shape else None
  experts = getattr(config, "num_experts", None)
  vocab = getattr(config, "vocab_size", None) or tokenizer_vocab
  if not vocab:
    raise TunixMissing("cannot tell the vocabulary size: the trainer has no config.vocab_size "
                       "and the tokenizer did not load")
  if routing_shape is not None and not experts:
    raise TunixMissing("the trainer reports a routing shape but its config has no num_experts")

  warmup, abstract = build_warmup(assembler, algo, algo_config, routing_shape, rollout_logps,
                                  fallbacks)
  completion = getattr(warmup, "completion_ids")
  rows, tokens = int(completion.shape[0]), int(completion.shape[1])
  num_segments = getattr(warmup, "num_segments", None)
  max_segments = getattr(assembler, "max_segments_per_packed_row",
                         getattr(orch_args, "max_segments_per_packed_row", None))

  datatypes = import_tunix("tunix.experimental.common.datatypes", "build train requests")
  request_class = getattr(datatypes, "TrainRequest", None)
  logps_request_class = getattr(datatypes, "LogprobsRequest", None)
  choices["logps_pass"] = resolve_logps_pass(settings, algo_config, orch_args, rollout_logps,
                                             worker, logps_request_class)

  def make_request(payload: Any) -> Any:
    if request_class is None:
      raise TunixMissing("datatypes.TrainRequest is missing in this image's Tunix (needed to "
                         "call fwd_bwd(request=...))")
    metadata = dict(getattr(payload, "metadata", None) or {})
    return call_checked(request_class, "TrainRequest", {
        "request_id": f"train_req_{uuid.uuid4().hex[:8]}", "payload": payload,
        "metadata": metadata})

  output_dir = getattr(trainer_args, "maxtext_output_directory", None) or flag_value(
      trainer_words, "--maxtext_output_directory")
  return TunixSetup(
      worker=worker, make_request=make_request, warmup=warmup, warmup_is_abstract=abstract,
      rows=rows, tokens=tokens, num_segments=_int_or_none(num_segments),
      max_segments_per_row=_int_or_none(max_segments), routing_shape=routing_shape,
      experts=_int_or_none(experts), vocab=int(vocab), pad_id=int(pad_id), eos_id=int(eos_id),
      maxtext_output_directory=output_dir,
      payload_signature=getattr(worker_module, "payload_signature", None),
      signature_mismatch=getattr(worker_module, "signature_mismatch", None),
      outer_context=outer_context,
      max_prompt_length=_int_or_none(getattr(orch_args, "max_prompt_length", None)),
      max_response_length=_int_or_none(getattr(orch_args, "max_response_length", None)),
      warmup_segment_counts=None if abstract else concrete_segment_counts(warmup),
      rollout_as_old=rollout_as_old, choices=choices, fallbacks=fallbacks,
      logps_request_class=logps_request_class,
      temperature=float(getattr(orch_args, "temperature", None) or 1.0), config=config)


def build_algo(settings: Settings, orch_node: Any, orch_args: Any) -> Tuple[Any, Any, List[str]]:
  """The GRPO algorithm from the parsed orchestrator argv, with LOGP_GATES applied: off turns
  the gates off in the argv and in the built config, and a gate still on is an error."""
  changed = [] if settings.logp_gates else disable_logp_gates(orch_args)
  algo = require(orch_node, "_build_algo", "build the GRPO algorithm")(orch_args)
  algo_config = getattr(algo, "algo_config", None)
  if not settings.logp_gates:
    changed += disable_logp_gates(algo_config) if algo_config is not None else []
    left = logp_gates_left_on(algo_config)
    if left:
      raise TunixMissing(f"LOGP_GATES=off cannot turn off {', '.join(left)} in the built GRPO "
                         f"config ({type(algo_config).__name__} in "
                         f"{source_file(type(algo_config))})")
    say("LOGP_GATES=off: " + (", ".join(sorted(set(changed))) + " turned off" if changed else
                              "the GRPO config has no log-prob gate set"))
  return algo, algo_config, sorted(set(changed))


def build_warmup(assembler: Any, algo: Any, algo_config: Any,
                 routing_shape: Optional[Tuple[int, int]], rollout_logps: Choice,
                 fallbacks: Fallbacks) -> Tuple[Any, bool]:
  """Tunix's trainer warm-up payload (abstract), or the equivalent layout built from the
  assembler when compile_warmup is missing (a fallback)."""
  compile_warmup = None
  try:
    compile_warmup = importlib.import_module("tunix.experimental.orchestrator.compile_warmup")
  except ImportError:
    pass
  build = getattr(compile_warmup, "build_trainer_warmup_payload", None)
  if build is None:
    fallbacks.take("tunix.experimental.orchestrator.compile_warmup.build_trainer_warmup_payload "
                   "is missing in this image's Tunix",
                   "build the equivalent payload layout from the assembler")
    return _equivalent_warmup(assembler, routing_shape, rollout_logps.value), False
  required = {"algo": algo, "assembler": assembler}
  # Without routing the shape must not be dropped silently: a None shape means no routing.
  required["routed_experts_shape"] = routing_shape
  optional = {
      "rollout_logprobs": rollout_logps.value,
      "sampler_is": getattr(algo_config, "sampler_is", None),
      "sampler_is_threshold": getattr(algo_config, "sampler_is_threshold", 2.0),
      "seq_logprob_error_threshold": getattr(algo_config, "seq_logprob_error_threshold", None),
  }
  warmup = call_checked(build, "build_trainer_warmup_payload", required, optional)
  if warmup is None:
    raise SettingsError("Tunix built no warm-up payload for this assembler (sequence packing "
                        "is required)")
  return warmup, True


def _equivalent_warmup(assembler: Any, routing_shape: Optional[Tuple[int, int]],
                       rollout_logps: bool) -> Any:
  """The warm-up payload's layout for a Tunix without compile_warmup: the packed row fields at
  the assembler's [batch_size, max_packed_len], as concrete zero arrays."""
  datatypes = import_tunix("tunix.experimental.common.datatypes", "build the payload")
  payload_class = require(datatypes, "RLTrainerPayload", "build the payload")
  rows, tokens = int(assembler.batch_size), int(assembler.max_packed_len)
  max_segments = getattr(assembler, "max_segments_per_packed_row", None)
  layout = spec_field_layout(rows, tokens, *(routing_shape or (0, 0)), old_logps=rollout_logps,
                             routing=routing_shape is not None)
  fields: Dict[str, Any] = {name: np.zeros(shape, dtype) for name, (shape, dtype) in layout.items()}
  fields["num_segments"] = (max_segments if max_segments else tokens) + 1
  optional = {"metadata": {}}
  return call_checked(payload_class, "RLTrainerPayload", fields, optional)


def resolve_plan_inputs(settings: Settings, setup: TunixSetup) -> Dict[str, Any]:
  """Checks the settings against the shapes Tunix gave; resolves the defaults, each with the
  source that decided it (logged)."""
  rows, tokens = setup.rows, setup.tokens
  real_len = settings.real_len if settings.real_len is not None else default_real_len(tokens)
  if real_len > tokens:
    raise SettingsError(f"REAL_LEN={real_len} exceeds the token budget T={tokens} "
                        "(--max_seq_token_per_tpu)")
  cap = setup.num_segments - 1 if setup.num_segments else None
  if setup.max_segments_per_row:
    cap = min(cap, setup.max_segments_per_row) if cap else setup.max_segments_per_row
  if settings.segments is not None:
    segments: Union[int, List[int]] = settings.segments
    if cap and segments > cap:
      raise SettingsError(f"SEGMENTS={segments} exceeds the {cap} segments a row may hold "
                          "(the payload's num_segments-1, --max_segments_per_packed_row)")
    if segments > real_len:
      raise SettingsError(f"SEGMENTS={segments} exceeds REAL_LEN={real_len}")
    rule = "SEGMENTS"
  elif setup.warmup_segment_counts is not None:
    segments = [min(count, real_len) for count in setup.warmup_segment_counts]
    rule = "each row's count from the warm-up payload (the seed's rule)"
  else:
    fitted = trajectory_segments(real_len, setup.max_prompt_length, setup.max_response_length)
    if fitted is not None:
      segments = min(fitted, cap) if cap else fitted
      rule = (f"max-length trajectories that fit: {real_len} real tokens / (--max_prompt_length "
              f"{setup.max_prompt_length} + --max_response_length {setup.max_response_length})"
              + (f", capped at {cap}" if cap and fitted > cap else ""))
    else:
      segments = default_segments(setup.num_segments, setup.max_segments_per_row, real_len)
      rule = ("the warm-up payload's num_segments - 1 (no --max_prompt_length / "
              "--max_response_length known)")
  final_rows = settings.final_rows if settings.final_rows is not None else rows
  if final_rows > rows:
    raise SettingsError(f"FINAL_ROWS={final_rows} exceeds the rows per micro-batch R={rows}")
  targets = None
  if setup.routing_shape is not None:
    layers, topk = setup.routing_shape
    if settings.routing_targets is None:
      raise SettingsError(f"ROUTING_TARGETS is required: the payload replays routing "
                          f"({layers} layers, top-{topk})")
    if len(settings.routing_targets) != layers:
      raise SettingsError(f"ROUTING_TARGETS has {len(settings.routing_targets)} values but the "
                          f"model has {layers} decoder layers")
    targets = scale_targets(settings.routing_targets, settings.routing_scale)
  elif settings.routing_targets is not None:
    say("the payload replays no routing: ROUTING_TARGETS is ignored")
  position, align = resolve_padding(settings)
  return {"real_len": real_len, "segments": segments, "segments_rule": rule,
          "final_rows": final_rows, "targets": targets, "pad_position": position,
          "pad_align": align, "max_prompt_length": setup.max_prompt_length or 0}


def run_pod(settings: Settings) -> int:
  """The bench in the pod: Tunix setup, payloads, compile, timed steps, summary."""
  name = settings.bench_name
  say(f"{name}: bench driver starting: {settings.steps} steps x {settings.micro_steps} fwd_bwd "
      "calls")
  setup = build_tunix(settings)
  resolved = resolve_plan_inputs(settings, setup)
  layout = _field_layout(setup.warmup)
  describe = ", ".join(f"{key}[{','.join(map(str, shape))}] {np.dtype(dtype).name}"
                       for key, (shape, dtype) in layout.items())
  say(f"warm-up payload: {describe}, num_segments={setup.num_segments}")
  choices = dict(setup.choices)
  choices["segments"] = Choice(resolved["segments"], resolved["segments_rule"])
  choices["pad_position"] = resolved["pad_position"]
  choices["pad_align"] = resolved["pad_align"]
  choices["max_prompt_length"] = Choice(resolved["max_prompt_length"],
                                        "ORCH_ARGV --max_prompt_length (prompt lengths are drawn "
                                        "up to it)")
  for key, choice in choices.items():
    say(f"{key}: {choice.value} ({choice.source})")

  def build(real_rows: int) -> Tuple[Any, BuiltPayload]:
    start = time.monotonic()
    built = build_payload(rows=setup.rows, tokens=setup.tokens, layout=layout, vocab=setup.vocab,
                          real_len=resolved["real_len"], segments=resolved["segments"],
                          real_rows=real_rows, pad_position=resolved["pad_position"].value,
                          pad_align=resolved["pad_align"].value, targets=resolved["targets"],
                          experts=setup.experts, advantages=settings.advantages,
                          seed=settings.seed, pad_id=setup.pad_id,
                          max_prompt_length=resolved["max_prompt_length"],
                          rollout_as_old=setup.rollout_as_old)
    for note in built.notes:
      say(f"payload: {note}")
    for miss in built.misses():
      say(f"payload: layer {miss.layer} routing max/mean {miss.achieved:.4f} misses its target "
          f"{miss.target:.4f} by more than 1% (too few tokens per expert)")
    payload = _replace(setup.warmup, metadata={}, **built.arrays)
    say(f"payload with {real_rows} real rows of {built.real_len} tokens, {built.segments} "
        f"segments per row, shift {built.shift}: built in {time.monotonic() - start:.1f} s")
    return payload, built

  regular, regular_built = build(setup.rows)
  if resolved["final_rows"] == setup.rows:
    final, final_built = regular, None
  else:
    final, final_built = build(resolved["final_rows"])

  check_warmup_signature(setup, regular)

  # The mesh, for a worker that could not take it as its execution context.
  with setup.outer_context or contextlib.nullcontext():
    worker = setup.worker
    calls = WorkerCalls(worker, setup.make_request)
    stage_plan = check_staging(resolve_stage_boundary(settings), calls)
    compile_start = time.monotonic()
    if callable(getattr(worker, "compile", None)):
      worker.compile(setup.warmup if setup.warmup_is_abstract else regular)
      compile_method = "worker.compile"
    elif callable(getattr(worker, "warmup_compile", None)):
      worker.warmup_compile(setup.warmup)
      compile_method = "worker.warmup_compile (in the background; step 0 waits for it)"
    else:
      compile_method = "none"
    compile_call_s = time.monotonic() - compile_start
    # MaxText's compile() only stages (the real compile runs in the first fwd_bwd), so the time
    # of this call is never reported as the compile time: step 0 (first_step_s) holds it.
    say(f"compile call: {compile_method} returned after {compile_call_s:.1f} s; the compile "
        "itself may run in step 0, whose time is reported as first_step_s (it includes the "
        "compile) and is left out of the means")

    import jax  # pylint: disable=import-outside-toplevel
    devices = jax.devices()
    chips, per_chip = count_chips(devices)
    say(f"{len(devices)} devices, {chips} chips ({per_chip} devices per chip)")

    def block_all() -> None:
      # One batched wait on every live device array (the updated weights are among them);
      # it consumes nothing, unlike get_metrics().
      live_arrays = getattr(jax, "live_arrays", None)
      if callable(live_arrays):
        jax.block_until_ready(live_arrays())

    profile_dir = settings.profile_dir or os.path.join(
        setup.maxtext_output_directory or "/tmp", "bench_profile")
    plan = BenchPlan(name=name, steps=settings.steps, micro_steps=settings.micro_steps,
                     regular=regular, final=final, tokens_regular=regular_built.real_tokens,
                     tokens_final=(final_built or regular_built).real_tokens, chips=chips,
                     padded_tokens_per_call=setup.rows * setup.tokens,
                     profile_window=settings.profile_window, profile_dir=profile_dir,
                     stage_boundary=stage_plan)
    plan.logps_pass = make_logps_pass(setup, choices["logps_pass"].value, [regular, final])
    say(f"fwd_bwd call: {'TrainRequest' if calls.takes_request else 'payload'}, "
        f"{'apply_optimizer on the last call' if calls.can_fuse else 'explicit update()'}; "
        f"staged step boundary {'on' if stage_plan.resolved else 'off'} ({stage_plan.source})")
    stage_state = StageState(stage_plan, say)
    records = run_steps(worker, plan, calls=calls,
                        observer=DeviceObserver(block_all=block_all),
                        watcher=CompletionWatcher(time.monotonic), profiler=JaxProfiler(),
                        stage_state=stage_state)
  reported = [record.metrics for record in records if record.metrics]
  if reported and not any(key in metrics for metrics in reported
                          for key in ("gradient_norm", "grad_norm")):
    say("WARNING: the trainer reports no gradient norm: MaxText records gradient_norm only with "
        "skip_step_on_spikes=true (maxtext training_engine/maxtext_engine.py@e591f30c), so "
        "bench-report's grad_norm gate has nothing to compare")
  layers, topk = setup.routing_shape or (None, None)
  summary = summarize(plan, records, rows=setup.rows, tokens_per_row=setup.tokens,
                      real_len=resolved["real_len"], segments=resolved["segments"],
                      final_rows=resolved["final_rows"], layers=layers, topk=topk,
                      experts=setup.experts, routing=regular_built.routing,
                      routing_final=final_built.routing if final_built else None,
                      knobs=settings.knobs(), stage=stage_state.summary(),
                      extra={"token_dropping": token_dropping(setup.config, records,
                                                              setup.experts),
                             "compile": {"method": compile_method,
                                         "call_s": round(compile_call_s, 3)},
                             "devices": len(devices), "shift": regular_built.shift,
                             "choices": {key: {"value": choice.value, "source": choice.source}
                                         for key, choice in choices.items()},
                             "fallbacks": list(setup.fallbacks.taken if setup.fallbacks
                                               else [])})
  emit("BENCH_SUMMARY " + json.dumps(summary, separators=(",", ":")))
  report_summary(summary)
  return 0


def make_logps_pass(setup: TunixSetup, enabled: bool,
                    payloads: Sequence[Any]) -> Optional[Callable[[Any], Any]]:
  """The actor log-prob pass for the step loop: one LogprobsRequest per payload, built as the
  e2e program builds it (prompt and completion tokens, temperature, pad and eos ids, segments),
  sent to worker.per_token_logps, whose scores come back to the host."""
  if not enabled:
    return None
  requests = {}
  for payload in payloads:
    requests[id(payload)] = call_checked(setup.logps_request_class, "LogprobsRequest", {
        "prompt_tokens": payload.prompt_ids, "completion_tokens": payload.completion_ids,
        "pad_id": setup.pad_id, "eos_id": setup.eos_id}, {
            "temperature": setup.temperature, "model_role": "actor",
            "segment_ids": payload.segment_ids,
            "segment_positions": payload.segment_positions})

  def score(payload: Any) -> Any:
    result = setup.worker.per_token_logps(requests[id(payload)])
    block_tree(result)
    return result

  return score


def check_warmup_signature(setup: TunixSetup, payload: Any) -> None:
  """The payload must match the warm-up payload's signature (what the trainer compiled for):
  a mismatch would make fwd_bwd recompile for another program, so it stops the run."""
  if setup.payload_signature is None or setup.signature_mismatch is None:
    setup.fallbacks.take("this TrainerWorker module has no payload_signature / "
                         "signature_mismatch", "time without checking the payload against the "
                         "warm-up signature")
    return
  try:
    mismatch = setup.signature_mismatch(setup.payload_signature(setup.warmup),
                                        setup.payload_signature(payload))
  except Exception as exc:  # pylint: disable=broad-except
    raise TunixMissing(f"could not compare the payload with the warm-up signature: "
                       f"{describe_exception(exc)}") from None
  if mismatch:
    raise TunixMissing(f"the payload differs from the warm-up signature (fwd_bwd would "
                       f"recompile another program): {one_line(mismatch)}")
  say("payload matches the warm-up signature")


def check_staging(stage_plan: StagePlan, calls: WorkerCalls,
                  log: Callable[[str], None] = say) -> StagePlan:
  """The staged boundary this worker can run: `on` that it cannot is a SettingsError naming the
  missing call; `auto` that it cannot is turned off with a loud line (the bench then cannot
  reproduce the e2e run's boundary)."""
  if not stage_plan.resolved:
    return stage_plan
  gaps = calls.staging_gaps(stage_plan.before_update)
  if not gaps:
    return stage_plan
  missing = ", ".join(gaps)
  if stage_plan.requested == "on":
    raise SettingsError(f"STAGE_BOUNDARY=on but this image's TrainerWorker lacks {missing} "
                        "(the seed's staging change; see README)")
  log(f"WARNING: the e2e run stages the step boundary ({stage_plan.source}) but this image's "
      f"TrainerWorker lacks {missing}: the bench CANNOT reproduce it; every step ends with a "
      "full drain and step times are not comparable with the e2e run's")
  return dataclasses.replace(stage_plan, resolved=False,
                             source=stage_plan.source + f"; not reproducible: lacks {missing}")


def report_summary(summary: Mapping[str, Any], log: Callable[[str], None] = say) -> None:
  """The human lines after BENCH_SUMMARY: each figure with what it measures."""
  name = summary["name"]
  log(f"{name}: done. Steps count from 0; step 0 took {summary['first_step_s']} s "
      "(first_step_s, includes the compile); the means cover steps "
      f"{summary['steady_steps']}")
  log(f"  mean_step_s {summary['mean_step_s']}: s per optimizer step, first dispatch to the "
      "update done")
  timing = summary["microbatch_timing"]
  if timing == "device":
    log(f"  median_microbatch_s {summary['median_microbatch_s']}: device time per regular "
        f"micro-batch (completion from {summary['microbatch_timing_source']})")
  elif timing == "dispatch":
    log(f"  median_microbatch_s {summary['median_microbatch_s']}: WARNING: host DISPATCH "
        "intervals, not device times (the trainer offers no completion to wait on); they lag "
        "the device by up to max_inflight_computations calls")
  else:
    log(f"  median_microbatch_s: none (steps timed micro-batches differently: {timing})")
  log(f"  tokens_per_s_per_chip {summary['tokens_per_s_per_chip']}: rows x tokens_per_row x "
      "micro_steps (padding included, the seed's definition) / s per step / chips")
  log(f"  real_tokens_per_s_per_chip {summary['real_tokens_per_s_per_chip']}: real tokens only")
  dropping = summary.get("token_dropping")
  if dropping:
    verdict = dropping.get("verdict")
    if verdict == "dropped":
      log(f"  WARNING: dropped tokens: {dropping.get('dropped_tokens'):g} ({dropping.get('why')}): "
          "this arm did less MoE work than the e2e run's would at the same routing")
    elif verdict == "unknown":
      log(f"  WARNING: dropped tokens: unknown: {dropping.get('why')}; a comparison cannot claim "
          "that no arm dropped tokens")
    else:
      log(f"  dropped tokens: {verdict} ({dropping.get('why')})")
  stage = summary.get("stage_boundary") or {}
  if stage.get("resolved") == "on":
    log(f"  staged step boundary: engaged for steps {stage.get('staged_steps')}"
        + (f"; latched off: {stage['latched_off']}" if stage.get("latched_off") else ""))


# ------------------------------------------------------------------------------------------------
# --preflight: what the pod run will call, checked on CPU in the trainer image, no weights loaded.
# ------------------------------------------------------------------------------------------------


def import_orchestrator(orch_main: Optional[str]) -> Any:
  """The orchestrator module; importing run_deepswe_dist sets JAX_PLATFORMS=cpu when it is
  unset, which is undone here."""
  saved_platforms = os.environ.get("JAX_PLATFORMS")
  try:
    return import_tunix(process_module(orch_main, DEFAULT_ORCH_MODULE),
                        "parse the orchestrator argv")
  finally:
    if saved_platforms is None:
      os.environ.pop("JAX_PLATFORMS", None)
    else:
      os.environ["JAX_PLATFORMS"] = saved_platforms


class Checklist:
  """Runs named checks in order; a check whose prerequisite failed is skipped. Each prints one
  line: `preflight: ok|FAIL|skip  NAME: detail`."""

  def __init__(self, out: Callable[[str], None] = emit):
    self.out = out
    self.failed: List[str] = []
    self.bad_settings = False
    self.context: Dict[str, Any] = {}

  def check(self, name: str, run: Callable[[], str], needs: Sequence[str] = ()) -> bool:
    missing = [need for need in needs if need not in self.context]
    if missing:
      self.out(f"preflight: skip  {name}: needs {', '.join(missing)}")
      return False
    try:
      detail = run()
    except SettingsError as exc:
      self.bad_settings = True
      self.failed.append(name)
      self.out(f"preflight: FAIL  {name}: {one_line(exc)}")
      return False
    except Exception as exc:  # pylint: disable=broad-except
      self.failed.append(name)
      self.out(f"preflight: FAIL  {name}: {describe_exception(exc)}")
      return False
    self.out(f"preflight: ok    {name}: {one_line(detail)}")
    return True

  def exit_code(self) -> int:
    return 2 if self.bad_settings else 1 if self.failed else 0


# The routing shape's K for the preflight's small payload: the trainer's own shape is known only
# once the trainer is built, which the preflight does not do (it would load weights).
PREFLIGHT_TOPK = 2


def preflight_experts(targets: Optional[Sequence[float]]) -> int:
  """Experts for the preflight's small payload: enough that every target is reachable
  (max/mean <= experts / top-k)."""
  highest = max(targets) if targets else 1.0
  return max(16, PREFLIGHT_TOPK * int(math.ceil(highest)) * 2)


def run_preflight(settings: Settings, out: Callable[[str], None] = emit) -> int:
  """Checks, on CPU, everything the pod run will import and call, in the order it will:
  modules, functions and their signatures, both argvs through Tunix's parsers, the GRPO config
  with LOGP_GATES applied, the batch configuration, the warm-up payload and a small payload
  built to its layout. Builds no trainer and loads no weights. Exit 0 all good, 1 a problem, 2
  bad settings."""
  checks = Checklist(out)
  ctx = checks.context
  notes: List[str] = []
  fallbacks = Fallbacks(settings.allow_fallbacks, log=notes.append)
  trainer_main, trainer_words = split_runtime_argv("TRAINER_ARGV", settings.trainer_argv)
  orch_main, orch_words = split_runtime_argv("ORCH_ARGV", settings.orch_argv)
  out(f"preflight: {settings.bench_name}: JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!r}"
      " (the pod's settings, checked on this machine's CPU)")

  def trainer_module() -> str:
    module = import_tunix(process_module(trainer_main, DEFAULT_TRAINER_MODULE),
                          "parse the trainer argv")
    for name in ("_parse_args", "_create_trainer_factory"):
      require(module, name, "build the trainer")
    ctx["trainer_node"] = module
    return f"{module.__name__} ({source_file(module)})"

  def trainer_argv() -> str:
    parse = ctx["trainer_node"]._parse_args  # pylint: disable=protected-access
    ctx["trainer_args"] = parse_with(parse, trainer_words, "TRAINER_ARGV")
    return f"{len(trainer_words)} words parsed by {ctx['trainer_node'].__name__}._parse_args"

  def trainer_backend() -> str:
    # The trainer factory builds the MaxText engine through tunix.utils.maxtext_utils; the
    # preflight imports both without building anything.
    backend = getattr(ctx["trainer_args"], "trainer_backend", "maxtext") or "maxtext"
    if backend != "maxtext":
      return f"--trainer_backend={backend}: no MaxText modules to check"
    modules = []
    for name in ("maxtext", "tunix.utils.maxtext_utils"):
      module = import_tunix(name, "build the MaxText trainer")
      modules.append(f"{name} ({source_file(module)})")
    return ", ".join(modules)

  def trainer_worker() -> str:
    module = import_tunix("tunix.experimental.worker.trainer_worker", "build the worker")
    worker_class = require(module, "TrainerWorker", "build the worker")
    params, _ = _named_params(worker_class.__init__)
    optional = {name: None for name in ("execution_context", "logps_chunk_size")}
    plan_call(worker_class, "TrainerWorker", {"trainer_factory": None, "worker_id": "preflight"},
              optional, log=notes.append)
    for method in ("fwd_bwd", "update", "with_loss_fn", "with_gen_model_input_fn"):
      require(worker_class, method, "time the trainer")
    calls = WorkerCalls(worker_class)
    if not calls.takes_request and not calls.payload_keyword and not calls.pass_apply:
      raise TunixMissing(f"TrainerWorker.fwd_bwd{inspect.signature(worker_class.fwd_bwd)} in "
                         f"{source_file(worker_class)}: takes neither a request nor a payload")
    chunk = int(getattr(ctx["trainer_args"], "compute_logps_chunk_size", 0) or 0)
    ctx["worker_class"], ctx["worker_module"] = worker_class, module
    parts = [f"fwd_bwd({'request' if calls.takes_request else 'payload'})",
             "fused update" if calls.can_fuse else "explicit update()",
             "compile" if hasattr(worker_class, "compile") else
             "warmup_compile" if hasattr(worker_class, "warmup_compile") else "no compile call"]
    if chunk > 0:
      parts.append("logps_chunk_size=" + (str(chunk) if "logps_chunk_size" in params else
                                          "not taken (the chunk reaches the loss through the "
                                          "trainer's config only)"))
    if not (hasattr(module, "payload_signature") and hasattr(module, "signature_mismatch")):
      fallbacks.take("this TrainerWorker module has no payload_signature / signature_mismatch",
                     "time without checking the payload against the warm-up signature")
    return ", ".join(parts)

  def datatypes() -> str:
    module = import_tunix("tunix.experimental.common.datatypes", "build train requests")
    payload_class = require(module, "RLTrainerPayload", "build the payload")
    if WorkerCalls(ctx["worker_class"]).takes_request:
      request_class = require(module, "TrainRequest", "call fwd_bwd(request=...)")
      plan_call(request_class, "TrainRequest", {"request_id": "r", "payload": None,
                                                "metadata": {}})
    ctx["payload_class"] = payload_class
    return f"RLTrainerPayload, TrainRequest ({source_file(module)})"

  def orchestrator_module() -> str:
    module = import_orchestrator(orch_main)
    for name in ("_parse_args", "_build_algo"):
      require(module, name, "build the GRPO algorithm")
    ctx["orch_node"] = module
    return f"{module.__name__} ({source_file(module)})"

  def orchestrator_argv() -> str:
    args = parse_with(ctx["orch_node"]._parse_args, orch_words,  # pylint: disable=protected-access
                      "ORCH_ARGV")
    if getattr(args, "mini_batch_size", 0) is None:
      args.mini_batch_size = args.batch_size
    ctx["orch_args"] = args
    ctx["rollout_logps"] = rollout_logps_requested(args)
    return f"{len(orch_words)} words parsed by {ctx['orch_node'].__name__}._parse_args"

  def grpo_config() -> str:
    algo, algo_config, changed = build_algo(settings, ctx["orch_node"], ctx["orch_args"])
    ctx["algo"], ctx["algo_config"] = algo, algo_config
    gates = ("LOGP_GATES=on: the gates stay as the e2e sets them" if settings.logp_gates else
             "LOGP_GATES=off: " + (", ".join(changed) + " turned off" if changed else
                                   "no log-prob gate was set"))
    return (f"{type(algo_config).__name__ if algo_config is not None else type(algo).__name__}; "
            f"{gates}; ADVANTAGES={settings.advantages}; rollout log-probs "
            f"{'in' if ctx['rollout_logps'].value else 'not in'} the payload "
            f"({ctx['rollout_logps'].source})")

  def tokenizer() -> str:
    pad_id, eos_id, vocab = _token_ids(ctx["orch_args"], ctx["trainer_args"], fallbacks)
    ctx["pad_id"], ctx["vocab"] = pad_id, vocab
    return f"pad id {pad_id}, eos id {eos_id}, vocabulary {vocab}"

  def batch_configuration() -> str:
    module = import_tunix("tunix.experimental.orchestrator.batch_assembly",
                          "build the batch configuration")
    config = make_batch_config(ctx["orch_node"], module, ctx["orch_args"], ctx["pad_id"])
    create = require(module, "create_batch_assembler", "build the batch assembler")
    algo, orch_args = ctx["algo"], ctx["orch_args"]
    generations = getattr(algo, "num_generations", orch_args.num_generations)
    params, _ = _named_params(create)
    assembler = call_checked(create, "create_batch_assembler", {
        "group_size" if "group_size" in params else "num_generations": generations,
        "mini_batch_size": getattr(algo, "mini_batch_size", orch_args.mini_batch_size),
        "train_micro_batch_size": getattr(algo, "train_micro_batch_size",
                                          orch_args.train_micro_batch_size),
        "batch_config": config}, log=notes.append)
    packed = getattr(module, "SequencePackedBatchAssembler", None)
    if packed is not None and not isinstance(assembler, packed):
      raise SettingsError("ORCH_ARGV does not select sequence packing (--max_seq_token_per_tpu)")
    ctx["assembler"] = assembler
    return (f"{type(assembler).__name__}: {assembler.batch_size} rows x "
            f"{assembler.max_packed_len} tokens")

  def warmup_payload() -> str:
    routing = resolve_routing(settings)
    shape = None
    if routing.value:
      if settings.routing_targets is None:
        raise SettingsError("ROUTING_TARGETS is required: the payload replays routing "
                            f"({routing.source})")
      shape = (len(settings.routing_targets), PREFLIGHT_TOPK)
    warmup, _ = build_warmup(ctx["assembler"], ctx["algo"], ctx["algo_config"], shape,
                             ctx["rollout_logps"], fallbacks)
    ctx["warmup"], ctx["routing"] = warmup, routing
    layout = _field_layout(warmup)
    return (f"{len(layout)} fields: {', '.join(sorted(layout))}; routing "
            f"{'replayed' if shape else 'not replayed'} ({routing.source})")

  def small_payload() -> str:
    warmup, orch_args = ctx["warmup"], ctx["orch_args"]
    layout = _field_layout(warmup)
    rows = min(2, layout["completion_ids"][0][0])
    tokens = min(4096, layout["completion_ids"][0][1])
    small = {}
    for name, (shape, dtype) in layout.items():
      small[name] = ((rows, tokens) + tuple(shape[2:]) if len(shape) >= 2 and shape[1] else
                     (rows,) + tuple(shape[1:]), dtype)
    position, align = resolve_padding(settings)
    real_len = default_real_len(tokens)
    prompt = int(getattr(orch_args, "max_prompt_length", 0) or 0)
    segments = settings.segments or trajectory_segments(
        real_len, prompt, getattr(orch_args, "max_response_length", None)) or 1
    targets = (scale_targets(settings.routing_targets, settings.routing_scale)
               if "routed_experts" in small else None)
    built = build_payload(rows=rows, tokens=tokens, layout=small, vocab=ctx["vocab"] or 1000,
                          real_len=real_len, segments=min(segments, real_len), real_rows=rows,
                          pad_position=position.value, pad_align=align.value, targets=targets,
                          experts=preflight_experts(targets),
                          advantages=settings.advantages, seed=settings.seed,
                          pad_id=ctx["pad_id"], max_prompt_length=prompt,
                          rollout_as_old=bool(getattr(orch_args, "use_rollout_logps", False)))
    for name, (shape, dtype) in layout.items():
      array = built.arrays.get(name)
      if array is None or array.dtype != np.dtype(dtype) or array.ndim != len(shape):
        raise TunixMissing(f"the payload's {name} does not match the warm-up layout "
                           f"({list(shape)} {np.dtype(dtype).name})")
    extra = sorted(set(built.arrays) - set(layout))
    if extra:
      raise TunixMissing(f"the payload has fields the warm-up layout lacks: {', '.join(extra)}")
    return (f"{rows} x {tokens} tokens with every warm-up field and dtype; pad "
            f"{position.value} ({position.source}), align {align.value}; prompts up to {prompt}")

  def staging() -> str:
    plan = resolve_stage_boundary(settings)
    checked = check_staging(plan, WorkerCalls(ctx["worker_class"]), log=notes.append)
    if plan.resolved and not checked.resolved:
      raise TunixMissing(f"the e2e run stages the step boundary ({plan.source}) but this image's "
                         "TrainerWorker cannot: the bench would not reproduce it "
                         f"({checked.source})")
    return f"{'on' if checked.resolved else 'off'} ({checked.source})"

  def jax_on_cpu() -> str:
    jax = importlib.import_module("jax")
    devices = jax.devices()
    return (f"jax {getattr(jax, '__version__', '?')}: {len(devices)} "
            f"{getattr(devices[0], 'platform', '?') if devices else 'no'} devices")

  checks.check("trainer module", trainer_module)
  checks.check("TRAINER_ARGV", trainer_argv, needs=["trainer_node"])
  checks.check("MaxText", trainer_backend, needs=["trainer_args"])
  checks.check("TrainerWorker", trainer_worker, needs=["trainer_args"])
  checks.check("datatypes", datatypes, needs=["worker_class"])
  checks.check("orchestrator module", orchestrator_module)
  checks.check("ORCH_ARGV", orchestrator_argv, needs=["orch_node"])
  checks.check("GRPO config", grpo_config, needs=["orch_args"])
  checks.check("tokenizer", tokenizer, needs=["orch_args", "trainer_args"])
  checks.check("batch configuration", batch_configuration, needs=["algo", "pad_id"])
  checks.check("warm-up payload", warmup_payload, needs=["assembler"])
  checks.check("payload", small_payload, needs=["warmup", "payload_class"])
  checks.check("staged step boundary", staging, needs=["worker_class"])
  checks.check("jax", jax_on_cpu)
  for note in notes:
    out(f"preflight: note  {one_line(note)}")
  for taken in fallbacks.taken:
    out(f"preflight: FALLBACK {one_line(taken)}")
  code = checks.exit_code()
  verdict = ("all good" if code == 0 else
             f"{len(checks.failed)} problem(s): {', '.join(checks.failed)}")
  out(f"preflight: {verdict} (exit {code})")
  return code


# ------------------------------------------------------------------------------------------------
# --dump-payload: the payload as a file, without Tunix or JAX.
# ------------------------------------------------------------------------------------------------


class _ArgumentParser(argparse.ArgumentParser):

  def error(self, message: str) -> None:  # one line, exit 2 (by the caller)
    raise SettingsError(message)


# The .npz member that says how a payload file was built (check-payload reads it too).
SETTINGS_MEMBER = "payload_settings"
SETTINGS_FORMAT = "rtb.payload-settings/1"
# The version of the driver's contract (its log lines and payload layout).
DRIVER_VERSION = "2"


def payload_settings(*, rows: int, tokens: int, layers: Optional[int], topk: Optional[int],
                     experts: Optional[int], vocab: int, pad_id: int, built: BuiltPayload,
                     segments_rule: str, max_prompt_length: int, final_rows: Optional[int],
                     pad_position: str, pad_align: int, advantages: str, seed: int,
                     targets: Optional[Sequence[float]], scale: float, targets_source: str,
                     old_logps: bool) -> Dict[str, Any]:
  """The settings a payload was built with, as recorded in its file (SETTINGS_MEMBER)."""
  return {
      "format": SETTINGS_FORMAT,
      "builder": "bench_driver",
      "version": DRIVER_VERSION,
      "rows": rows, "tokens": tokens, "layers": layers, "topk": topk, "experts": experts,
      "vocab": vocab, "pad_id": pad_id, "real_len": built.real_len,
      "segments": built.segments, "segments_rule": segments_rule,
      "max_prompt_length": max_prompt_length, "final_rows": final_rows,
      "pad_position": pad_position, "pad_align": pad_align, "advantages": advantages,
      "seed": seed,
      "routing_targets": None if targets is None else [round(float(t), 9) for t in targets],
      "routing_scale": scale, "routing_targets_source": targets_source, "old_logps": old_logps,
  }


def settings_array(record: Mapping[str, Any]) -> np.ndarray:
  """A settings record as the npz member holds it: UTF-8 JSON bytes in a 1-D uint8 array."""
  return np.frombuffer(json.dumps(record, separators=(",", ":")).encode("utf-8"),
                       dtype=np.uint8).copy()


def dump_parser() -> argparse.ArgumentParser:
  parser = _ArgumentParser(prog="bench_driver.py --dump-payload",
                           description="Write a synthetic bench payload as an .npz file.")
  parser.add_argument("--dump-payload", dest="out", required=True, metavar="OUT.npz")
  parser.add_argument("--rows", type=int, required=True)
  parser.add_argument("--tokens", type=int, required=True)
  parser.add_argument("--layers", type=int, required=True)
  parser.add_argument("--topk", type=int, required=True)
  parser.add_argument("--experts", type=int, required=True)
  parser.add_argument("--vocab", type=int, default=DEFAULT_VOCAB)
  parser.add_argument("--real-len", type=int)
  parser.add_argument("--segments", type=int, default=1)
  parser.add_argument("--max-prompt-length", type=int, default=0)
  parser.add_argument("--final-rows", type=int)
  parser.add_argument("--final", action="store_true")
  parser.add_argument("--pad-position", choices=("end", "start"), default="end")
  parser.add_argument("--pad-align", default="4096")
  parser.add_argument("--routing-targets")
  parser.add_argument("--routing-scale", default="1")
  parser.add_argument("--advantages", choices=("random", "zero"), default="random")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--no-old-logps", action="store_true")
  parser.add_argument("--pad-id", type=int, default=0)
  return parser


def dump_main(argv: Sequence[str]) -> int:
  options = dump_parser().parse_args(list(argv))
  for name in ("rows", "tokens", "layers", "topk", "experts"):
    if getattr(options, name) < 1:
      raise SettingsError(f"--{name}={getattr(options, name)}: must be >= 1")
  if options.topk > options.experts:
    raise SettingsError(f"--topk={options.topk} exceeds --experts={options.experts} (each token "
                        "needs distinct experts)")
  if options.pad_id < 0 or options.pad_id >= options.vocab:
    raise SettingsError(f"--pad-id={options.pad_id}: must be in [0, vocab={options.vocab})")
  pad_align = parse_pad_align("--pad-align", options.pad_align)
  scale = parse_float("--routing-scale", options.routing_scale, 0.0)
  real_len = options.real_len if options.real_len is not None else default_real_len(options.tokens)
  if options.final_rows is not None and not 1 <= options.final_rows <= options.rows:
    raise SettingsError(f"--final-rows={options.final_rows}: must be between 1 and --rows="
                        f"{options.rows}")
  if options.final_rows is not None and not options.final:
    print(f"{PROG}: note: --final-rows takes effect with --final", file=sys.stderr)
  real_rows = options.rows
  if options.final and options.final_rows is not None:
    real_rows = options.final_rows
  targets = ([1.0] * options.layers if options.routing_targets is None else
             parse_routing_targets("--routing-targets", options.routing_targets))
  if len(targets) != options.layers:
    raise SettingsError(f"--routing-targets has {len(targets)} values but --layers is "
                        f"{options.layers}")
  targets = scale_targets(targets, scale)
  if options.max_prompt_length < 0:
    raise SettingsError(f"--max-prompt-length={options.max_prompt_length}: must be >= 0")
  layout = spec_field_layout(options.rows, options.tokens, options.layers, options.topk,
                             old_logps=not options.no_old_logps)
  start = time.monotonic()
  built = build_payload(rows=options.rows, tokens=options.tokens, layout=layout,
                        vocab=options.vocab, real_len=real_len, segments=options.segments,
                        real_rows=real_rows, pad_position=options.pad_position,
                        pad_align=pad_align, targets=targets, experts=options.experts,
                        advantages=options.advantages, seed=options.seed, pad_id=options.pad_id,
                        max_prompt_length=options.max_prompt_length)
  elapsed = time.monotonic() - start
  record = payload_settings(
      rows=options.rows, tokens=options.tokens, layers=options.layers, topk=options.topk,
      experts=options.experts, vocab=options.vocab, pad_id=options.pad_id, built=built,
      segments_rule="option", max_prompt_length=options.max_prompt_length,
      final_rows=real_rows if options.final else None, pad_position=options.pad_position,
      pad_align=pad_align, advantages=options.advantages, seed=options.seed, targets=targets,
      scale=scale, targets_source=("--routing-targets" if options.routing_targets is not None
                                   else "uniform (1.0 per layer, the default)"),
      old_logps=not options.no_old_logps)
  directory = os.path.dirname(os.path.abspath(options.out))
  temporary = os.path.join(directory, f".{os.path.basename(options.out)}.{os.getpid()}.tmp")
  try:
    with open(temporary, "wb") as handle:
      np.savez(handle, **built.arrays, **{SETTINGS_MEMBER: settings_array(record)})
    os.replace(temporary, options.out)
  except OSError as exc:
    if os.path.exists(temporary):
      os.unlink(temporary)
    raise SettingsError(f"cannot write {options.out}: {exc.strerror or exc}") from None
  print(f"wrote {options.out}: {options.rows} rows x {options.tokens} tokens, {real_rows} real "
        f"rows of {built.real_len} tokens, {built.segments} segments per row, shift "
        f"{built.shift}, {len(built.arrays)} fields ({elapsed:.2f} s)")
  for line in format_routing_report(built.routing):
    print(line)
  misses = built.misses()
  if misses:
    print(f"warning: {len(misses)} layers miss their target by more than 1% (too few tokens per "
          "expert for the precision)")
  return 0


# ------------------------------------------------------------------------------------------------
# Entry point.
# ------------------------------------------------------------------------------------------------


def _terminate(signum: int, _frame: Any) -> None:
  raise SystemExit(128 + signum)  # unwinds, so an open trace is stopped


def main(argv: Optional[Sequence[str]] = None, env: Optional[Mapping[str, str]] = None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  try:
    if any(word == "--dump-payload" or word.startswith("--dump-payload=") for word in argv):
      try:
        return dump_main(argv)
      except BrokenPipeError:
        # The reader went away (`| head`): the file is written; end quietly, no traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    if argv in (["-h"], ["--help"]):
      print(__doc__)
      return 0
    preflight = argv == ["--preflight"]
    if argv and not preflight:
      raise SettingsError(f"unexpected arguments {' '.join(argv)} (settings come from the "
                          "environment; see --help)")
    settings = parse_settings(os.environ if env is None else env)
  except SettingsError as exc:
    print(f"{PROG}: {one_line(exc)}", file=sys.stderr)
    return 2
  try:
    signal.signal(signal.SIGTERM, _terminate)
  except (ValueError, OSError):
    pass
  try:
    return run_preflight(settings) if preflight else run_pod(settings)
  except SettingsError as exc:
    print(f"{PROG}: {one_line(exc)}", file=sys.stderr)
    return 2
  except TunixMissing as exc:
    print(f"{PROG}: {one_line(exc)}", file=sys.stderr)
    return 1
  except Exception as exc:  # pylint: disable=broad-except
    traceback.print_exc()
    print(f"{PROG}: failed: {describe_exception(exc)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
  sys.exit(main())
