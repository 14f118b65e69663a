"""The pieces of the e2e trainer's set-up, each built through Tunix's own parsers and factories as
the e2e run builds it: token ids, the GRPO algorithm with LOGP_GATES applied, the batch
configuration and assembler, and the warm-up payload; and TunixSetup, what the pod's set-up
hands to the step loop."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .calls import named_params
from .common import describe_exception, say, SettingsError, TunixMissing
from .payload import spec_field_layout
from .resolve import Choice
from .settings import Settings
from .upstream import module_calls
from .tunix import (call_checked, disable_logp_gates, Fallbacks, import_tunix, logp_gates_left_on,
                    require, source_file)


@dataclasses.dataclass
class TunixSetup:
  """What the pod's set-up built: the worker, how to call it, the warm-up payload and what the
  payload must match, and every choice made on the way (with its source)."""
  worker: Any
  make_request: Optional[Callable[[Any], Any]]
  warmup: Any
  warmup_is_abstract: bool
  rows: int
  tokens: int
  num_segments: Optional[int]
  max_segments_per_row: Optional[int]
  routing_shape: Optional[Tuple[int, int]]
  experts: Optional[int]
  vocab: int
  pad_id: int
  eos_id: int
  maxtext_output_directory: Optional[str]
  payload_signature: Optional[Callable[[Any], Any]]
  signature_mismatch: Optional[Callable[[Any, Any], str]]
  outer_context: Any = None
  max_prompt_length: Optional[int] = None
  max_response_length: Optional[int] = None
  warmup_segment_counts: Optional[List[int]] = None
  rollout_as_old: bool = False
  logps_request_class: Any = None
  temperature: float = 1.0
  choices: Dict[str, Choice] = dataclasses.field(default_factory=dict)
  fallbacks: Optional[Fallbacks] = None
  config: Any = None  # the trainer's model config (MaxText's), when it exposes one


def token_ids(orch_args: Any, trainer_args: Any,
              fallbacks: Fallbacks) -> Tuple[int, int, Optional[int]]:
  """(pad_id, eos_id, tokenizer vocabulary size) as run_deepswe_dist gets them: the tokenizer's
  pad id (its eos when it has none), and its eos id (the pad id when it has none)."""
  path = (getattr(orch_args, "tokenizer_path", "") or os.environ.get("MODEL_DIR") or
          getattr(orch_args, "model_id", None))
  try:
    transformers = importlib.import_module("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=True)
    if tokenizer.pad_token_id is None and tokenizer.eos_token is not None:
      tokenizer.pad_token = tokenizer.eos_token
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    eos_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else pad_id
    return int(pad_id), int(eos_id), len(tokenizer)
  except Exception as exc:  # pylint: disable=broad-except  # any tokenizer failure is a fallback
    fallbacks.take(
        f"the tokenizer {path!r} did not load ({describe_exception(exc)})",
        "take the pad id from tunix.utils.maxtext_utils.get_tokenizer_pad_id and use "
        "it as the eos id too")
  maxtext_utils = import_tunix("tunix.utils.maxtext_utils", "find the tokenizer's pad id")
  get_pad = require(maxtext_utils, "get_tokenizer_pad_id", "find the tokenizer's pad id")
  pad_id = int(
      get_pad(getattr(trainer_args, "model_id", None), getattr(trainer_args, "tokenizer_path", ""),
              getattr(trainer_args, "model_dir", None)))
  return pad_id, pad_id, None


# Optional arguments per Tunix function: passed when the signature names them (newer Tunix),
# left out with a line otherwise. Everything else the driver passes is required.
BATCH_CONFIG_OPTIONAL = ("trainer_dp", "trainer_expert", "segment_align_multiple",
                         "pack_pad_position", "pack_pad_align")

WARMUP_OPTIONAL = ("rollout_logprobs", "sampler_is", "sampler_is_threshold",
                   "seq_logprob_error_threshold")


def make_batch_config(orch_node: Any, batch_assembly: Any, orch_args: Any, pad_id: int) -> Any:
  """The orchestrator's BatchConfig: its _batch_config (newer run_deepswe_dist) when the
  signature is one the driver recognises, else BatchConfig from the parsed argv."""
  make_config = getattr(orch_node, "_batch_config", None)
  if callable(make_config):
    params, var_kw = named_params(make_config)
    names = list(params)
    kinds = [param.kind for param in params.values()]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(names) == 1 and kinds[0] in positional and not var_kw:
      return make_config(orch_args)
    if len(names) == 2 and names[1] == "pad_id" and kinds[0] in positional:
      return (make_config(orch_args, pad_id=pad_id)
              if kinds[1] == inspect.Parameter.KEYWORD_ONLY else make_config(orch_args, pad_id))
    raise TunixMissing(f"_batch_config{inspect.signature(make_config)} in "
                       f"{source_file(make_config)}: not a signature the driver recognises "
                       "((args), (args, pad_id) or (args, *, pad_id))")
  config_class = require(batch_assembly, "BatchConfig", "build the batch configuration")
  required: Dict[str, Any] = {"pad_id": pad_id}
  for name in ("max_prompt_length", "max_response_length", "max_seq_token_per_tpu",
               "max_segments_per_packed_row", "trainer_fsdp"):
    required[name] = getattr(orch_args, name, None)
  optional = {
      name: getattr(orch_args, name) for name in BATCH_CONFIG_OPTIONAL if hasattr(orch_args, name)
  }
  return call_checked(config_class, "BatchConfig", required, optional)


def build_algo(settings: Settings, orch_node: Any, orch_args: Any) -> Tuple[Any, Any, List[str]]:
  """The GRPO algorithm from the parsed orchestrator argv, with LOGP_GATES applied: off turns
  the gates off in the argv and in the built config, and a gate still on is an error."""
  changed = [] if settings.logp_gates else disable_logp_gates(orch_args)
  algo = require(orch_node, "_build_algo", "build the GRPO algorithm")(orch_args)
  algo_config = getattr(algo, "algo_config", None)
  if not settings.logp_gates:
    changed += disable_logp_gates(algo_config) if algo_config is not None else []
    left = logp_gates_left_on(algo_config)
    if left:
      raise TunixMissing(f"LOGP_GATES=off cannot turn off {', '.join(left)} in the built GRPO "
                         f"config ({type(algo_config).__name__} in "
                         f"{source_file(type(algo_config))})")
    say("LOGP_GATES=off: " +
        (", ".join(sorted(set(changed))) +
         " turned off" if changed else "the GRPO config has no log-prob gate set"))
  return algo, algo_config, sorted(set(changed))


def build_warmup(assembler: Any, algo: Any, algo_config: Any, routing_shape: Optional[Tuple[int,
                                                                                            int]],
                 rollout_logps: Choice, fallbacks: Fallbacks) -> Tuple[Any, bool]:
  """Tunix's trainer warm-up payload (abstract), or the equivalent layout built from the
  assembler when compile_warmup is missing (a fallback)."""
  compile_warmup = None
  try:
    compile_warmup = importlib.import_module("tunix.experimental.orchestrator.compile_warmup")
  except ImportError:
    pass
  build = getattr(compile_warmup, "build_trainer_warmup_payload", None)
  if build is None:
    fallbacks.take(
        "tunix.experimental.orchestrator.compile_warmup.build_trainer_warmup_payload "
        "is missing in this image's Tunix",
        "build the equivalent payload layout from the assembler")
    return equivalent_warmup(assembler, routing_shape, rollout_logps.value), False
  required = {"algo": algo, "assembler": assembler}
  # Without routing the shape must not be dropped silently: a None shape means no routing.
  required["routed_experts_shape"] = routing_shape
  optional = {
      "rollout_logprobs": rollout_logps.value,
      "sampler_is": getattr(algo_config, "sampler_is", None),
      "sampler_is_threshold": getattr(algo_config, "sampler_is_threshold", 2.0),
      "seq_logprob_error_threshold": getattr(algo_config, "seq_logprob_error_threshold", None),
  }
  warmup = call_checked(build, "build_trainer_warmup_payload", required, optional)
  if warmup is None:
    raise SettingsError("Tunix built no warm-up payload for this assembler (sequence packing "
                        "is required)")
  return warmup, True


def equivalent_warmup(assembler: Any, routing_shape: Optional[Tuple[int, int]],
                      rollout_logps: bool) -> Any:
  """The warm-up payload's layout for a Tunix without compile_warmup: the packed row fields at
  the assembler's [batch_size, max_packed_len], as concrete zero arrays."""
  datatypes = import_tunix("tunix.experimental.common.datatypes", "build the payload")
  payload_class = require(datatypes, "RLTrainerPayload", "build the payload")
  rows, tokens = int(assembler.batch_size), int(assembler.max_packed_len)
  max_segments = getattr(assembler, "max_segments_per_packed_row", None)
  layout = spec_field_layout(rows, tokens, *(routing_shape or (0, 0)), old_logps=rollout_logps,
                             routing=routing_shape is not None)
  fields: Dict[str, Any] = {name: np.zeros(shape, dtype) for name, (shape, dtype) in layout.items()}
  fields["num_segments"] = (max_segments if max_segments else tokens) + 1
  optional: Dict[str, Any] = {"metadata": {}}
  return call_checked(payload_class, "RLTrainerPayload", fields, optional)


