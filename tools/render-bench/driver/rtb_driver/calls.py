"""How the driver calls a TrainerWorker: the fwd_bwd / update / staging call shapes each Tunix
generation expects, and reading what a response carries (updated, train_step, tokens)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from .common import describe_exception, TunixMissing


def find_in(response: Any, key: str) -> Any:
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
  return bool(find_in(response, "updated"))


def named_params(function: Any) -> Tuple[Dict[str, inspect.Parameter], bool]:
  """(named parameters, takes **kwargs) of a callable; ({}, False) when it has no signature."""
  try:
    params = dict(inspect.signature(function).parameters)
  except (TypeError, ValueError):
    return {}, False
  var_kw = any(param.kind == inspect.Parameter.VAR_KEYWORD for param in params.values())
  return {
      name: param
      for name, param in params.items()
      if param.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
  }, var_kw


# Update paths of a step (BENCH_STEP "update").
UPDATE_FUSED = "fused"  # the last fwd_bwd(apply_optimizer=True) applies it (tunix#2719)

UPDATE_EXPLICIT = "explicit"  # update() after the last fwd_bwd (the engine's RPC pair)

UPDATE_DEFERRED = "deferred"  # fwd_bwd(apply_optimizer=True, defer_update=True), then


class WorkerCalls:
  """Calls a TrainerWorker the way its generation expects.

  - A worker whose fwd_bwd takes `request` gets a TrainRequest (the engine's call). It is asked
    for the fused update (apply_optimizer) when its signature names it, or takes **kwargs (a
    google/tunix#2719 worker takes it there); accumulate_gradients only when named. Through
    **kwargs the flag may travel into the trainer's fwd_bwd (MaxText's ignores it, b8bf66d6), so
    the warm-up step (step 0) decides: a response that says `updated` keeps the fused path, one
    that does not stops asking (update() after the last call), and a TypeError there stops the
    run in step 0 (TunixMissing), before any timed step.
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
    params, var_kw = named_params(getattr(worker, "fwd_bwd", None))
    self.takes_request = "request" in params
    self.payload_keyword = next((name for name in ("payload", "batch") if name in params), None)
    legacy = not self.takes_request and var_kw
    self.names_apply = "apply_optimizer" in params or legacy
    self.legacy = legacy
    # Asked through **kwargs until the warm-up step tells (None: not yet known).
    self.apply_through_kwargs = not self.names_apply and self.takes_request and var_kw
    self.kwargs_applied: Optional[bool] = None
    self.declined: Optional[str] = None
    self.pass_apply = self.names_apply or self.apply_through_kwargs
    self.pass_accumulate = "accumulate_gradients" in params or legacy
    self.pass_skip_jit = "skip_jit" in params or var_kw
    self.can_defer = "defer_update" in params
    stage = getattr(worker, "stage_fwd_bwd", None)
    stage_params, _ = named_params(stage) if callable(stage) else ({}, False)
    self.can_stage_request = callable(stage) and "request" in stage_params
    self.can_apply_deferred = callable(getattr(worker, "apply_deferred_update", None))

  @property
  def can_fuse(self) -> bool:
    return self.pass_apply

  def describe_update(self) -> str:
    """How the last call of a step asks for the update, for the log lines before the run."""
    if self.apply_through_kwargs and self.pass_apply:
      return ("apply_optimizer through **kwargs on the last call (google/tunix#2719), kept only "
              "if the warm-up step's response says `updated`")
    return "apply_optimizer on the last call" if self.pass_apply else "explicit update()"

  def decline_kwargs_apply(self, reason: str) -> None:
    """Stops asking through **kwargs (the step loop cannot use a fused update here)."""
    if self.apply_through_kwargs and self.pass_apply:
      self.pass_apply = False
      self.declined = reason

  def learn_update(self, updated: bool) -> None:
    """What the warm-up step's last call said: a worker asked through **kwargs that did not
    apply the update is not asked again."""
    if self.apply_through_kwargs and self.pass_apply and self.kwargs_applied is None:
      self.kwargs_applied = updated
      self.pass_apply = updated

  def update_why(self, kind: str) -> str:
    """Why steps of this update kind ran that way (BENCH_SUMMARY update_path)."""
    if kind == UPDATE_DEFERRED:
      return ("staging defers the fused update to apply_deferred_update() so that the stage "
              "comes before it (the seed's --stage_before_update)")
    if kind == UPDATE_FUSED:
      if self.apply_through_kwargs:
        return ("the worker's fwd_bwd took apply_optimizer through **kwargs and applied it in "
                "the warm-up step (its response said `updated`)")
      if self.legacy:
        return ("the worker's fwd_bwd takes the payload and pops apply_optimizer from **kwargs "
                "(the old TrainerWorker); its response said `updated`")
      return "the worker's fwd_bwd names apply_optimizer and its response said `updated`"
    if self.declined:
      return f"update() after the last call: {self.declined}"
    if self.apply_through_kwargs:
      return ("update() after the last call: the worker's fwd_bwd took apply_optimizer through "
              "**kwargs but did not apply it in the warm-up step (no `updated` in its response)")
    if self.names_apply:
      return ("update() after the last call: the worker's fwd_bwd takes apply_optimizer but its "
              "response did not say `updated`")
    return "update() after the last call: the worker's fwd_bwd cannot take apply_optimizer"

  def staging_gaps(self, before_update: bool) -> List[str]:
    """What this worker lacks for a staged step boundary (empty: it can stage)."""
    gaps = []
    if not self.takes_request:
      gaps.append("fwd_bwd(request=...) (staging hands the next step's TrainRequest over)")
    if not self.can_stage_request:
      gaps.append("TrainerWorker.stage_fwd_bwd(request)")
    if before_update and self.names_apply and not (self.can_defer and self.can_apply_deferred):
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
      if not (self.apply_through_kwargs and self.pass_apply and self.kwargs_applied is None):
        return self.worker.fwd_bwd(request=request, **kwargs)
      try:
        return self.worker.fwd_bwd(request=request, **kwargs)
      except TypeError as exc:
        raise TunixMissing(
            "the worker's fwd_bwd takes **kwargs, so the warm-up step asked it for the fused "
            "update (apply_optimizer, google/tunix#2719), and it refused: "
            f"{describe_exception(exc)}; a worker that forwards apply_optimizer to a trainer "
            "that rejects it cannot be timed as the e2e run calls it") from exc
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


def blockable_leaves(tree: Any, max_depth: int = 8, budget: int = 20000) -> Iterator[Any]:
  """The leaves of `tree` that have block_until_ready() (JAX arrays), depth first and in order,
  through mappings, sequences, sets, dataclasses and plain objects' attributes; the walk stops
  below `max_depth` containers and after `budget` nodes (a trainer object reaches a large
  graph). Iterative: no recursion on the tree's depth."""
  stack: List[Tuple[Any, int]] = [(tree, 0)]
  while stack and budget > 0:
    node, depth = stack.pop()
    budget -= 1
    if node is None or depth > max_depth or isinstance(node, type):
      continue
    if callable(getattr(node, "block_until_ready", None)):
      yield node
      continue
    if isinstance(node, (str, bytes, int, float, bool, np.ndarray, np.generic)):
      continue
    if isinstance(node, Mapping):
      children: List[Any] = list(node.values())
    elif isinstance(node, (list, tuple, set)):
      children = list(node)
    elif dataclasses.is_dataclass(node):
      children = [getattr(node, field.name, None) for field in dataclasses.fields(node)]
    elif hasattr(node, "__dict__") and not callable(node):
      children = list(vars(node).values())
    else:
      continue
    stack.extend((child, depth + 1) for child in reversed(children))


def block_tree(tree: Any) -> None:
  """Blocks on every leaf of `tree` that has block_until_ready() (JAX arrays do), down to six
  levels of containers."""
  for leaf in blockable_leaves(tree, max_depth=6):
    leaf.block_until_ready()


def is_blockable(value: Any) -> bool:
  return value is not None and not isinstance(value, type) and callable(
      getattr(value, "block_until_ready", None))


def find_token(response: Any) -> Any:
  """A blockable array carried by a response (directly, in a mapping, or in its metadata)."""
  if response is None:
    return None
  if is_blockable(response):
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
    if is_blockable(value):
      return value
  return None
