"""`--preflight --numerics`: one fwd_bwd and one update on CPU through the image's own
TrainerWorker and engine, built for a miniature model of the same family (the MaxText flags
NUMERICS_MAXTEXT_FLAGS appends), checking that the numerics knobs do what they claim:
LOGP_GATES=off masks nothing, ADVANTAGES=random gives a gradient, ADVANTAGES=zero none.

The seed's check_numerics_cpu.py checked the same knobs on CPU in the trainer image
(AI-Hypercomputer/maxtext#5701): they are what makes gradient norms comparable between variants
on random weights, so a knob that silently does nothing invalidates every numerics gate.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from .calls import block_tree, WorkerCalls
from .common import emit, one_line, SettingsError
from .metrics import grad_norm_name, scalar_metrics
from .observers import engines_of, PENDING_CHECK
from .payload import build_payload, default_real_len
from .preflight import Checklist
from .resolve import resolve_padding
from .settings import Settings
from .setup import PREFLIGHT, Setup
from .tunix import field_layout, Fallbacks, replace_fields

# The miniature model when NUMERICS_MAXTEXT_FLAGS is unset: the dimensions of MaxText's own CPU
# test of the engine (tests/post_training/unit/maxtext_engine_dropless_replay_test.py@b8bf66d6:
# 256-wide, 2 heads, 4 experts top-2, unscanned layers) with two decoder layers, random weights
# (no checkpoint: a production one does not fit these shapes) and no checkpointing
# (num_decoder_layers follows from base_num_decoder_layers, configs/types.py). Appended to
# MAXTEXT_EXTRA_FLAGS, which Tunix appends last, so these keys win over the e2e's.
MINIATURE_FLAGS = ("override_model_config=true base_num_decoder_layers=2 "
                   "inhomogeneous_layer_cycle_interval=1 base_emb_dim=256 base_num_query_heads=2 "
                   "base_num_kv_heads=2 head_dim=256 base_mlp_dim=256 base_moe_mlp_dim=256 "
                   "num_experts=4 num_experts_per_tok=2 scan_layers=false weight_dtype=float32 "
                   "enable_checkpointing=false load_parameters_path= load_full_state_path=")

# Trainer argv options that would shard the miniature model over the e2e's slice or load its
# checkpoint: one CPU device, random weights.
SINGLE_DEVICE_ARGS = ("mesh_fsdp", "mesh_tp", "mesh_expert", "mesh_context", "mesh_dp")
CHECKPOINT_ARGS = ("maxtext_ckpt_path",)

# The miniature payload: at most this many rows and tokens per row.
NUMERICS_ROWS = 2
NUMERICS_TOKENS = 512

# Zero advantages pass when the gradient is at most this fraction of the random one's.
ZERO_GRADIENT_RATIO = 1e-6

# The check without which no knob is checked: the others need a gradient to compare.
RANDOM_GRADIENT = "ADVANTAGES=random gives a gradient"


class NotApplicable(Exception):
  """A check that cannot be evaluated here: one `skip` line saying why, not a failure."""


class NumericsChecklist(Checklist):
  """The preflight's checklist, where a check may also end as `skip` (NotApplicable)."""

  def check(self, name: str, run: Callable[[], str], needs: Sequence[str] = ()) -> bool:

    def evaluated() -> str:
      try:
        return run()
      except NotApplicable as exc:
        raise _Skipped(str(exc)) from None

    try:
      return super().check(name, evaluated, needs)
    except _Skipped as exc:
      self.out(f"preflight: skip  {name}: {one_line(exc)}")
      return False


class _Skipped(BaseException):
  """Carries a NotApplicable past Checklist's `except Exception` (it is not a failure)."""


