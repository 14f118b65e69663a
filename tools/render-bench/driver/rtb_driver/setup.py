"""The pod's set-up of the e2e trainer program, as named stages in the order the pod runs them.

Every stage before the trainer is built needs no TPU and loads no weights: the trainer's and the
orchestrator's modules and argv (through Tunix's own parsers), the functions and signatures the
run will call and the keywords the image passes them, JAX, MaxText's model shape with the
routing targets checked against it, the GRPO config with LOGP_GATES applied, the tokenizer, the
batch configuration and assembler, the actor log-prob pass and the staged boundary the worker can
run. The pod runs them, one log line each, then builds the warm-up payload and both payloads
(payload_setup) and only then the trainer (build_worker, attach_worker); `--preflight` runs
exactly the same stages on CPU, each as one check line, and stops there. So a problem the
preflight can see is found by the same code that would meet it in the pod.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import sys
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

from .builders import (build_algo, build_assembler, build_warmup, configured_eos, make_batch_config,
                       token_ids, TunixSetup)
from .calls import named_params, WorkerCalls
from .common import (DEFAULT_TRAINER_MODULE, int_or_none, one_line, say, SettingsError,
                     TunixMissing)
from .observers import engines_of
from .plan import hlo_dump_flags, profile_dir_of
from .resolve import (Choice, concrete_segment_counts, resolve_logps_pass, resolve_routing,
                      resolve_stage_boundary, rollout_logps_requested, StagePlan)
from .settings import Settings
from .trainer_facts import (maxtext_overrides, maxtext_stage, ModelShape, profiler_owner,
                            weights_source)
from .tunix import (call_checked, Fallbacks, import_orchestrator, import_tunix, initialize_jax,
                    on_pathways, parse_with, plan_call, process_module, require, source_file,
                    split_runtime_argv)
from .upstream import Keyword, logps_keywords, rl_program_agreement, rollout_logprobs_asked
from .values import flag_value

# How the set-up runs: in the pod (JAX on the slice, a stage that fails stops the run) or as the
# preflight (JAX on the CPU, every stage checked, stricter about what the pod only warns of).
POD = "pod"
PREFLIGHT = "preflight"

TRAINER_WORKER_MODULE = "tunix.experimental.worker.trainer_worker"
DATATYPES_MODULE = "tunix.experimental.common.datatypes"
BATCH_ASSEMBLY_MODULE = "tunix.experimental.orchestrator.batch_assembly"
# Modules the driver calls into without keeping them (BENCH_SUMMARY "versions" hashes them too).
OTHER_CALLED_MODULES = ("tunix.experimental.orchestrator.compile_warmup",
                        "tunix.utils.maxtext_utils",
                        "tunix.experimental.distributed.runtime.contexts.k8s_context")


@dataclasses.dataclass(frozen=True)
class Stage:
  """One step of the set-up: its name (the preflight's check name), what it does (returns one
  line saying what it found) and the stages it needs."""
  name: str
  run: Callable[[], str]
  needs: Tuple[str, ...] = ()


class Setup:
  """Builds what the e2e trainer runs, through Tunix's own parsers and factories, stage by stage;
  what each stage found stays on the object for the next."""

  def __init__(self, settings: Settings, mode: str = POD, fallbacks: Optional[Fallbacks] = None,
               log: Callable[[str], None] = say):
    if mode not in (POD, PREFLIGHT):
      raise ValueError(f"unknown set-up mode {mode!r}")
    self.settings = settings
    self.mode = mode
    self.log = log
    self.fallbacks = fallbacks or Fallbacks(settings.allow_fallbacks, log=log)
    # Lines about optional arguments a signature lacks: the pod logs them when it calls, the
    # preflight prints them after its checks.
    self.notes: List[str] = []
    self.trainer_main, self.trainer_words = split_runtime_argv("TRAINER_ARGV",
                                                               settings.trainer_argv)
    self.orch_main, self.orch_words = split_runtime_argv("ORCH_ARGV", settings.orch_argv)
    self.choices: Dict[str, Choice] = {}
    self.trainer_node: Any = None
    self.trainer_args: Any = None
    self.worker_module: Any = None
    self.worker_class: Any = None
    self.datatypes_module: Any = None
    self.orch_node: Any = None
    self.orch_args: Any = None
    self.rollout_logps: Optional[Choice] = None
    self.algo: Any = None
    self.algo_config: Any = None
    self.pad_id = 0
    self.eos_id = 0
    self.tokenizer_vocab: Optional[int] = None
    self.batch_assembly: Any = None
    self.assembler: Any = None
    self.stage_plan: Optional[StagePlan] = None
    self.worker_keywords: Dict[str, Keyword] = {}
    self.maxtext_flags: Dict[str, str] = {}
    self.weights: Dict[str, Any] = {}
    self.profiler: Dict[str, Any] = {}
    self.model_shape: Optional[ModelShape] = None

  def stages(self) -> List[Stage]:
    """The stages before the trainer is built, in the pod's order (JAX before the orchestrator's
    module: importing run_deepswe_dist sets JAX_PLATFORMS=cpu when it is unset)."""
    return [
        Stage("trainer module", self.trainer_module),
        Stage("TRAINER_ARGV", self.parse_trainer_argv, ("trainer module",)),
        Stage("MaxText", self.trainer_backend, ("TRAINER_ARGV",)),
        Stage("TrainerWorker", self.trainer_worker, ("TRAINER_ARGV",)),
        Stage("TrainerWorker call", self.trainer_worker_call, ("TrainerWorker",)),
        Stage("datatypes", self.datatypes, ("TrainerWorker",)),
        Stage("jax", self.jax),
        Stage("MaxText config", self.maxtext_config, ("MaxText", "jax")),
        Stage("orchestrator module", self.orchestrator_module),
        Stage("ORCH_ARGV", self.parse_orchestrator_argv, ("orchestrator module",)),
        Stage("GRPO config", self.grpo_config, ("ORCH_ARGV",)),
        Stage("tokenizer", self.tokenizer, ("ORCH_ARGV", "TRAINER_ARGV")),
        Stage("batch configuration", self.batch_configuration, ("GRPO config", "tokenizer")),
        Stage("actor log-prob pass", self.logps_pass, ("GRPO config", "datatypes")),
        Stage("staged step boundary", self.staged_boundary, ("TrainerWorker",)),
    ]

  def run_before_trainer(self) -> None:
    """The pod: every stage before the trainer is built, one log line each; the first that
    fails stops the run (its exception says why)."""
    for stage in self.stages():
      self.log(f"set-up: {stage.name}: {one_line(stage.run())}")

  # ---- the stages ----

  def trainer_module(self) -> str:
    self.trainer_node = import_tunix(process_module(self.trainer_main, DEFAULT_TRAINER_MODULE),
                                     "parse the trainer argv")
    for name in ("_parse_args", "_create_trainer_factory"):
      require(self.trainer_node, name, "build the trainer")
    return f"{self.trainer_node.__name__} ({source_file(self.trainer_node)})"

  def parse_trainer_argv(self) -> str:
    parse = require(self.trainer_node, "_parse_args", "parse the trainer argv")
    self.trainer_args = parse_with(parse, self.trainer_words, "TRAINER_ARGV")
    self.maxtext_flags = maxtext_overrides(os.environ)
    self.profiler = profiler_owner(self.settings.profile_window, self.trainer_args,
                                   self.maxtext_flags)
    self.weights = weights_source(self.trainer_args, self.trainer_words, self.maxtext_flags,
                                  os.environ)
    return (f"{len(self.trainer_words)} words parsed by {self.trainer_node.__name__}._parse_args; "
            f"weights {self.weights['source']}; profiler {self.profiler['by']}")

  def trainer_backend(self) -> str:
    # The trainer factory builds the MaxText engine through tunix.utils.maxtext_utils; both are
    # imported here, before anything is built.
    backend = getattr(self.trainer_args, "trainer_backend", "maxtext") or "maxtext"
    if backend != "maxtext":
      return f"--trainer_backend={backend}: no MaxText modules to check"
    modules = []
    for name in ("maxtext", "tunix.utils.maxtext_utils"):
      module = import_tunix(name, "build the MaxText trainer")
      modules.append(f"{name} ({source_file(module)})")
    return ", ".join(modules)

  def trainer_worker(self) -> str:
    module = import_tunix(TRAINER_WORKER_MODULE, "build the worker")
    worker_class = require(module, "TrainerWorker", "build the worker")
    plan_call(worker_class, "TrainerWorker", {"trainer_factory": None, "worker_id": "check"},
              {"execution_context": None}, log=self.notes.append)
    for method in ("fwd_bwd", "update", "with_loss_fn", "with_gen_model_input_fn"):
      require(worker_class, method, "time the trainer")
    calls = WorkerCalls(worker_class)
    if not calls.takes_request and not calls.payload_keyword and not calls.pass_apply:
      raise TunixMissing(f"TrainerWorker.fwd_bwd{inspect.signature(worker_class.fwd_bwd)} in "
                         f"{source_file(worker_class)}: takes neither a request nor a payload")
    self.worker_module, self.worker_class = module, worker_class
    parts = [
        f"fwd_bwd({'request' if calls.takes_request else 'payload'})",
        calls.describe_update(), "compile" if hasattr(worker_class, "compile") else
        "warmup_compile" if hasattr(worker_class, "warmup_compile") else "no compile call"
    ]
    if self.mode == PREFLIGHT and not (hasattr(module, "payload_signature") and
                                       hasattr(module, "signature_mismatch")):
      # The pod meets this when it checks its payload (check_warmup_signature).
      self.fallbacks.take(
          "this TrainerWorker module has no payload_signature / "
          "signature_mismatch", "time without checking the payload against the "
          "warm-up signature")
    return ", ".join(parts)

  def trainer_worker_call(self) -> str:
    """The log-prob keywords the image's trainer node passes to TrainerWorker(...), read from its
    source (upstream.logps_keywords): the driver passes exactly those, with the values the e2e's
    argv gives them; a source it cannot read stops the run (TunixMissing, exit 1)."""
    self.worker_keywords, choices, detail = logps_keywords(self.trainer_main,
                                                           self.trainer_node.__name__,
                                                           self.worker_class, self.trainer_args)
    self.choices.update(choices)
    return detail

  def maxtext_config(self) -> str:
    """The model's layers, experts and top-k from MaxText's config, and the routing replay
    checked against them (trainer_facts.maxtext_stage): all before the trainer is built."""
    self.model_shape, self.choices["routing"], detail = maxtext_stage(
        self.settings, self.trainer_args, self.maxtext_flags,
        log=self.log if self.mode == POD else self.notes.append, strict=self.mode == PREFLIGHT)
    return detail

  def datatypes(self) -> str:
    module = import_tunix(DATATYPES_MODULE, "build train requests")
    require(module, "RLTrainerPayload", "build the payload")
    if WorkerCalls(self.worker_class).takes_request:
      request_class = require(module, "TrainRequest", "call fwd_bwd(request=...)")
      plan_call(request_class, "TrainRequest", {"request_id": "r", "payload": None, "metadata": {}})
    self.datatypes_module = module
    return f"RLTrainerPayload, TrainRequest ({source_file(module)})"

  def jax(self) -> str:
    dump = ""
    if self.settings.dump_hlo:
      # XLA reads XLA_FLAGS when JAX starts its backend: set before JAX is imported.
      flags = hlo_dump_flags(profile_dir_of(self.settings.profile_dir, self.output_directory()))
      os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()
      dump = f"; DUMP_HLO: XLA_FLAGS += {flags}"
    if self.mode == POD:
      if dump and on_pathways():
        self.log("WARNING: DUMP_HLO=1 sets XLA_FLAGS in this client only; on Pathways the "
                 "pathways-proxy compiles, so the HLO dump may stay empty: render the bench "
                 "with `render-bench --dump-hlo` instead")
      initialize_jax()  # Pathways or jax.distributed, as the runtime's K8s context does
    jax = importlib.import_module("jax")
    version = getattr(jax, "__version__", "?")
    if self.mode == POD:
      return f"jax {version} initialized{dump}"
    devices = jax.devices()  # the preflight's CPU: no device of the slice is touched
    platform = getattr(devices[0], "platform", "?") if devices else "no"
    return f"jax {version}: {len(devices)} {platform} devices"

  def output_directory(self) -> Optional[str]:
    """The trainer's --maxtext_output_directory (parsed, else as the argv spells it)."""
    return getattr(self.trainer_args, "maxtext_output_directory", None) or flag_value(
        self.trainer_words, "--maxtext_output_directory")

  def orchestrator_module(self) -> str:
    self.orch_node = import_orchestrator(self.orch_main)
    for name in ("_parse_args", "_build_algo"):
      require(self.orch_node, name, "build the GRPO algorithm")
    return f"{self.orch_node.__name__} ({source_file(self.orch_node)})"

  def parse_orchestrator_argv(self) -> str:
    parse = require(self.orch_node, "_parse_args", "parse the orchestrator argv")
    args = parse_with(parse, self.orch_words, "ORCH_ARGV")
    if getattr(args, "mini_batch_size", 0) is None:
      args.mini_batch_size = args.batch_size
    self.orch_args = args
    # The payload's log-prob fields follow the e2e program, before LOGP_GATES changes anything.
    asked, where = rollout_logprobs_asked(self.orch_node.__name__, args)
    self.rollout_logps = rollout_logps_requested(
        args, None if asked is None else Choice(
            asked, f"the orchestrator asks its rollouts "
            f"{'for' if asked else 'for no'} log-probs "
            f"({where})"))
    self.choices["rollout_logps"] = self.rollout_logps
    return f"{len(self.orch_words)} words parsed by {self.orch_node.__name__}._parse_args"

  def grpo_config(self) -> str:
    self.algo, self.algo_config, changed = build_algo(self.settings, self.orch_node, self.orch_args)
    settings = self.settings
    gates = ("LOGP_GATES=on: the gates stay as the e2e sets them"
             if settings.logp_gates else "LOGP_GATES=off: " +
             (", ".join(changed) + " turned off" if changed else "no log-prob gate was set"))
    config = self.algo_config if self.algo_config is not None else self.algo
    rollout = self.rollout_logps or Choice(False, "")
    return (f"{type(config).__name__}; {gates}; ADVANTAGES={settings.advantages}; rollout "
            f"log-probs {'in' if rollout.value else 'not in'} the payload ({rollout.source})")

  def tokenizer(self) -> str:
    self.pad_id, self.eos_id, self.tokenizer_vocab = token_ids(self.orch_args, self.trainer_args,
                                                               self.fallbacks)
    return (f"pad id {self.pad_id}, tokenizer eos id {self.eos_id}, vocabulary "
            f"{self.tokenizer_vocab}")

  def batch_configuration(self) -> str:
    batch_assembly = import_tunix(BATCH_ASSEMBLY_MODULE, "build the batch configuration")
    self.batch_assembly = batch_assembly
    batch_config = make_batch_config(self.orch_node, batch_assembly, self.orch_args, self.pad_id)
    self.assembler = build_assembler(batch_assembly, self.algo, self.orch_args, batch_config,
                                     log=self.log if self.mode == POD else self.notes.append)
    # The loss and the log-prob request use the eos id the e2e configures the worker with.
    eos = configured_eos(self.orch_node.__name__, self.assembler, self.pad_id, self.eos_id)
    self.eos_id = int(eos.value)
    self.choices["eos_id"] = eos
    return (f"{type(self.assembler).__name__}: {self.assembler.batch_size} rows x "
            f"{self.assembler.max_packed_len} tokens; eos id {self.eos_id} ({eos.source})")

  def logps_pass(self) -> str:
    """LOGPS_PASS as the image's rl_program decides it (resolve_logps_pass): its source read
    for how it checks the sampler against the trainer, the worker class for per_token_logps."""
    program = rl_program_agreement() if self.settings.logps_pass == "auto" else ("fusable", "")
    choice = resolve_logps_pass(self.settings, self.algo_config, self.orch_args,
                                self.rollout_logps or Choice(False, ""), self.worker_class,
                                getattr(self.datatypes_module, "LogprobsRequest", None),
                                log=self.log if self.mode == POD else self.notes.append,
                                program=program)
    self.choices["logps_pass"] = choice
    return f"{'on' if choice.value else 'off'} ({choice.source})"

  def staged_boundary(self) -> str:
    # The pod and the preflight refuse alike: a bench that cannot stage as the e2e run does
    # would time every step with the boundary bubble the e2e run removed.
    checked = check_staging(resolve_stage_boundary(self.settings), WorkerCalls(self.worker_class))
    self.stage_plan = checked
    return f"{'on' if checked.resolved else 'off'} ({checked.source})"

  def called_modules(self, worker: Any = None) -> List[Any]:
    """What the run called into, for BENCH_SUMMARY "versions": the modules the stages loaded, the
    others the driver calls, and the trainer and engines inside `worker` (their classes'
    modules)."""
    called: List[Any] = [
        self.trainer_node, self.worker_module, self.datatypes_module, self.orch_node,
        self.batch_assembly
    ]
    called += [sys.modules.get(name) for name in OTHER_CALLED_MODULES]
    called += engines_of(worker) if worker is not None else []
    return [value for value in called if value is not None]

  # ---- the pod only: the warm-up payload, then the trainer ----

  def payload_setup(self, worker: Any = None) -> TunixSetup:
    """What the payloads are built from, before the trainer exists when MaxText's config gave
    the model's shape (else from the built `worker`): the warm-up payload for that routing
    shape, its rows and tokens, the ids. The worker is attached later (attach_worker)."""
    orch_args = self.orch_args
    routing_shape, experts, vocab, config = self.model_shapes(worker)
    rollout = self.rollout_logps or Choice(False, "")
    warmup, abstract = build_warmup(self.assembler, self.algo, self.algo_config, routing_shape,
                                    rollout, self.fallbacks)
    completion = getattr(warmup, "completion_ids")
    num_segments = getattr(warmup, "num_segments", None)
    max_segments = getattr(self.assembler, "max_segments_per_packed_row",
                           getattr(orch_args, "max_segments_per_packed_row", None))
    output_dir = self.output_directory()
    return TunixSetup(
        worker=worker, make_request=None, warmup=warmup, warmup_is_abstract=abstract,
        rows=int(completion.shape[0]), tokens=int(completion.shape[1]),
        num_segments=int_or_none(num_segments), max_segments_per_row=int_or_none(max_segments),
        routing_shape=routing_shape, experts=int_or_none(experts), vocab=int(vocab),
        pad_id=int(self.pad_id), eos_id=int(self.eos_id), maxtext_output_directory=output_dir,
        payload_signature=getattr(self.worker_module, "payload_signature",
                                  None), signature_mismatch=getattr(self.worker_module,
                                                                    "signature_mismatch", None),
        max_prompt_length=int_or_none(getattr(orch_args, "max_prompt_length", None)),
        max_response_length=int_or_none(getattr(orch_args, "max_response_length", None)),
        warmup_segment_counts=None if abstract else concrete_segment_counts(warmup),
        rollout_as_old=self.rollout_as_old(), choices=self.choices, fallbacks=self.fallbacks,
        temperature=float(getattr(orch_args, "temperature", None) or 1.0), config=config)

  def build_worker(self) -> Tuple[Any, Any]:
    """Builds the trainer and the worker around it as the e2e run does, with the keywords the
    image's trainer node passes: (the worker, the mesh the driver enters itself when the worker
    cannot take it as its execution context, else None)."""
    trainer_args = self.trainer_args
    made = require(self.trainer_node, "_create_trainer_factory", "build the trainer")(trainer_args)
    factory, mesh = made if isinstance(made, tuple) and len(made) == 2 else (made, None)
    worker_kwargs: Dict[str, Any] = {
        "trainer_factory": factory, "worker_id": getattr(trainer_args, "worker_id", "trainer-0")
    }
    worker_kwargs.update({name: self.choices[name].value for name in self.worker_keywords})
    params, _ = named_params(self.worker_class.__init__)
    outer_context = None
    optional: Dict[str, Any] = {}
    if mesh is not None and "execution_context" in params:
      optional["execution_context"] = mesh  # the worker enters it around every method
    elif mesh is not None:
      outer_context = mesh  # a worker that cannot take it: the driver enters it
    worker = call_checked(self.worker_class, "TrainerWorker", worker_kwargs, optional, log=self.log)
    if callable(getattr(worker, "initialize", None)):
      worker.initialize()  # builds a lazily constructed trainer; idempotent
    worker.with_loss_fn(self.algo.loss_fn(), has_aux=True)
    worker.with_gen_model_input_fn(
        self.algo.build_gen_model_input_fn(pad_id=self.pad_id, eos_id=self.eos_id))
    return worker, outer_context

  def attach_worker(self, tunix: TunixSetup, worker: Any, outer_context: Any) -> TunixSetup:
    """The built worker into `tunix`, checked against the routing shape the payloads were built
    for; then what needs it: train requests and the log-prob pass."""
    if self.model_shape is not None:
      built = self.trainer_shape(worker)
      if tunix.routing_shape is not None and built is not None and tuple(built) != tuple(
          tunix.routing_shape):
        raise TunixMissing(f"the built trainer's routing shape {tuple(built)} differs from "
                           f"MaxText's config {tuple(tunix.routing_shape)} "
                           f"({self.model_shape.source})")
      tunix.config = getattr(getattr(worker, "_trainer", None), "_config", None)
    request_class = getattr(self.datatypes_module, "TrainRequest", None)
    logps_request_class = getattr(self.datatypes_module, "LogprobsRequest", None)
    if not callable(getattr(worker, "per_token_logps", None)) and self.choices["logps_pass"].value:
      raise TunixMissing("the built TrainerWorker has no per_token_logps, which its class has")
    tunix.worker, tunix.outer_context = worker, outer_context
    tunix.make_request = train_request_maker(request_class)
    tunix.logps_request_class = logps_request_class
    return tunix

  @staticmethod
  def trainer_shape(worker: Any) -> Optional[Tuple[int, int]]:
    """The routing shape (decoder layers, top-k) the built trainer reports, or None."""
    if callable(getattr(worker, "routed_experts_shape", None)):
      shape = worker.routed_experts_shape()
      if shape is not None:
        return int(shape[0]), int(shape[1])
    config = getattr(getattr(worker, "_trainer", None), "_config", None)
    layers = getattr(config, "num_decoder_layers", None)
    topk = getattr(config, "num_experts_per_tok", None)
    return (int(layers), int(topk)) if layers and topk else None

  def rollout_as_old(self) -> bool:
    """Whether the rollout log-probs stand in for the old ones: the GRPO config's
    use_rollout_logps, which rl_program reads (the orchestrator's flag when the config has
    none)."""
    fallback = getattr(self.orch_args, "use_rollout_logps", False)
    return bool(getattr(self.algo_config, "use_rollout_logps", fallback))

  def model_shapes(self, worker: Any) -> Tuple[Optional[Tuple[int, int]], Any, Any, Any]:
    """(the routing shape the payload replays or None, experts, vocabulary, the trainer's model
    config): from MaxText's config when the "MaxText config" stage read it, else from the built
    trainer."""
    settings = self.settings
    routing = self.choices.get("routing") or resolve_routing(settings)
    self.choices["routing"] = routing
    shape = self.model_shape
    if shape is not None:
      routing_shape = shape.routing_shape if routing.value else None
      vocab = shape.vocab or self.tokenizer_vocab
      if not vocab:
        raise TunixMissing("cannot tell the vocabulary size: MaxText's config has no vocab_size "
                           "and the tokenizer did not load")
      return routing_shape, shape.experts, vocab, None
    trainer_shape = self.trainer_shape(worker)
    config = getattr(getattr(worker, "_trainer", None), "_config", None)
    if routing.value and trainer_shape is None and settings.routing == "on":
      raise SettingsError("ROUTING=on but the trainer reports no routing shape (a dense model?)")
    routing_shape = trainer_shape if routing.value else None
    experts = getattr(config, "num_experts", None)
    vocab = getattr(config, "vocab_size", None) or self.tokenizer_vocab
    if not vocab:
      raise TunixMissing("cannot tell the vocabulary size: the trainer has no config.vocab_size "
                         "and the tokenizer did not load")
    if routing_shape is not None and not experts:
      raise TunixMissing("the trainer reports a routing shape but its config has no num_experts")
    return routing_shape, experts, vocab, config


