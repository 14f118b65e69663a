"""`--preflight`: the pod's set-up run on CPU in the trainer image, one line per check, stopping
before the trainer is built (which would load weights); then the payload built to the warm-up
payload's layout, with a stand-in routing shape (the trainer's own is known only once it is
built)."""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

import numpy as np

from .common import describe_exception, emit, one_line, SettingsError, TunixMissing
from .builders import build_warmup
from .payload import build_payload, default_real_len
from .resolve import Choice, resolve_padding, resolve_routing, trajectory_segments
from .settings import Settings
from .pod import resolve_plan_inputs
from .setup import PREFLIGHT, Setup
from .tunix import field_layout, Fallbacks
from .values import scale_targets


class Checklist:
  """Runs named checks in order; a check whose prerequisite failed is skipped. Each prints one
  line: `preflight: ok|FAIL|skip  NAME: detail`."""

  def __init__(self, out: Callable[[str], None] = emit):
    self.out = out
    self.failed: List[str] = []
    self.passed: Set[str] = set()
    self.bad_settings = False

  def check(self, name: str, run: Callable[[], str], needs: Sequence[str] = ()) -> bool:
    missing = [need for need in needs if need not in self.passed]
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
    except Exception as exc:  # pylint: disable=broad-except  # each failure is one FAIL line
      self.failed.append(name)
      self.out(f"preflight: FAIL  {name}: {describe_exception(exc)}")
      return False
    self.out(f"preflight: ok    {name}: {one_line(detail)}")
    self.passed.add(name)
    return True

  def exit_code(self) -> int:
    return 2 if self.bad_settings else 1 if self.failed else 0

  def finish(self, setup: Setup, notes: Sequence[str], what: str = "") -> int:
    """The notes, the fallbacks taken and the verdict line (`preflight: [WHAT: ]VERDICT (exit
    N)`); the exit code."""
    for note in list(setup.notes) + list(notes):
      self.out(f"preflight: note  {one_line(note)}")
    for taken in setup.fallbacks.taken:
      self.out(f"preflight: FALLBACK {one_line(taken)}")
    code = self.exit_code()
    verdict = ("all good"
               if code == 0 else f"{len(self.failed)} problem(s): {', '.join(self.failed)}")
    self.out(f"preflight: {what + ': ' if what else ''}{verdict} (exit {code})")
    return code


# The routing shape's K for the preflight's small payload: the trainer's own shape is known only
# once the trainer is built, which the preflight does not do (it would load weights).
PREFLIGHT_TOPK = 2


def preflight_experts(targets: Optional[Sequence[float]]) -> int:
  """Experts for the preflight's small payload: enough that every target is reachable
  (max/mean <= experts / top-k)."""
  highest = max(targets) if targets else 1.0
  return max(16, PREFLIGHT_TOPK * int(math.ceil(highest)) * 2)


def run_preflight(settings: Settings, out: Callable[[str], None] = emit) -> int:
  """Runs the pod's set-up stages on CPU, each as one check, then the payload checks. Builds no
  trainer and loads no weights. Exit 0 all good, 1 a problem, 2 bad settings."""
  checks = Checklist(out)
  notes: List[str] = []
  setup = Setup(settings, PREFLIGHT, Fallbacks(settings.allow_fallbacks, log=notes.append),
                log=notes.append)
  out(f"preflight: {settings.bench_name}: JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!r}"
      " (the pod's settings, checked on this machine's CPU)")
  for stage in setup.stages():
    checks.check(stage.name, stage.run, needs=stage.needs)
  warmup: Dict[str, Any] = {}
  checks.check("warm-up payload", lambda: check_warmup(setup, warmup),
               needs=["batch configuration"])
  checks.check("payload settings", lambda: check_payload_settings(setup, warmup),
               needs=["warm-up payload"])
  checks.check("payload", lambda: check_small_payload(setup, warmup["payload"]),
               needs=["warm-up payload", "datatypes"])
  return checks.finish(setup, notes)


def check_warmup(setup: Setup, found: Dict[str, Any]) -> str:
  """Tunix's warm-up payload for the e2e assembler, with the routing shape of MaxText's config
  (the "MaxText config" stage checked ROUTING_TARGETS against it), else a stand-in one (one
  layer per routing target, top-PREFLIGHT_TOPK)."""
  settings = setup.settings
  if setup.model_shape is not None:
    # The pod's own path: the warm-up payload for MaxText's routing shape, before any trainer.
    tunix = setup.payload_setup(None)
    found["payload"], found["tunix"] = tunix.warmup, tunix
    layout = field_layout(tunix.warmup)
    routing = setup.choices["routing"]
    return (f"{len(layout)} fields: {', '.join(sorted(layout))}; routing "
            f"{'replayed' if tunix.routing_shape else 'not replayed'} ({routing.source})")
  routing = setup.choices.get("routing") or resolve_routing(settings)
  shape = None
  if routing.value:
    if settings.routing_targets is None:
      raise SettingsError("ROUTING_TARGETS is required: the payload replays routing "
                          f"({routing.source})")
    shape = (len(settings.routing_targets), PREFLIGHT_TOPK)
  warmup, _ = build_warmup(setup.assembler, setup.algo, setup.algo_config, shape,
                           setup.rollout_logps or Choice(False, ""), setup.fallbacks)
  found["payload"] = warmup
  layout = field_layout(warmup)
  return (f"{len(layout)} fields: {', '.join(sorted(layout))}; routing "
          f"{'replayed' if shape else 'not replayed'} ({routing.source})")


def check_payload_settings(setup: Setup, found: Dict[str, Any]) -> str:
  """REAL_LEN, SEGMENTS, FINAL_ROWS and ROUTING_TARGETS against the warm-up payload's rows and
  token budget, as the pod resolves them before it builds its payloads (resolve_plan_inputs);
  needs MaxText's model shape (else the pod checks them once the trainer is built)."""
  tunix = found.get("tunix")
  if tunix is None:
    return "not checked: MaxText's config did not give the routing shape"
  resolved = resolve_plan_inputs(setup.settings, tunix, log=setup.notes.append)
  return (f"REAL_LEN {resolved['real_len']} of T={tunix.tokens}, {resolved['segments']} "
          f"segments per row ({resolved['segments_rule']}), FINAL_ROWS {resolved['final_rows']} "
          f"of R={tunix.rows}")


def check_small_payload(setup: Setup, warmup: Any) -> str:
  """A small payload (2 rows of at most 4,096 tokens) built by the pod's builder to the warm-up
  layout: every field, dtype and rank, nothing extra."""
  settings, orch_args = setup.settings, setup.orch_args
  layout = field_layout(warmup)
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
             if "routed_experts" in small and settings.routing_targets is not None else None)
  model = setup.model_shape
  experts = model.experts if model is not None and model.routing_shape else preflight_experts(
      targets)
  built = build_payload(
      rows=rows, tokens=tokens, layout=small,
      vocab=(model.vocab if model is not None and model.vocab else setup.tokenizer_vocab or 1000),
      real_len=real_len, segments=min(segments, real_len), real_rows=rows,
      pad_position=position.value, pad_align=align.value, targets=targets, experts=experts,
      advantages=settings.advantages, seed=settings.seed, pad_id=setup.pad_id,
      max_prompt_length=prompt, rollout_as_old=setup.rollout_as_old(), eos_id=setup.eos_id,
      max_response_length=int(getattr(orch_args, "max_response_length", 0) or 0))
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