def run_numerics(settings: Settings, out: Callable[[str], None] = emit) -> int:
  """The preflight's set-up stages, then a miniature trainer built and run once per advantage
  setting, each knob one check. Exit 0 all good, 1 a knob that does not do what it claims (or a
  set-up problem), 2 bad settings."""
  flags = miniature_flags(settings)
  checks = NumericsChecklist(out)
  notes: List[str] = []
  setup = Setup(settings, PREFLIGHT, Fallbacks(settings.allow_fallbacks, log=notes.append),
                log=notes.append)
  out(f"preflight: {settings.bench_name}: numerics on JAX_PLATFORMS="
      f"{os.environ.get('JAX_PLATFORMS', '')!r} with a miniature model (MaxText flags "
      f"{flags!r}{'' if settings.numerics_maxtext_flags else ', the default'})")
  for stage in setup.stages():
    checks.check(stage.name, stage.run, needs=stage.needs)
  runs: Dict[str, Any] = {}
  checks.check("miniature trainer", lambda: build_miniature(setup, flags, runs),
               needs=["batch configuration", "datatypes", "MaxText", "jax"])
  checks.check("ADVANTAGES=random step", lambda: run_once(setup, runs, "random"),
               needs=["miniature trainer"])
  checks.check("LOGP_GATES=off masks nothing", lambda: check_mask(settings, runs["random"]),
               needs=["ADVANTAGES=random step"])
  checks.check(RANDOM_GRADIENT, lambda: check_random(runs["random"]),
               needs=["ADVANTAGES=random step"])
  checks.check("ADVANTAGES=zero step", lambda: run_once(setup, runs, "zero"),
               needs=["ADVANTAGES=random step"])
  checks.check("ADVANTAGES=zero gives no policy gradient",
               lambda: check_zero(setup, runs["random"], runs["zero"]),
               needs=["ADVANTAGES=zero step", RANDOM_GRADIENT])
  if not checks.failed and RANDOM_GRADIENT not in checks.passed:
    # Every knob check skipped: "all good" would claim what nothing measured.
    checks.failed.append("nothing measured")
    out("preflight: FAIL  nothing measured: the engine shows no gradient (no _accumulated_grads, "
        "no gradient norm), so no knob could be checked")
  return checks.finish(setup, notes, "numerics")


def miniature_flags(settings: Settings) -> str:
  """NUMERICS_MAXTEXT_FLAGS, else MINIATURE_FLAGS; every item must be KEY=VALUE."""
  flags = settings.numerics_maxtext_flags or MINIATURE_FLAGS
  for item in flags.split():
    if not item.split("=", 1)[0] or "=" not in item:
      raise SettingsError(f"NUMERICS_MAXTEXT_FLAGS: {item!r} is not a MaxText KEY=VALUE item")
  return flags


def build_miniature(setup: Setup, flags: str, runs: Dict[str, Any]) -> str:
  """Builds the trainer and worker as the pod does, for the miniature model on one device with
  random weights."""
  args = setup.trainer_args
  changed = []
  for name in SINGLE_DEVICE_ARGS:
    if getattr(args, name, None) not in (None, 1):
      changed.append(f"--{name} {getattr(args, name)} -> 1")
      setattr(args, name, 1)
  for name in CHECKPOINT_ARGS:
    if getattr(args, name, None):
      changed.append(f"--{name} dropped")
      setattr(args, name, None)
  # Set for the rest of the process (run_numerics is its last act): a trainer that reads the
  # flags again when it first runs still builds the miniature, never the e2e model.
  os.environ["MAXTEXT_EXTRA_FLAGS"] = f"{os.environ.get('MAXTEXT_EXTRA_FLAGS', '')} {flags}".strip()
  # The miniature's routing shape is its own trainer's, not the e2e model's that the "MaxText
  # config" stage read: the payload is built after the trainer, from it.
  setup.model_shape = None
  worker, outer = setup.build_worker()
  tunix = setup.attach_worker(setup.payload_setup(worker), worker, outer)
  runs["tunix"] = tunix
  config = tunix.config
  shape = ", ".join(f"{key} {getattr(config, key)}" for key in ("num_decoder_layers", "emb_dim",
                                                                "num_experts", "vocab_size")
                    if getattr(config, key, None) is not None)
  return (f"{type(engines_of(tunix.worker)[-1]).__name__ if engines_of(tunix.worker) else 'no'}"
          f" engine; {shape or 'no model config'}" + (f"; {', '.join(changed)}" if changed else ""))


