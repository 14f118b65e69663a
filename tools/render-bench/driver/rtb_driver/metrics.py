"""Reading what the trainer reports: get_metrics() trees flattened to name -> float for
BENCH_STEP, dropped-token counts, and the TRAINER_STEP_TIMING line with the trainer's own ready
times."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

import numpy as np

from .common import describe_exception, emit


def _as_scalar(value: Any) -> Optional[float]:
  """A Python number, a NumPy scalar or a one-element array as a float; None otherwise."""
  if isinstance(value, bool) or value is None:
    return None
  if isinstance(value, (int, float, np.generic)):
    return float(value)  # type: ignore[arg-type]  # a generic is a NumPy number here
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
  if isinstance(value,
                (int, float, np.generic)) or (hasattr(value, "shape") and hasattr(value, "dtype")):
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
    elif hasattr(value, numerator) and hasattr(
        value, denominator) and not callable(getattr(value, numerator)):
      return getattr(value, numerator), getattr(value, denominator)
  return None


def _is_metrics_buffer(value: Any) -> bool:
  return not isinstance(value, Mapping) and any(
      isinstance(getattr(value, table, None), Mapping)
      for table in ("weighted_metrics", "scalar_metrics"))


def scalar_metrics(tree: Any, warn: Optional[Callable[[str], None]] = None,
                   warned: Optional[Set[Tuple[str, str]]] = None) -> Dict[str, float]:
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
  seen: Set[Tuple[str, str]] = set() if warned is None else warned

  def note(name: str, value: Any) -> None:
    kind = type(value).__name__
    if warn is not None and (name, kind) not in seen:
      seen.add((name, kind))
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
      # pylint: disable-next=broad-except  # a failing reduction leaves the metric unread
      except Exception:
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
      numbers = [item for item in scalars if item is not None]
      if value and len(numbers) == len(scalars):
        out[name] = float(np.mean(numbers))
        return
      if value:
        note(name, value)
      return
    note(name, value)

  if tree is not None:
    one("", tree, 0)
  return {name: value for name, value in out.items() if name}


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
  except Exception as exc:  # pylint: disable=broad-except  # logged as 'unavailable'
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
               not isinstance(update_ago, bool) and math.isfinite(update_ago) else None)
  return times, update_at


# Metric names (their last '/'-separated part) under which a trainer's get_metrics() may report
# the tokens its MoE layers dropped in a step. Neither MaxText (e591f30c) nor Tunix reports one
# today (docs/upstream-trainer-facts.md); a trainer that does is read, and every other run says
# whether its configuration can drop tokens at all.
DROPPED_TOKEN_METRICS = ("dropped_tokens", "tokens_dropped", "num_dropped_tokens",
                         "dropped_token_count")


def dropped_tokens_of(
    metrics: Optional[Mapping[str, float]]) -> Tuple[Optional[float], Optional[str]]:
  """(count, metric name) of a step's dropped tokens, or (None, None) when it has no such metric.
  Several such metrics (one per layer, say) add up."""
  total, names = None, []
  for name, value in (metrics or {}).items():
    if name.rsplit("/", 1)[-1] in DROPPED_TOKEN_METRICS and math.isfinite(value):
      total = (total or 0.0) + value
      names.append(name)
  return total, (",".join(sorted(names)) if names else None)


# Under retry_when_tokens_dropped MaxText's engine reruns each micro-batch whose MoE ragged buffer
# overflowed on a dropless kernel and records the step's count of such reruns under this name in
# update(), once per step (AI-Hypercomputer/maxtext training_engine/maxtext_engine.py@b8bf66d6).
REPLAY_METRIC = "moe_dropless_replays"


def replays_of(metrics: Optional[Mapping[str, float]]) -> Optional[int]:
  """MoE dropless replays the trainer counted in a step (REPLAY_METRIC, summed over every name
  ending in it), or None when its metrics carry no such count."""
  values = [
      value for name, value in (metrics or {}).items()
      if name.rsplit("/", 1)[-1] == REPLAY_METRIC and math.isfinite(value)
  ]
  return int(round(sum(values))) if values else None


# Names under which a trainer reports the update's gradient norm: MaxText's engine records
# "gradient_norm" (maxtext_engine.py@e591f30c only under skip_step_on_spikes, @b8bf66d6 on every
# update), other trainers "grad_norm".
GRAD_NORM_METRICS = ("gradient_norm", "grad_norm")


def grad_norm_name(metrics: Optional[Mapping[str, float]]) -> Optional[str]:
  """The name of a step's gradient-norm metric (GRAD_NORM_METRICS), or None."""
  for name in sorted(metrics or {}):
    if name.rsplit("/", 1)[-1] in GRAD_NORM_METRICS:
      return name
  return None
