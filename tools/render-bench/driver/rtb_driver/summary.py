"""The end of a run: BENCH_SUMMARY (means over the steady steps, what each figure measures),
whether tokens were dropped, chips counted from the devices, and the human summary lines."""

from __future__ import annotations

import re
import statistics
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Set, Tuple

from .common import say
from .metrics import dropped_tokens_of, grad_norm_name, REPLAY_METRIC
from .payload import LayerRouting
from .plan import BenchPlan, DEFINITIONS, regular_microbatches, StepRecord


def _config_flag(config: Any, name: str) -> Optional[bool]:
  """A boolean MaxText setting of the trainer's config; None when the config does not say."""
  value = getattr(config, name, None)
  return value if isinstance(value, bool) else None


def token_dropping(config: Any, records: Sequence[StepRecord],
                   experts: Optional[int]) -> Dict[str, Any]:
  """BENCH_SUMMARY "token_dropping": whether any arm of an A/B can be said to drop no token.

  Counted: every step's metrics carry a dropped-token count (DROPPED_TOKEN_METRICS). Replayed:
  under retry_when_tokens_dropped MaxText reruns every micro-batch whose ragged buffer overflowed
  on a dropless kernel and keeps only the rerun's gradients, counting the reruns
  (moe_dropless_replays); with that count in every step no token was dropped, and replays > 0
  mean whole extra forward/backward passes. Else the configuration decides: MaxText drops tokens
  only when capacity_factor (dense/padded MoE path) or ragged_buffer_factor (sparse/ragged path)
  is positive; -1 (the default) sizes buffers for the worst case. "verdict": "none" (counted
  zero, no replay, or dropless by configuration), "dropped" (counted), "replayed" (no token
  dropped, replays > 0), "unknown" (neither a count nor the configuration can tell), "not-moe".
  """
  counts = [dropped_tokens_of(record.metrics) for record in records]
  known = [count for count, _ in counts if count is not None]
  names = sorted({name for _, name in counts if name})
  replays = [record.replays for record in records if record.replays is not None]
  replayed = sum(replays) if replays else None
  retry = _config_flag(config, "retry_when_tokens_dropped")
  factors = {key: getattr(config, key, None) for key in ("capacity_factor", "ragged_buffer_factor")}
  factors = {
      key: (float(value) if isinstance(value, (int, float)) else None)
      for key, value in factors.items()
  }
  positive = [key for key, value in factors.items() if value is not None and value > 0]
  known_factors = [value for value in factors.values() if value is not None]
  out: Dict[str, Any] = {
      "dropped_tokens": sum(known) if known else None,
      "counted_steps": len(known),
      "metric": names[0] if len(names) == 1 else (names or None),
      **factors,
      "replays": replayed,
      "replay_counted_steps": len(replays),
      "retry_when_tokens_dropped": retry,
  }
  # The replay covers ragged-buffer overflows only (the flag RoutedMoE sows), not capacity_factor.
  replay_proves = bool(retry and replays and len(replays) == len(records) and
                       "capacity_factor" not in positive)
  if known and len(known) == len(records):
    out["verdict"] = "dropped" if sum(known) > 0 else ("replayed" if replayed else "none")
    out["why"] = f"counted by the trainer ({', '.join(names)}) in every step"
  elif known and sum(known) > 0:
    out["verdict"] = "dropped"
    out["why"] = f"counted by the trainer ({', '.join(names)}) in {len(known)} steps"
  elif not experts:
    out["verdict"] = "not-moe"
    out["why"] = "the trainer's config has no experts"
  elif replay_proves:
    out["verdict"] = "replayed" if replayed else "none"
    out["why"] = (f"retry_when_tokens_dropped: every micro-batch whose ragged buffer overflowed "
                  f"was rerun dropless; {REPLAY_METRIC} counted {replayed} in "
                  f"{len(replays)} of {len(records)} steps")
  elif known_factors and not positive:
    out["verdict"] = "none"
    out["why"] = (
        "dropless by configuration: " +
        ", ".join(f"{key} {value:g}" for key, value in factors.items() if value is not None) +
        " (not positive: buffers sized for the worst case)")
  elif retry:
    out["verdict"] = "unknown"
    out["why"] = (f"retry_when_tokens_dropped is on, but {REPLAY_METRIC} was counted in "
                  f"{len(replays)} of {len(records)} steps" +
                  (" and capacity_factor is positive (the replay covers ragged-buffer "
                   "overflows only)" if "capacity_factor" in positive else ""))
  else:
    out["verdict"] = "unknown"
    out["why"] = ("the trainer counts no dropped tokens and " +
                  (", ".join(f"{key} {factors[key]:g}" for key in positive) +
                   " lets its MoE layers drop tokens" if positive else
                   "its config names neither capacity_factor nor ragged_buffer_factor"))
  return out


