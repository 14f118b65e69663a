"""Calling into Tunix strictly: imports that name what they are for, calls checked against the
function's signature, argument parsers whose rejection is one line, fallbacks that stop the run
unless allowed, and the log-prob gates LOGP_GATES=off turns off."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import inspect
import io
import os
import re
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .calls import named_params
from .common import DEFAULT_ORCH_MODULE, describe_exception, RUNTIME_FLAGS, say, SettingsError, TunixMissing


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
  params, var_kw = named_params(function)
  for key in required:
    if key not in params and not var_kw:
      raise TunixMissing(f"{where} takes no argument {key!r}, which the driver must pass "
                         f"(its signature: {name}{signature})")
  optional = dict(optional or {})
  unknown = [
      param.name
      for param in params.values()
      if param.default is inspect.Parameter.empty and param.name not in ("self",
                                                                         "cls") and param.kind in
      (inspect.Parameter.POSITIONAL_OR_KEYWORD,
       inspect.Parameter.KEYWORD_ONLY) and param.name not in required and param.name not in optional
  ]
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
                 optional: Optional[Mapping[str, Any]] = None, log: Callable[[str],
                                                                             None] = say) -> Any:
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


def on_pathways() -> bool:
  return bool(os.environ.get("JAX_PLATFORMS") and os.environ.get("JAX_BACKEND_TARGET"))


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
  if on_pathways():
    importlib.import_module("pathwaysutils").initialize()
  else:
    importlib.import_module("jax").distributed.initialize()


def field_layout(payload: Any) -> Dict[str, Tuple[Tuple[int, ...], Any]]:
  """name -> (shape, dtype) of the array fields of a (possibly abstract) payload."""
  layout = {}
  if dataclasses.is_dataclass(payload):
    items = [
        (field.name, getattr(payload, field.name, None)) for field in dataclasses.fields(payload)
    ]
  else:
    items = list(vars(payload).items())
  for name, value in items:
    if value is not None and hasattr(value, "shape") and hasattr(value, "dtype"):
      layout[name] = (tuple(int(dim) for dim in value.shape), np.dtype(value.dtype))
  return layout


def replace_fields(payload: Any, **changes: Any) -> Any:
  if hasattr(payload, "replace") and callable(payload.replace):
    return payload.replace(**changes)
  return dataclasses.replace(payload, **changes)


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
    except Exception:  # pylint: disable=broad-except  # a property that raises sets no gate
      continue
    if callable(value) or value is None or value is False:
      continue
    left.append(f"{name}={value!r}")
  return left


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