def miniature_payload(setup: Setup, tunix: Any, advantages: str) -> Any:
  """A small payload (NUMERICS_ROWS x NUMERICS_TOKENS at most) built by the pod's builder to
  the warm-up payload's layout, with `advantages`."""
  settings, orch_args = setup.settings, setup.orch_args
  layout = field_layout(tunix.warmup)
  rows = min(NUMERICS_ROWS, tunix.rows)
  tokens = min(NUMERICS_TOKENS, tunix.tokens)
  small = {
      name: ((rows, tokens) + tuple(shape[2:]) if len(shape) >= 2 and shape[1] else
             (rows,) + tuple(shape[1:]), dtype) for name, (shape, dtype) in layout.items()
  }
  position, align = resolve_padding(settings)
  real_len = default_real_len(tokens)
  prompt = min(int(getattr(orch_args, "max_prompt_length", 0) or 0), real_len // 4)
  # Balanced routing, one target per miniature layer: the production targets are per production
  # layer, and the checks do not depend on the load.
  routed = "routed_experts" in small and tunix.routing_shape is not None
  targets = [1.0] * int(tunix.routing_shape[0]) if routed else None
  built = build_payload(rows=rows, tokens=tokens, layout=small, vocab=tunix.vocab,
                        real_len=real_len, segments=1, real_rows=rows, pad_position=position.value,
                        pad_align=align.value, targets=targets, experts=tunix.experts,
                        advantages=advantages, seed=settings.seed, pad_id=tunix.pad_id,
                        max_prompt_length=prompt, rollout_as_old=tunix.rollout_as_old,
                        eos_id=tunix.eos_id, max_response_length=tunix.max_response_length or 0)
  return replace_fields(tunix.warmup, metadata={}, **built.arrays)  # as the pod sends it


def run_once(setup: Setup, runs: Dict[str, Any], advantages: str) -> str:
  """One fwd_bwd (no update inside) and one update() on the miniature trainer: what the loss
  counted and the gradient, read from the engine before the update; the trainer's own metrics
  after it."""
  tunix = runs["tunix"]
  worker = tunix.worker
  calls = WorkerCalls(worker, tunix.make_request)
  payload = miniature_payload(setup, tunix, advantages)
  response = calls.fwd_bwd(calls.request(payload), apply_optimizer=False)
  block_tree(response)
  settle_overflow_check(worker)
  tokens = float(np.asarray(payload.completion_mask).sum())
  denominator = loss_denominator(worker)
  norm = accumulated_gradient_norm(worker)
  source: Optional[str] = "the engine's accumulated gradients"
  block_tree(calls.update())
  get_metrics = getattr(worker, "get_metrics", None)
  metrics = scalar_metrics(get_metrics()) if callable(get_metrics) else {}
  name = grad_norm_name(metrics)
  if norm is None:
    norm, source = (metrics[name], f"the trainer's {name}") if name else (None, None)
  runs[advantages] = {
      "completion_tokens": tokens, "denominator": denominator, "norm": norm, "norm_source": source
  }
  return (f"{int(tokens)} completion tokens; gradient norm {_number(norm)} "
          f"({source or 'not measurable'})")


def check_mask(settings: Settings, measured: Mapping[str, Any]) -> str:
  if settings.logp_gates:
    raise NotApplicable("LOGP_GATES=on: the gates may mask tokens by design")
  counted, tokens = measured["denominator"], measured["completion_tokens"]
  if counted is None:
    raise NotApplicable("the engine exposes no loss denominator (_accumulated_denominator, or a "
                        "loss with a denominator in _cached_losses / " + PENDING_CHECK + ")")
  if not math.isclose(counted, tokens, rel_tol=1e-6, abs_tol=1e-3):
    raise AssertionError(f"the loss counted {_number(counted)} tokens of the completion mask's "
                         f"{_number(tokens)}: LOGP_GATES=off still masks tokens")
  return f"the loss counted all {_number(tokens)} completion tokens"


def check_random(measured: Mapping[str, Any]) -> str:
  norm = measured["norm"]
  if norm is None:
    raise NotApplicable("no gradient to measure: the engine keeps no _accumulated_grads and the "
                        "trainer reports no gradient norm")
  if not math.isfinite(norm) or norm <= 0:
    raise AssertionError(f"gradient norm {_number(norm)} with random advantages "
                         f"({measured['norm_source']}): the step trains nothing")
  return f"gradient norm {_number(norm)} > 0 ({measured['norm_source']})"


def check_zero(setup: Setup, random: Mapping[str, Any], zero: Mapping[str, Any]) -> str:
  beta = getattr(setup.algo_config, "beta", None)
  if isinstance(beta, (int, float)) and beta > 0:
    raise NotApplicable(f"the GRPO config's beta {beta:g}: its KL term has a gradient of its own")
  norm = zero["norm"]
  if norm is None:
    raise NotApplicable("no gradient to measure with zero advantages")
  limit = ZERO_GRADIENT_RATIO * random["norm"]
  if not math.isfinite(norm) or norm > limit:
    raise AssertionError(f"gradient norm {_number(norm)} with zero advantages, "
                         f"{_number(random['norm'])} with random ones (limit {_number(limit)}): "
                         "the loss does not scale with the advantages")
  return (f"gradient norm {_number(norm)} with zero advantages, at most {ZERO_GRADIENT_RATIO:g} "
          f"of the random one's {_number(random['norm'])}")


def _number(value: Optional[float]) -> str:
  return "none" if value is None else f"{value:.6g}"


def _as_float(value: Any) -> Optional[float]:
  try:
    array = np.asarray(value, dtype=np.float64)
  except (TypeError, ValueError):
    return None
  return float(array.sum()) if array.size else None


def settle_overflow_check(worker: Any) -> None:
  """Under retry_when_tokens_dropped MaxText's engine accumulates an overflowed micro-batch as
  zero until its flag is read after the next dispatch; update() settles it first, and so does
  the engine's own test before reading the sums (maxtext_engine.py and
  maxtext_engine_dropless_replay_test.py @b8bf66d6). Done here before the sums are read."""
  for engine in engines_of(worker):
    settle = getattr(engine, "_resolve_overflow_check", None)
    if getattr(engine, PENDING_CHECK, None) is not None and callable(settle):
      settle()
      return


def loss_denominator(worker: Any) -> Optional[float]:
  """The loss's denominator after one fwd_bwd: MaxText's `_accumulated_denominator`
  (maxtext_engine.py@b8bf66d6), else the denominator of the call's loss (its pending overflow
  check's, else the newest of `_cached_losses`, @e591f30c)."""
  for engine in engines_of(worker):
    accumulated = getattr(engine, "_accumulated_denominator", None)
    if accumulated is not None:
      return _as_float(accumulated)
    pending = getattr(engine, PENDING_CHECK, None)
    losses = getattr(engine, "_cached_losses", None)
    loss = (getattr(pending, "loss", None)
            if pending is not None else losses[-1] if isinstance(losses, list) and losses else None)
    if loss is not None and getattr(loss, "denominator", None) is not None:
      return _as_float(loss.denominator)
  return None


def _leaves(tree: Any, depth: int = 0) -> List[Any]:
  if tree is None or depth > 32:
    return []
  if isinstance(tree, Mapping):
    return [leaf for value in tree.values() for leaf in _leaves(value, depth + 1)]
  if isinstance(tree, (list, tuple)):
    return [leaf for value in tree for leaf in _leaves(value, depth + 1)]
  if (hasattr(tree, "shape") and
      hasattr(tree, "dtype")) or (isinstance(tree, (int, float, np.generic)) and
                                  not isinstance(tree, bool)):
    return [tree]
  return []


def accumulated_gradient_norm(worker: Any) -> Optional[float]:
  """The L2 norm of the engine's accumulated gradients (`_accumulated_grads`, before update()
  applies and clears them), in float64; None when no engine keeps them."""
  for engine in engines_of(worker):
    grads = getattr(engine, "_accumulated_grads", None)
    if grads is None:
      continue
    try:
      import jax  # pylint: disable=import-outside-toplevel  # the image's JAX walks its pytrees
      leaves = jax.tree_util.tree_leaves(grads)
    except (ImportError, AttributeError):
      leaves = _leaves(grads)
    total = 0.0
    for leaf in leaves:
      values = np.asarray(leaf, dtype=np.float64)
      total += float(np.sum(np.square(values)))
    return math.sqrt(total) if math.isfinite(total) else float("nan")
  return None
