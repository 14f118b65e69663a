"""The bench in the pod: set-up, payloads, compile, timed steps, summary."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .calls import block_tree, WorkerCalls
from .common import describe_exception, emit, one_line, say, SettingsError, TunixMissing
from .observers import CompletionWatcher, DeviceObserver
from .payload import build_payload, BuiltPayload, default_real_len, default_segments
from .plan import BenchPlan, JaxProfiler, profile_dir_of, StageState
from .resolve import Choice, resolve_padding, StagePlan, trajectory_segments
from .settings import Settings
from .builders import TunixSetup
from .setup import POD, Setup
from .steps import StepRunner
from .trainer_facts import check_routing_targets, ModelShape
from .summary import count_chips, grad_norm, report_summary, summarize, token_dropping
from .tunix import call_checked, Fallbacks, field_layout, replace_fields
from .values import scale_targets
from .versions import imported_versions


def resolve_plan_inputs(settings: Settings, setup: TunixSetup,
                        log: Callable[[str], None] = say) -> Dict[str, Any]:
  """Checks the settings against the shapes Tunix gave; resolves the defaults, each with the
  source that decided it (logged with `log`)."""
  rows, tokens = setup.rows, setup.tokens
  real_len = settings.real_len if settings.real_len is not None else default_real_len(tokens)
  if real_len > tokens:
    raise SettingsError(f"REAL_LEN={real_len} exceeds the token budget T={tokens} "
                        "(--max_seq_token_per_tpu)")
  cap = setup.num_segments - 1 if setup.num_segments else None
  if setup.max_segments_per_row:
    cap = min(cap, setup.max_segments_per_row) if cap else setup.max_segments_per_row
  segments: Union[int, List[int]]
  if settings.segments is not None:
    segments = settings.segments
    if cap and settings.segments > cap:
      raise SettingsError(f"SEGMENTS={segments} exceeds the {cap} segments a row may hold "
                          "(the payload's num_segments-1, --max_segments_per_packed_row)")
    if settings.segments > real_len:
      raise SettingsError(f"SEGMENTS={segments} exceeds REAL_LEN={real_len}")
    rule = "SEGMENTS"
  elif setup.warmup_segment_counts is not None:
    segments = [min(count, real_len) for count in setup.warmup_segment_counts]
    rule = "each row's count from the warm-up payload (the seed's rule)"
  else:
    fitted = trajectory_segments(real_len, setup.max_prompt_length, setup.max_response_length)
    if fitted is not None:
      segments = min(fitted, cap) if cap else fitted
      rule = (f"max-length trajectories that fit: {real_len} real tokens / (--max_prompt_length "
              f"{setup.max_prompt_length} + --max_response_length {setup.max_response_length})" +
              (f", capped at {cap}" if cap and fitted > cap else ""))
    else:
      segments = default_segments(setup.num_segments, setup.max_segments_per_row, real_len)
      rule = ("the warm-up payload's num_segments - 1 (no --max_prompt_length / "
              "--max_response_length known)")
  final_rows = settings.final_rows if settings.final_rows is not None else rows
  if final_rows > rows:
    raise SettingsError(f"FINAL_ROWS={final_rows} exceeds the rows per micro-batch R={rows}")
  targets = None
  if setup.routing_shape is not None:
    layers, topk = setup.routing_shape
    if settings.routing_targets is not None:
      targets = scale_targets(settings.routing_targets, settings.routing_scale)
    check_routing_targets(
        targets,
        ModelShape(layers, setup.experts, topk, getattr(setup, "vocab", None), "the trainer"),
        "the warm-up payload")
  elif settings.routing_targets is not None:
    log("the payload replays no routing: ROUTING_TARGETS is ignored")
  position, align = resolve_padding(settings)
  return {
      "real_len": real_len, "segments": segments, "segments_rule": rule, "final_rows": final_rows,
      "targets": targets, "pad_position": position, "pad_align": align,
      "max_prompt_length": setup.max_prompt_length or 0,
      "max_response_length": setup.max_response_length or 0
  }


@dataclasses.dataclass
class Payloads:
  """The step's micro-batches: the regular one and the final one (the same object when the
  final micro-batch has every row), with what their builds reported."""
  regular: Any
  final: Any
  regular_built: BuiltPayload
  final_built: Optional[BuiltPayload]
  resolved: Dict[str, Any]


def announce_arm(settings: Settings) -> None:
  """A same-pod A/B's run starts with one BENCH_ARM line: its arm, its place in the pod's run
  order and the driver settings it runs with (each run is a fresh driver process)."""
  fields = settings.arm_fields()
  if not fields:
    return
  line = {"name": settings.bench_name, **fields, "knobs": settings.knobs()}
  emit("BENCH_ARM " + json.dumps(line, separators=(",", ":")))
  say(f"{settings.bench_name}: arm {settings.bench_arm}, run {settings.bench_run} of the pod")


def run_pod(settings: Settings) -> int:
  """The bench in the pod: Tunix set-up, payloads, compile, timed steps, summary."""
  announce_arm(settings)
  say(f"{settings.bench_name}: bench driver starting: {settings.steps} steps x "
      f"{settings.micro_steps} fwd_bwd calls")
  setup = Setup(settings, POD)
  setup.run_before_trainer()
  stage_plan = setup.stage_plan
  # Everything that needs no trainer runs before TrainerWorker(...) builds it: with the model's
  # shape from MaxText's config, the warm-up payload and both payload builds too.
  worker, outer = (None, None) if setup.model_shape is not None else setup.build_worker()
  tunix = setup.payload_setup(worker)
  payloads = build_payloads(settings, tunix)
  check_warmup_signature(tunix, payloads.regular)
  if worker is None:
    worker, outer = setup.build_worker()
  setup.attach_worker(tunix, worker, outer)
  # The mesh, for a worker that could not take it as its execution context.
  with tunix.outer_context or contextlib.nullcontext():
    worker = tunix.worker
    calls = WorkerCalls(worker, tunix.make_request)
    compile_method, compile_call_s = compile_trainer(tunix, payloads.regular)
    devices, chips = device_facts()
    plan = make_plan(settings, tunix, payloads, chips, stage_plan)
    staged = bool(stage_plan and stage_plan.resolved)
    say(f"fwd_bwd call: {'TrainRequest' if calls.takes_request else 'payload'}, "
        f"{calls.describe_update()}; "
        f"staged step boundary {'on' if staged else 'off'} "
        f"({stage_plan.source if stage_plan else ''})")
    stage_state = StageState(plan.stage_boundary, say)
    runner = StepRunner(worker, plan, calls=calls, observer=DeviceObserver(),
                        watcher=CompletionWatcher(time.monotonic), profiler=JaxProfiler(),
                        stage_state=stage_state)
    records = runner.run()
  layers, topk = tunix.routing_shape or (None, None)
  resolved = payloads.resolved
  fallbacks = tunix.fallbacks.taken if tunix.fallbacks else []
  summary = summarize(
      plan, records, rows=tunix.rows, tokens_per_row=tunix.tokens, real_len=resolved["real_len"],
      segments=resolved["segments"], final_rows=resolved["final_rows"], layers=layers, topk=topk,
      experts=tunix.experts, routing=payloads.regular_built.routing,
      routing_final=payloads.final_built.routing if payloads.final_built else None,
      knobs=settings.knobs(), stage=stage_state.summary(), extra={
          "token_dropping": token_dropping(tunix.config, records, tunix.experts),
          "grad_norm": grad_norm(tunix.config, records),
          "compile": {"method": compile_method, "call_s": round(compile_call_s, 3)},
          "devices": len(devices), "shift": payloads.regular_built.shift, "choices": {
              key: {"value": choice.value, "source": choice.source}
              for key, choice in tunix.choices.items()
          }, "weights": setup.weights, "profiler": setup.profiler, "fallbacks": list(fallbacks),
          "versions": imported_versions(setup.called_modules(tunix.worker)
                                       ), **runner.summary_facts()
      })
  emit("BENCH_SUMMARY " + json.dumps(summary, separators=(",", ":")))
  report_summary(summary)
  return 0


def build_payloads(settings: Settings, tunix: TunixSetup) -> Payloads:
  """The regular and final micro-batches, built to the warm-up payload's layout with the
  settings resolved against what Tunix built (each choice logged with its source)."""
  resolved = resolve_plan_inputs(settings, tunix)
  layout = field_layout(tunix.warmup)
  describe = ", ".join(f"{key}[{','.join(map(str, shape))}] {np.dtype(dtype).name}"
                       for key, (shape, dtype) in layout.items())
  say(f"warm-up payload: {describe}, num_segments={tunix.num_segments}")
  choices = tunix.choices
  choices["segments"] = Choice(resolved["segments"], resolved["segments_rule"])
  choices["pad_position"] = resolved["pad_position"]
  choices["pad_align"] = resolved["pad_align"]
  choices["max_prompt_length"] = Choice(
      resolved["max_prompt_length"], "ORCH_ARGV --max_prompt_length (prompt lengths are drawn "
      "up to it)")
  for key, choice in choices.items():
    say(f"{key}: {choice.value} ({choice.source})")

  def build(real_rows: int) -> Tuple[Any, BuiltPayload]:
    start = time.monotonic()
    built = build_payload(rows=tunix.rows, tokens=tunix.tokens, layout=layout, vocab=tunix.vocab,
                          real_len=resolved["real_len"], segments=resolved["segments"],
                          real_rows=real_rows, pad_position=resolved["pad_position"].value,
                          pad_align=resolved["pad_align"].value, targets=resolved["targets"],
                          experts=tunix.experts, advantages=settings.advantages, seed=settings.seed,
                          pad_id=tunix.pad_id, max_prompt_length=resolved["max_prompt_length"],
                          rollout_as_old=tunix.rollout_as_old, eos_id=tunix.eos_id,
                          max_response_length=resolved["max_response_length"])
    for note in built.notes:
      say(f"payload: {note}")
    for miss in built.misses():
      say(f"payload: layer {miss.layer} routing max/mean {miss.achieved:.4f} misses its target "
          f"{miss.target:.4f} by more than 1% (too few tokens per expert)")
    payload = replace_fields(tunix.warmup, metadata={}, **built.arrays)
    say(f"payload with {real_rows} real rows of {built.real_len} tokens, {built.segments} "
        f"segments per row, shift {built.shift}: built in {time.monotonic() - start:.1f} s")
    return payload, built

  regular, regular_built = build(tunix.rows)
  if resolved["final_rows"] == tunix.rows:
    return Payloads(regular, regular, regular_built, None, resolved)
  final, final_built = build(resolved["final_rows"])
  return Payloads(regular, final, regular_built, final_built, resolved)


def compile_trainer(tunix: TunixSetup, regular: Any) -> Tuple[str, float]:
  """Asks the worker to compile for the warm-up payload: (how, seconds the call took)."""
  worker = tunix.worker
  compile_start = time.monotonic()
  if callable(getattr(worker, "compile", None)):
    worker.compile(tunix.warmup if tunix.warmup_is_abstract else regular)
    compile_method = "worker.compile"
  elif callable(getattr(worker, "warmup_compile", None)):
    worker.warmup_compile(tunix.warmup)
    compile_method = "worker.warmup_compile (in the background; step 0 waits for it)"
  else:
    compile_method = "none"
  compile_call_s = time.monotonic() - compile_start
  # MaxText's compile() only stages (the real compile runs in the first fwd_bwd), so the time of
  # this call is never reported as the compile time: step 0 (first_step_s) holds it.
  say(f"compile call: {compile_method} returned after {compile_call_s:.1f} s; the compile "
      "itself may run in step 0, whose time is reported as first_step_s (it includes the "
      "compile) and is left out of the means")
  return compile_method, compile_call_s


def device_facts() -> Tuple[List[Any], int]:
  """(JAX's devices, the chips they make up)."""
  import jax  # pylint: disable=import-outside-toplevel  # only the pod has JAX
  devices = jax.devices()
  chips, per_chip = count_chips(devices)
  say(f"{len(devices)} devices, {chips} chips ({per_chip} devices per chip)")
  return list(devices), chips


def make_plan(settings: Settings, tunix: TunixSetup, payloads: Payloads, chips: int,
              stage_plan: Optional[StagePlan]) -> BenchPlan:
  """What the step loop runs."""
  profile_dir = profile_dir_of(settings.profile_dir, tunix.maxtext_output_directory)
  regular_built = payloads.regular_built
  plan = BenchPlan(name=settings.bench_name, steps=settings.steps, micro_steps=settings.micro_steps,
                   regular=payloads.regular, final=payloads.final,
                   tokens_regular=regular_built.real_tokens,
                   tokens_final=(payloads.final_built or regular_built).real_tokens, chips=chips,
                   padded_tokens_per_call=tunix.rows * tunix.tokens,
                   profile_window=settings.profile_window, profile_dir=profile_dir,
                   stage_boundary=stage_plan, short_final=payloads.final_built is not None,
                   arm_fields=settings.arm_fields())
  plan.logps_pass = make_logps_pass(tunix, tunix.choices["logps_pass"].value,
                                    [payloads.regular, payloads.final])
  return plan


def make_logps_pass(setup: TunixSetup, enabled: bool,
                    payloads: Sequence[Any]) -> Optional[Callable[[Any], Any]]:
  """The actor log-prob pass for the step loop: one LogprobsRequest per payload, built as the
  e2e program builds it (prompt and completion tokens, temperature, pad and eos ids, segments),
  sent to worker.per_token_logps, whose scores come back to the host."""
  if not enabled:
    return None
  requests = {}
  for payload in payloads:
    requests[id(payload)] = call_checked(
        setup.logps_request_class, "LogprobsRequest", {
            "prompt_tokens": payload.prompt_ids, "completion_tokens": payload.completion_ids,
            "pad_id": setup.pad_id, "eos_id": setup.eos_id
        }, {
            "temperature": setup.temperature, "model_role": "actor",
            "segment_ids": payload.segment_ids, "segment_positions": payload.segment_positions
        })

  def score(payload: Any) -> Any:
    result = setup.worker.per_token_logps(requests[id(payload)])
    block_tree(result)
    return result

  return score


def check_warmup_signature(setup: TunixSetup, payload: Any) -> None:
  """The payload must match the warm-up payload's signature (what the trainer compiled for):
  a mismatch would make fwd_bwd recompile for another program, so it stops the run."""
  if setup.payload_signature is None or setup.signature_mismatch is None:
    fallbacks = setup.fallbacks or Fallbacks(allowed=False)
    fallbacks.take("this TrainerWorker module has no payload_signature / "
                   "signature_mismatch", "time without checking the payload against the "
                   "warm-up signature")
    return
  try:
    mismatch = setup.signature_mismatch(setup.payload_signature(setup.warmup),
                                        setup.payload_signature(payload))
  except Exception as exc:  # pylint: disable=broad-except  # stops the run in one line
    raise TunixMissing(f"could not compare the payload with the warm-up signature: "
                       f"{describe_exception(exc)}") from None
  if mismatch:
    raise TunixMissing(f"the payload differs from the warm-up signature (fwd_bwd would "
                       f"recompile another program): {one_line(mismatch)}")
  say("payload matches the warm-up signature")
