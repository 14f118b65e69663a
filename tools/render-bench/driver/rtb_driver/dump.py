"""`--dump-payload`: the payload as an .npz file with the settings it was built with, without
Tunix or JAX (check-payload reads these files)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, Mapping, NoReturn, Optional, Sequence

import numpy as np

from .common import DEFAULT_VOCAB, PROG, SettingsError
from .payload import build_payload, BuiltPayload, default_real_len, format_routing_report, spec_field_layout
from .values import parse_float, parse_pad_align, parse_routing_targets, scale_targets


class _ArgumentParser(argparse.ArgumentParser):

  def error(self, message: str) -> NoReturn:  # one line, exit 2 (by the caller)
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
      "rows": rows,
      "tokens": tokens,
      "layers": layers,
      "topk": topk,
      "experts": experts,
      "vocab": vocab,
      "pad_id": pad_id,
      "real_len": built.real_len,
      "segments": built.segments,
      "segments_rule": segments_rule,
      "max_prompt_length": max_prompt_length,
      "final_rows": final_rows,
      "pad_position": pad_position,
      "pad_align": pad_align,
      "advantages": advantages,
      "seed": seed,
      "routing_targets": None if targets is None else [round(float(t), 9) for t in targets],
      "routing_scale": scale,
      "routing_targets_source": targets_source,
      "old_logps": old_logps,
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
  targets = ([1.0] * options.layers if options.routing_targets is None else parse_routing_targets(
      "--routing-targets", options.routing_targets))
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
                        real_rows=real_rows, pad_position=options.pad_position, pad_align=pad_align,
                        targets=targets, experts=options.experts, advantages=options.advantages,
                        seed=options.seed, pad_id=options.pad_id,
                        max_prompt_length=options.max_prompt_length)
  elapsed = time.monotonic() - start
  record = payload_settings(
      rows=options.rows, tokens=options.tokens, layers=options.layers, topk=options.topk,
      experts=options.experts, vocab=options.vocab, pad_id=options.pad_id, built=built,
      segments_rule="option", max_prompt_length=options.max_prompt_length,
      final_rows=real_rows if options.final else None, pad_position=options.pad_position,
      pad_align=pad_align, advantages=options.advantages, seed=options.seed, targets=targets,
      scale=scale, targets_source=("--routing-targets" if options.routing_targets is not None else
                                   "uniform (1.0 per layer, the default)"),
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