def train_request_maker(request_class: Any) -> Callable[[Any], Any]:
  """What makes a TrainRequest of a payload, as the orchestrator does for each micro-batch."""

  def make_request(payload: Any) -> Any:
    if request_class is None:
      raise TunixMissing("datatypes.TrainRequest is missing in this image's Tunix (needed to "
                         "call fwd_bwd(request=...))")
    metadata = dict(getattr(payload, "metadata", None) or {})
    return call_checked(request_class, "TrainRequest", {
        "request_id": f"train_req_{uuid.uuid4().hex[:8]}", "payload": payload, "metadata": metadata
    })

  return make_request


def check_staging(stage_plan: StagePlan, calls: WorkerCalls) -> StagePlan:
  """The staged boundary this worker can run, or a refusal before any trainer is built: `on`
  that it cannot is a SettingsError (exit 2, a bad setting); `auto` that follows an e2e run
  which stages is TunixMissing (exit 1, a fact found at run time). STAGE_BOUNDARY=off, explicit,
  never stages and is never refused."""
  if not stage_plan.resolved:
    return stage_plan
  gaps = calls.staging_gaps(stage_plan.before_update)
  if not gaps:
    return stage_plan
  missing = ", ".join(gaps)
  if stage_plan.requested == "on":
    raise SettingsError(f"STAGE_BOUNDARY=on but this image's TrainerWorker lacks {missing} "
                        "(the seed's staging change; see README)")
  raise TunixMissing(f"the e2e run stages the step boundary ({stage_plan.source}) but this "
                     f"image's TrainerWorker lacks {missing}: the bench would time every step "
                     "with the bubble the e2e run removes; STAGE_BOUNDARY=off times it unstaged "
                     "on purpose")