def grad_norm(config: Any, records: Sequence[StepRecord]) -> Dict[str, Any]:
  """BENCH_SUMMARY "grad_norm": whether the trainer reported a gradient norm, and why not.

  MaxText's engine records gradient_norm only under skip_step_on_spikes at e591f30c, and on
  every update at b8bf66d6 (training_engine/maxtext_engine.py, _update_kernel and update()).
  """
  names = [grad_norm_name(record.metrics) for record in records]
  found = sorted({name for name in names if name})
  steps = sum(1 for name in names if name)
  skip = _config_flag(config, "skip_step_on_spikes")
  if steps:
    why = f"reported as {', '.join(found)} in {steps} of {len(records)} steps"
  elif not any(record.metrics for record in records):
    why = "the trainer reported no metrics (get_metrics() absent, failing or empty)"
  elif skip is False:
    why = ("skip_step_on_spikes is off: MaxText's engine computes and records gradient_norm "
           "only under skip_step_on_spikes before b8bf66d6 (e591f30c), on every update from "
           "b8bf66d6; this one is older, so the grad-norm gate is not evaluated")
  elif skip:
    why = ("skip_step_on_spikes is on, yet the trainer's metrics carry no gradient_norm: the "
           "grad-norm gate is not evaluated")
  else:
    why = ("the trainer's metrics carry no gradient norm and its config has no "
           "skip_step_on_spikes: the grad-norm gate is not evaluated")
  return {
      "reported": bool(steps),
      "metric": found[0] if len(found) == 1 else (", ".join(found) or None),
      "steps": steps,
      "skip_step_on_spikes": skip,
      "why": why,
  }


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
  step boundary), or all of a step's when it has fewer than 3, never a short final one
  (plan.short_final), and only when every steady step timed its micro-batches the same way
  (microbatch_timing "mixed" otherwise: no median). boundary_free_step_s is the mean of the
  steady steps' estimates, None unless every one has one.
  """
  step_s = [record.seconds for record in records]
  steady = [r for r in records[1:] if not r.profiled]
  if len(records) == 1:
    steady = list(records)
  mean_step = statistics.fmean(r.seconds for r in steady) if steady else None
  modes = sorted({record.microbatch_timing for record in steady})
  timing = modes[0] if len(modes) == 1 else ("mixed" if modes else None)
  sources = sorted({record.microbatch_timing_source for record in steady})
  whys = list(dict.fromkeys(record.timing_why for record in steady if record.timing_why))
  pool = []
  for record in steady:
    pool.extend(regular_microbatches(record.microbatch_s, plan.short_final))
  median_mb = statistics.median(pool) if pool and timing != "mixed" else None
  estimates = [record.boundary_free_step_s for record in steady]
  boundary_free = (statistics.fmean(
      e for e in estimates if e is not None) if estimates and None not in estimates else None)
  per_chip = plan.padded_tokens_per_step / mean_step / plan.chips if mean_step else None
  real_per_chip = plan.tokens_per_step / mean_step / plan.chips if mean_step else None
  summary = {
      "name": plan.name,
      **plan.arm_fields,
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
      "boundary_free_step_s": None if boundary_free is None else round(boundary_free, 6),
      "microbatch_timing": timing,
      "microbatch_timing_source": sources[0] if len(sources) == 1 else sources,
      "microbatch_timing_why": "; ".join(whys) or None,
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
  keys: Optional[Set[Tuple[Any, Tuple[Any, ...]]]] = set()
  for device in devices:
    coords = getattr(device, "coords", None)
    if coords is None or keys is None:
      keys = None
      break
    keys.add((getattr(device, "slice_index", 0), tuple(coords)))
  if keys:
    chips = len(keys)
    return chips, max(1, len(devices) // chips)
  kind = str(getattr(devices[0], "device_kind", "")).lower()
  per_chip = 2 if re.search(r"7x|v7|\bv2\b|\bv3\b", kind) else 1
  return max(1, len(devices) // per_chip), per_chip


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
    why = str(summary.get("microbatch_timing_why") or "no completion to wait on")
    log(f"  median_microbatch_s {summary['median_microbatch_s']}: WARNING: host DISPATCH "
        "intervals, not device times: " + why.replace("host dispatch intervals: ", "", 1))
  else:
    log(f"  median_microbatch_s: none (steps timed micro-batches differently: {timing})")
  if summary.get("boundary_free_step_s") is not None:
    log(f"  boundary_free_step_s {summary['boundary_free_step_s']}: an ESTIMATE, the step with "
        "its first micro-batch replaced by the median regular one")
  log(f"  tokens_per_s_per_chip {summary['tokens_per_s_per_chip']}: rows x tokens_per_row x "
      "micro_steps (padding included, the seed's definition) / s per step / chips")
  log(f"  real_tokens_per_s_per_chip {summary['real_tokens_per_s_per_chip']}: real tokens only")
  dropping = summary.get("token_dropping")
  if dropping:
    verdict = dropping.get("verdict")
    if verdict == "dropped":
      log(f"  WARNING: dropped tokens: {dropping.get('dropped_tokens'):g} ({dropping.get('why')}): "
          "this arm did less MoE work than the e2e run's would at the same routing")
    elif verdict == "replayed":
      log(f"  WARNING: MoE dropless replays: {dropping.get('replays')} ({dropping.get('why')}): "
          "no token dropped, but each replay is a whole extra forward/backward in the step times")
    elif verdict == "unknown":
      log(f"  WARNING: dropped tokens: unknown: {dropping.get('why')}; a comparison cannot claim "
          "that no arm dropped tokens")
    else:
      log(f"  dropped tokens: {verdict} ({dropping.get('why')})")
  norm = summary.get("grad_norm")
  if norm and not norm.get("reported"):
    log(f"  gradient norm: not reported, the grad-norm gate is not evaluated ({norm.get('why')})")
  path = summary.get("update_path")
  if path:
    log(f"  update path: {path.get('ran')} ({path.get('why')}); step-end fence "
        f"{summary.get('fence_s')} s on the idle device")
  stage = summary.get("stage_boundary") or {}
  if stage.get("resolved") == "on":
    log(f"  staged step boundary: {stage.get('staged_steps')} steps counted staged (each on the "
        "worker's evidence)" +
        (f"; latched off: {stage['latched_off']}" if stage.get("latched_off") else ""))
