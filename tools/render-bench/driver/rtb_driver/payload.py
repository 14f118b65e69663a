"""The synthetic micro-batch (NumPy only; docs/payload-spec.md): rows laid out as Tunix's
sequence packer writes them, segments, log-probs, advantages and calibrated top-k routing."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .common import (REGULAR_BUDGET, REGULAR_PADDING, SEGMENT_ALIGN, SettingsError,
                     TARGET_TOLERANCE, TunixMissing)


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


def avoid_ids(ids: np.ndarray, vocab: int, special: Sequence[int]) -> None:
  """Moves every id in `ids` (drawn from [1, vocab)) that equals a special id (pad, eos) to the
  next id up that is not special (wrapping to 1), in place: a real token never reads as padding
  or as the end of a sequence."""
  banned = sorted({int(value) for value in special if 1 <= int(value) < vocab})
  if not banned:
    return
  if len(banned) >= vocab - 1:
    raise SettingsError(f"vocabulary size {vocab}: no id left besides the pad and eos ids")
  for value in banned:
    target = value
    while target in banned:
      target = target + 1 if target + 1 < vocab else 1
    ids[ids == value] = target


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
    return [
        entry for entry in self.routing
        if entry.achieved is not None and abs(entry.achieved - entry.target) > TARGET_TOLERANCE *
        entry.target
    ]


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
                  max_prompt_length: int = 0, rollout_as_old: bool = False,
                  eos_id: Optional[int] = None, max_response_length: int = 0) -> BuiltPayload:
  """Builds one micro-batch: every field of `layout` (name -> (shape, dtype)) as a NumPy array.

  Rows 0..real_rows-1 hold real_len real tokens each, cut into `segments` segments (one count
  for every row, or one per row) on the 64-token grid; the other rows are all padding. As Tunix's
  sequence packer writes them, a segment is one trajectory: a prompt (a seeded length in
  [1, min(max_prompt_length, length - 1)], none when max_prompt_length is 0, and at least
  length - max_response_length when that is given, so that no completion is longer than it) then
  its completion.
  Ids, segment ids, in-segment positions and routing cover the whole segment; completion_mask,
  advantages and per-token log-probs its completion only. Padding is at the end of a row, or
  (pad_position "start") the real part is written further right by the trailing padding rounded
  down to a multiple of pad_align, every per-token array alike. With rollout_as_old, the rollout
  log-probs are the old ones (the e2e program uses the rollout's as old). A real token id is
  never the pad id or the eos id. A per-token field the builder does not know is an error.
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
  avoid_ids(ids, vocab, [pad_id] + ([] if eos_id is None else [eos_id]))
  segment_rng = _rng(seed, _SEGMENTS)
  prompt_rng = _rng(seed, _PROMPTS)
  segment_ids = np.zeros((rows, real_len), dtype=np.int32)
  segment_positions = np.zeros((rows, real_len), dtype=np.int32)
  completion = np.zeros((rows, real_len), dtype=bool)
  positions = np.arange(real_len, dtype=np.int64)
  too_long = 0
  for row in range(rows):
    starts = np.concatenate([[0], segment_cuts(segment_rng, real_len, counts[row])])
    lengths = np.diff(np.concatenate([starts, [real_len]]))
    segment_ids[row] = np.repeat(np.arange(1, starts.size + 1, dtype=np.int32), lengths)
    segment_positions[row] = positions - np.repeat(starts, lengths)
    prompts = np.zeros(lengths.size, dtype=np.int64)
    if max_prompt_length > 0:
      longest = np.minimum(max_prompt_length, lengths - 1)
      shortest = np.ones_like(longest)
      if max_response_length > 0:
        need = lengths - max_response_length  # the shortest prompt leaving a short completion
        too_long += int((need > longest).sum())
        longest = np.maximum(longest, need)  # the prompt takes what no completion may hold
        shortest = np.maximum(shortest, np.minimum(need, longest))
      drawn = prompt_rng.integers(shortest, np.maximum(longest, 1) + 1)
      prompts = np.where(longest >= 1, drawn, 0)
    completion[row] = segment_positions[row] >= np.repeat(prompts, lengths)
  if too_long:
    notes.append(f"{too_long} segments are longer than --max_prompt_length {max_prompt_length} + "
                 f"--max_response_length {max_response_length}: their prompts are longer than "
                 "--max_prompt_length, so that no completion exceeds --max_response_length")
  most = max(counts)
  if advantages == "zero":
    per_segment = np.zeros((rows, most), dtype=np.float32)
  else:
    per_segment = _rng(seed, _ADVANTAGES).standard_normal((rows, most)).astype(np.float32)
  token_advantages = np.where(
      completion, np.take_along_axis(per_segment,
                                     segment_ids.astype(np.int64) - 1, axis=1),
      np.float32(0)).astype(np.float32)

  def logps(stream: int) -> np.ndarray:
    # Close to a random-weight policy's log-prob (-ln vocab), so that on random weights the
    # policy/old ratio stays near 1; always negative on completion tokens, 0 elsewhere.
    noise = _rng(seed, _LOGPS, stream).standard_normal((rows, real_len))
    values = np.minimum(-math.log(vocab) + 0.05 * noise, -1e-3).astype(np.float32)
    return np.where(completion, values, np.float32(0)).astype(np.float32)

  per_token: Dict[str, np.ndarray] = {
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
    values: np.ndarray
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
      raise TunixMissing(f"the warm-up payload has a per-token field {name}[{rows},{tokens}] "
                         f"{dtype.name} the payload builder does not know: zeros would train "
                         "another program (docs/payload-spec.md lists the known fields)")
    array[:real_rows, span] = values[:real_rows].astype(dtype)
    arrays[name] = array
  return BuiltPayload(arrays=arrays, routing=routing_report, real_rows=real_rows, real_len=real_len,
                      segments=counts[0] if len(set(counts)) == 1 else counts, shift=shift,
                      real_tokens=real_rows * real_len, notes=notes)


def format_routing_report(report: Sequence[LayerRouting]) -> List[str]:
  lines = [f"{'layer':>5} {'target':>9} {'achieved':>9} {'max_load':>10} {'mean_load':>12}"]
  for entry in report:
    achieved = "-" if entry.achieved is None else f"{entry.achieved:.4f}"
    lines.append(f"{entry.layer:>5} {entry.target:>9.4f} {achieved:>9} {entry.max_load:>10} "
                 f"{entry.mean_load:>12.2f}")
  return lines
