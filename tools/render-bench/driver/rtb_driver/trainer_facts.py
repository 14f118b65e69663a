"""What the e2e trainer will run, read before it is built: its MaxText model shape (from MaxText's
own config), whether MaxText loads a checkpoint, and which profiler makes the trace."""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .common import int_or_none, SettingsError, TunixMissing
from .resolve import Choice, resolve_routing
from .settings import Settings
from .values import flag_value, scale_targets

# The MaxText flags (MAXTEXT_EXTRA_FLAGS items) that load weights into the trainer.
CHECKPOINT_FLAGS = ("load_parameters_path", "load_full_state_path")
# The shape fields the bench needs of the model, as MaxText's config names them, and the keys
# that set them (base.yml sets the layers as base_num_decoder_layers).
SHAPE_FIELDS = ("num_decoder_layers", "num_experts", "num_experts_per_tok", "vocab_size")
SHAPE_KEYS = ("base_num_decoder_layers", "num_experts", "num_experts_per_tok", "vocab_size")
# Passed along with them: MaxText refuses a command-line override of a model's own key unless
# override_model_config is set, as the e2e's flags then do.
CONFIG_KEYS = ("override_model_config",)


def maxtext_overrides(env: Mapping[str, str]) -> Dict[str, str]:
  """MAXTEXT_EXTRA_FLAGS (`key=value` items separated by blanks), as a mapping; a later item
  wins, as MaxText's own parse of `key=value` overrides does."""
  items: Dict[str, str] = {}
  for word in (env.get("MAXTEXT_EXTRA_FLAGS") or "").split():
    key, sep, value = word.partition("=")
    if not sep or not key:
      raise SettingsError(f"MAXTEXT_EXTRA_FLAGS item {word!r} is not key=value")
    items[key] = value
  return items


def weights_source(trainer_args: Any, trainer_words: Sequence[str], overrides: Mapping[str, str],
                   env: Mapping[str, str]) -> Dict[str, Any]:
  """BENCH_SUMMARY "weights": checkpoint when a checkpoint reaches MaxText (the trainer's
  --maxtext_ckpt_path, its MAXTEXT_CKPT default, or load_parameters_path / load_full_state_path
  among the MaxText overrides), random otherwise."""
  path = getattr(trainer_args, "maxtext_ckpt_path", None) or flag_value(
      list(trainer_words), "--maxtext_ckpt_path")
  if path:
    given = ("TRAINER_ARGV --maxtext_ckpt_path"
             if flag_value(list(trainer_words), "--maxtext_ckpt_path") else
             "MAXTEXT_CKPT (the default of --maxtext_ckpt_path)")
    return {
        "source": "checkpoint", "path": str(path),
        "why": f"{given}: MaxText loads it as load_parameters_path"
    }
  if env.get("MAXTEXT_CKPT"):
    return {
        "source": "checkpoint", "path": env["MAXTEXT_CKPT"],
        "why": "MAXTEXT_CKPT (the default of --maxtext_ckpt_path)"
    }
  for flag in CHECKPOINT_FLAGS:
    if overrides.get(flag):
      return {"source": "checkpoint", "path": overrides[flag], "why": f"MAXTEXT_EXTRA_FLAGS {flag}"}
  return {
      "source": "random", "path": None,
      "why": "no --maxtext_ckpt_path, MAXTEXT_CKPT, load_parameters_path or "
             "load_full_state_path reaches MaxText: it initializes random weights"
  }


def profiler_owner(profile_window: Any, trainer_args: Any,
                   overrides: Mapping[str, str]) -> Dict[str, Any]:
  """BENCH_SUMMARY "profiler": who makes the trace. PROFILE_WINDOW together with the trainer's
  own profiler (--profiler_steps > 0, or MaxText's profiler flag) is a SettingsError: one
  profiler only, so that the trace is of the program the steps time."""
  steps = int_or_none(getattr(trainer_args, "profiler_steps", None)) or 0
  trainer: List[str] = []
  if steps > 0:
    trainer.append(f"TRAINER_ARGV --profiler_steps={steps}")
  maxtext = overrides.get("profiler", "")
  if maxtext and maxtext.lower() not in ("", "none", "''", '""'):
    trainer.append(f"MAXTEXT_EXTRA_FLAGS profiler={maxtext}")
  if profile_window is not None and trainer:
    raise SettingsError(f"PROFILE_WINDOW is set and so is the trainer's own profiler "
                        f"({', '.join(trainer)}): one profiler only (drop one of them)")
  if profile_window is not None:
    return {
        "by": "driver", "why": f"PROFILE_WINDOW={profile_window[0]}:{profile_window[1]} "
                               "(jax.profiler around those timed steps)"
    }
  if trainer:
    return {"by": "trainer", "why": ", ".join(trainer)}
  return {"by": "none", "why": "no PROFILE_WINDOW, --profiler_steps or MaxText profiler flag"}


@dataclasses.dataclass(frozen=True)
class ModelShape:
  """The model as MaxText's config describes it, before any weight is loaded."""
  layers: Optional[int]
  experts: Optional[int]
  topk: Optional[int]
  vocab: Optional[int]
  source: str

  @property
  def routing_shape(self) -> Optional[Tuple[int, int]]:
    if self.layers and self.topk and self.experts:
      return self.layers, self.topk
    return None