def build_assembler(batch_assembly: Any, algo: Any, orch_args: Any, batch_config: Any,
                    log: Callable[[str], None] = say) -> Any:
  """The orchestrator's batch assembler (create_batch_assembler), which must pack sequences: the
  bench's rows have the packed shapes of the warm-up payload, not shapes that follow the data."""
  create = require(batch_assembly, "create_batch_assembler", "build the batch assembler")
  generations = getattr(algo, "num_generations", orch_args.num_generations)
  create_params, _ = named_params(create)
  group_name = "group_size" if "group_size" in create_params else "num_generations"
  assembler = call_checked(
      create, "create_batch_assembler", {
          group_name: generations, "mini_batch_size": getattr(
              algo, "mini_batch_size", orch_args.mini_batch_size), "train_micro_batch_size":
                  getattr(algo, "train_micro_batch_size", orch_args.train_micro_batch_size),
          "batch_config": batch_config
      }, log=log)
  packed_class = getattr(batch_assembly, "SequencePackedBatchAssembler", None)
  if packed_class is not None and not isinstance(assembler, packed_class):
    raise SettingsError("ORCH_ARGV does not select sequence packing (--max_seq_token_per_tpu): "
                        f"the assembler is {type(assembler).__name__}, whose shapes depend on "
                        "the data")
  return assembler


def configured_eos(orch_module: str, assembler: Any, pad_id: int, tokenizer_eos: int) -> Choice:
  """The eos id the e2e configures the worker's loss with. An orchestrator that leaves it to the
  engine's configure_worker gets `getattr(assembler, "eos_id", <its eos_id keyword, else the pad
  id>)`; one that configures the loss itself (run_deepswe_dist@000f523a's
  _configure_trainer_loss) passes the tokenizer's eos id."""
  path, calls = module_calls(orch_module, "configure_worker")
  if not calls:
    return Choice(
        tokenizer_eos, f"the tokenizer's eos id (its pad id when it has none): the "
        f"orchestrator configures the loss itself ({path} calls no configure_worker)")
  passes_eos = any("eos_id" in keywords for keywords in calls)
  fallback, said = ((tokenizer_eos,
                     "the tokenizer's eos id the orchestrator passes") if passes_eos else
                    (pad_id, "the pad id: the orchestrator passes no eos_id"))
  if getattr(assembler, "eos_id", None) is not None:
    return Choice(int(assembler.eos_id), f"the assembler's eos_id, as configure_worker takes it "
                  f"({path})")
  return Choice(
      fallback, f"{said}, as configure_worker takes it when the assembler has no "
      f"eos_id ({path})")
