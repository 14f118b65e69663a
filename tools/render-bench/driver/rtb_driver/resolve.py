"""Settings that follow the e2e run: the staged step boundary, padding layout, routing replay,
rollout log-probs and the actor log-prob pass, each resolved with the source that decided it."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from .common import say, SEGMENT_ALIGN, SettingsError
from .settings import Settings
from .values import bool_flag, flag_value, parse_bool_word, parse_choice, parse_pad_align


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
    return StagePlan(
        "auto", False, source + " (the e2e refuses staging without the pipelined "
        "boundary, so it does not stage)", before_update)
  if before is not None:
    source += f"; ORCH_ARGV --stage_before_update={'true' if before else 'false'}"
  return StagePlan("auto", bool(pipeline and stage_next), source, before_update)


@dataclasses.dataclass
class StagePlan:
  """STAGE_BOUNDARY as resolved: whether to stage, where, and why (for BENCH_SUMMARY)."""
  requested: str  # auto | on | off
  resolved: bool
  source: str
  before_update: bool = True


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

  def pick(knob: Optional[Any], knob_name: str, flag: str, env_value: Optional[str], env_name: str,
           default: Any, parse: Callable[[str, str], Any]) -> Choice:
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
  ORCH_ARGV --return_routed_experts, else the orchestrator's RETURN_ROUTED_EXPERTS environment,
  else the rollout JobSet's setting (ROLLOUT_RETURN_ROUTED_EXPERTS, copied by render-bench).
  With no evidence auto is a SettingsError: replaying or not changes the program compiled."""
  if settings.routing != "auto":
    return Choice(settings.routing == "on", f"ROUTING={settings.routing}")
  flag = bool_flag(settings.orch_argv, "--return_routed_experts")
  if flag is not None:
    return Choice(flag, f"auto: ORCH_ARGV --return_routed_experts={'true' if flag else 'false'}")
  if settings.orch_return_routed_experts is not None:
    value = parse_bool_word("ORCH_RETURN_ROUTED_EXPERTS", settings.orch_return_routed_experts)
    return Choice(
        value, "auto: orchestrator env RETURN_ROUTED_EXPERTS="
        f"{settings.orch_return_routed_experts}")
  if settings.rollout_return_routed_experts is not None:
    value = parse_bool_word("ROLLOUT_RETURN_ROUTED_EXPERTS", settings.rollout_return_routed_experts)
    return Choice(
        value, "auto: the rollout JobSet's --return_routed_experts / RETURN_ROUTED_EXPERTS="
        f"{settings.rollout_return_routed_experts} (ROLLOUT_RETURN_ROUTED_EXPERTS)")
  raise SettingsError("ROUTING=auto but nothing says whether the e2e run replays routing (no "
                      "ORCH_ARGV --return_routed_experts, ORCH_RETURN_ROUTED_EXPERTS or "
                      "ROLLOUT_RETURN_ROUTED_EXPERTS): set ROUTING=on or off")


def rollout_logps_requested(orch_args: Any, asked: Optional[Choice] = None) -> Choice:
  """Whether the payload carries rollout log-probs: as the image's orchestrator asks its
  rollouts for them (`asked`, read from its GenerationArgs(return_logprobs=...) call; see
  upstream.py), else when it uses them as the old ones (--use_rollout_logps) or a gate or
  weighting needs them (truncated importance sampling, the sequence log-prob error threshold,
  sampler IS buckets)."""
  if asked is not None:
    return asked
  reasons = []
  for name in ("use_rollout_logps", "truncated_importance_sampling_type",
               "seq_logprob_error_threshold", "sampler_is_length_buckets"):
    value = getattr(orch_args, name, None)
    if value not in (None, False, "", 0, "none"):
      reasons.append(f"--{name}={value}")
  return Choice(
      bool(reasons), ", ".join(reasons)
      if reasons else "no --use_rollout_logps, TIS type, sequence log-prob threshold or IS buckets")


def can_fuse_agreement(algo_config: Any, orch_args: Any) -> bool:
  """rl_program's can_fuse_agreement_in_loss, with its defaults: a config whose policy loss is
  grpo (getattr default "grpo"), without log_sampler_trainer_agreement (default False), one
  iteration (default 1), and a mini-batch at least the full batch."""
  if algo_config is None:
    return False
  batch = getattr(orch_args, "batch_size", None)
  mini = getattr(orch_args, "mini_batch_size", None) or batch
  return (getattr(algo_config, "policy_loss_fn", "grpo") == "grpo" and
          not getattr(algo_config, "log_sampler_trainer_agreement", False) and
          getattr(algo_config, "num_iterations", 1) == 1 and
          (batch is None or mini is None or mini >= batch))


def resolve_logps_pass(
    settings: Settings, algo_config: Any, orch_args: Any, rollout_logps: Choice, worker: Any,
    request_class: Any, log: Callable[[str],
                                      None] = say, program: Tuple[str,
                                                                  str] = ("fusable", "")) -> Choice:
  """LOGPS_PASS: whether each micro-batch is scored by the actor (per_token_logps) before it
  trains, as the image's rl_program does when it checks the sampler against the trainer outside
  the loss: the batch carries rollout log-probs, the GRPO config's use_rollout_logps is on, and
  the agreement cannot be fused into the loss. `program` is how the image's rl_program checks
  it and where that was read (upstream.rl_program_agreement): "fusable" (can_fuse_agreement),
  "always" (an rl_program that never fuses) or "never" (one without the pass)."""
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
  kind, where = program
  if kind == "never":
    return Choice(False, f"auto: the image's rl_program makes no actor log-prob pass ({where})")
  # rl_program: the payload has old (rollout) log-probs, the config uses them, and the agreement
  # cannot be fused into the loss.
  uses = bool(rollout_logps.value and algo_config is not None and
              getattr(algo_config, "use_rollout_logps", False))
  reason = "the payload carries rollout log-probs and the GRPO config's use_rollout_logps is on"
  if uses and kind == "fusable" and can_fuse_agreement(algo_config, orch_args):
    return Choice(False, f"auto: {reason}, but the GRPO loss checks the agreement itself")
  if not uses:
    return Choice(
        False, "auto: the e2e program makes no actor log-prob pass (no rollout "
        "log-probs, or the GRPO config does not use them as the old ones)")
  if missing:
    log(f"WARNING: the e2e program scores each micro-batch with the actor first ({reason}) but "
        f"this image's Tunix lacks {', '.join(missing)}: the bench CANNOT reproduce that pass")
    return Choice(False, f"auto: {reason}; not reproducible: lacks {', '.join(missing)}")
  return Choice(
      True, f"auto: {reason}" +
      ("" if kind == "fusable" else f" (the image's rl_program never fuses it: {where})"))