def maxtext_pyconfig() -> Any:
  """MaxText's pyconfig, found as Tunix finds it (tunix.utils.maxtext_utils.maxtext_modules)."""
  utils = importlib.import_module("tunix.utils.maxtext_utils")
  modules = getattr(utils, "maxtext_modules", None)
  if not callable(modules):
    raise TunixMissing("tunix.utils.maxtext_utils has no maxtext_modules() to find MaxText's "
                       "pyconfig with")
  return modules()[0]


def read_model_shape(trainer_args: Any, overrides: Mapping[str, str]) -> ModelShape:
  """The model's decoder layers, experts, top-k and vocabulary from MaxText's own config: its
  pyconfig on base.yml with the trainer's --maxtext_model_name and the MaxText overrides that
  set those fields. Reads files only: no device, no weight."""
  pyconfig = maxtext_pyconfig()
  model = getattr(trainer_args, "maxtext_model_name", None)
  if not model:
    raise TunixMissing("the trainer argv names no --maxtext_model_name to read the MaxText "
                       "config of")
  base = os.path.join(os.path.dirname(os.path.abspath(pyconfig.__file__)), "base.yml")
  if not os.path.exists(base):
    raise TunixMissing(f"MaxText's base config {base} does not exist")
  argv = [sys.argv[0] or "bench_driver", base, f"model_name={model}"]
  argv += [f"{key}={overrides[key]}" for key in SHAPE_KEYS + CONFIG_KEYS if key in overrides]
  try:
    config = pyconfig.initialize(argv)
  except Exception as exc:  # pylint: disable=broad-except  # MaxText's own refusal, one line
    raise TunixMissing(f"MaxText's pyconfig refused model_name={model}: {exc}") from None
  values = {field: int_or_none(getattr(config, field, None)) for field in SHAPE_FIELDS}
  return ModelShape(values["num_decoder_layers"], values["num_experts"],
                    values["num_experts_per_tok"], values["vocab_size"],
                    f"MaxText pyconfig model_name={model} ({base})")


def check_routing_targets(targets: Optional[Sequence[float]], shape: ModelShape,
                          routing_source: str) -> str:
  """ROUTING_TARGETS against the model: one per decoder layer, each reachable with its experts
  and top-k (max/mean <= experts / top-k). SettingsError otherwise."""
  layers, topk, experts = shape.layers, shape.topk, shape.experts
  if not (layers and topk and experts):
    raise SettingsError(f"the payload replays routing ({routing_source}) but MaxText's config "
                        f"describes no MoE ({shape.source}: {layers} layers, {experts} experts, "
                        f"top-{topk})")
  if targets is None:
    raise SettingsError(f"ROUTING_TARGETS is required: the payload replays routing ({layers} "
                        f"layers, top-{topk})")
  if len(targets) != layers:
    raise SettingsError(f"ROUTING_TARGETS has {len(targets)} values but the model has {layers} "
                        "decoder layers")
  for layer, target in enumerate(targets):
    if target > experts / topk + 1e-9:
      raise SettingsError(f"routing target {target:g} of layer {layer} cannot be reached with "
                          f"{experts} experts and top-{topk} (max/mean <= {experts / topk:g})")
  return f"{layers} targets for {layers} layers, {experts} experts, top-{topk}"


def maxtext_stage(settings: Settings, trainer_args: Any, overrides: Mapping[str, str],
                  log: Callable[[str],
                                None], strict: bool) -> Tuple[Optional[ModelShape], Choice, str]:
  """The set-up's "MaxText config" stage: (the model's shape from MaxText's config, or None when
  the trainer is not MaxText's or the config did not load, ROUTING resolved, one line).
  ROUTING_TARGETS are checked against the shape here, before the trainer is built. A config that
  does not load is an error when `strict` (the preflight, whose job is to find it); the pod says
  so in a WARNING line and checks the routing shape once the trainer is built, as the program
  it times is the same either way."""
  # ROUTING=auto with no evidence from the e2e run is an error, except for a model without
  # experts, which has no routing to replay: that needs the config, read below.
  try:
    routing: Optional[Choice] = resolve_routing(settings)
    unresolved: Optional[SettingsError] = None
  except SettingsError as exc:
    routing, unresolved = None, exc
  backend = getattr(trainer_args, "trainer_backend", "maxtext") or "maxtext"
  if backend != "maxtext":
    if routing is None:
      raise unresolved or SettingsError("ROUTING is unresolved")
    return None, routing, f"--trainer_backend={backend}: the routing shape comes from the trainer"
  try:
    shape = read_model_shape(trainer_args, overrides)
  except TunixMissing as exc:
    if strict or routing is None:
      raise
    log(f"WARNING: MaxText's config did not load before the trainer ({exc}): ROUTING_TARGETS "
        "and the payloads are checked only once the trainer is built")
    return None, routing, "not read: the routing shape comes from the built trainer"
  if routing is None:
    if shape.experts:
      raise unresolved or SettingsError("ROUTING is unresolved")
    routing = Choice(False, f"auto: the model has no experts ({shape.source}), nothing to replay")
  said = (f"{shape.layers} decoder layers, {shape.experts} experts, top-{shape.topk}, "
          f"vocabulary {shape.vocab} ({shape.source})")
  if not routing.value:
    return shape, routing, f"{said}; routing not replayed ({routing.source})"
  targets = settings.routing_targets
  scaled = scale_targets(targets, settings.routing_scale) if targets is not None else None
  return shape, routing, f"{said}; {check_routing_targets(scaled, shape, routing.source)}"
