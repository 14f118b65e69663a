"""What the image's own Tunix sources say, read with `ast` without running them: the keywords the
trainer node's `main` passes to `TrainerWorker(...)`, the orchestrator's `GenerationArgs(...)`
(whether it asks its rollouts for log-probs) and `configure_worker(...)` calls, and how
rl_program checks the sampler against the trainer. The driver passes what the e2e program
passes, not what a constructor happens to accept; a source it cannot read is TunixMissing."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
from typing import Any, Dict, List, Optional, Tuple

from .calls import named_params
from .common import TunixMissing
from .resolve import Choice
from .tunix import source_file

# The argument names the e2e code reads its parsed argv through (`args.compute_logps_chunk_size`).
ARGS_NAMES = ("args", "flags", "parsed")


@dataclasses.dataclass(frozen=True)
class Keyword:
  """One keyword of a call in the image's source: a constant, or an attribute of the parsed argv
  (`args.<attribute>`), and the source text it was read from."""
  name: str
  constant: Any = None
  attribute: Optional[str] = None
  text: str = ""
  is_constant: bool = False

  @property
  def readable(self) -> bool:
    return self.is_constant or self.attribute is not None

  def value(self, args: Any) -> Any:
    """The value the e2e passes, given its parsed argv."""
    if not self.readable:
      raise TunixMissing(f"the image passes {self.name}={self.text}, which the driver cannot "
                         "evaluate (neither a constant nor an attribute of the parsed argv)")
    if self.attribute is None:
      return self.constant
    if not hasattr(args, self.attribute):
      raise TunixMissing(f"the image passes {self.name}={self.text} but its parsed argv has no "
                         f"{self.attribute!r}")
    return getattr(args, self.attribute)


def module_source(module_name: str) -> Tuple[str, str]:
  """(the file, the text) of a module's source, found as importlib finds it, without importing
  it; TunixMissing when it has none."""
  try:
    spec = importlib.util.find_spec(module_name)
  except (ImportError, ValueError) as exc:
    raise TunixMissing(f"cannot find {module_name}'s source: {exc}") from None
  origin = getattr(spec, "origin", None) if spec is not None else None
  if not origin or not origin.endswith(".py"):
    raise TunixMissing(f"cannot read {module_name}'s source (found {origin or 'nothing'}): the "
                       "driver reads the keywords the e2e passes from it")
  try:
    with open(origin, encoding="utf-8") as handle:
      return origin, handle.read()
  except OSError as exc:
    raise TunixMissing(f"cannot read {origin}: {exc.strerror}") from None


def _callee_name(node: ast.Call) -> str:
  func = node.func
  if isinstance(func, ast.Attribute):
    return func.attr
  if isinstance(func, ast.Name):
    return func.id
  return ""


def _keyword(node: ast.keyword) -> Keyword:
  name = str(node.arg)
  value = node.value
  text = ast.unparse(value)
  if isinstance(value, ast.Constant):
    return Keyword(name, constant=value.value, text=text, is_constant=True)
  if (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and
      value.value.id in ARGS_NAMES):
    return Keyword(name, attribute=value.attr, text=text)
  return Keyword(name, text=text)


def call_keywords(module_name: str, function: str, callee: str) -> Tuple[str, Dict[str, Keyword]]:
  """(the file, the keywords) of the one `callee(...)` call inside `function` of the module's
  source. TunixMissing when the source cannot be read or parsed, the function or the call is
  not there, or there is more than one such call (which one runs would be a guess)."""
  path, text = module_source(module_name)
  try:
    tree = ast.parse(text, filename=path)
  except SyntaxError as exc:
    raise TunixMissing(f"cannot parse {path}: {exc.msg} (line {exc.lineno})") from None
  functions = [
      node for node in tree.body
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function
  ]
  if len(functions) != 1:
    raise TunixMissing(f"{path} has no top-level {function}() to read the {callee}(...) call from")
  calls: List[ast.Call] = [
      node for node in ast.walk(functions[0])
      if isinstance(node, ast.Call) and _callee_name(node) == callee
  ]
  if len(calls) != 1:
    raise TunixMissing(f"{path}: {function}() makes {len(calls)} {callee}(...) calls; the driver "
                       "reads the one the e2e makes (expected exactly one)")
  if any(node.arg is None for node in calls[0].keywords):
    raise TunixMissing(f"{path}:{calls[0].lineno}: {callee}(...) takes **kwargs; the driver "
                       "cannot tell which keywords it passes")
  return path, {str(node.arg): _keyword(node) for node in calls[0].keywords}


def module_calls(module_name: str, callee: str) -> Tuple[str, List[Dict[str, Keyword]]]:
  """(the file, the keywords of every `callee(...)` call anywhere in the module's source)."""
  path, text = module_source(module_name)
  try:
    tree = ast.parse(text, filename=path)
  except SyntaxError as exc:
    raise TunixMissing(f"cannot parse {path}: {exc.msg} (line {exc.lineno})") from None
  return path, [{str(node.arg): _keyword(node)
                 for node in call.keywords
                 if node.arg is not None}
                for call in ast.walk(tree)
                if isinstance(call, ast.Call) and _callee_name(call) == callee]


# The log-prob keywords of TrainerWorker(...), each read from the image's trainer node.
LOGPS_KEYWORDS = ("logps_chunk_size", "logps_micro_batch_size")


def trainer_worker_keywords(module_name: str,
                            function: str = "main") -> Tuple[str, Dict[str, Keyword]]:
  """The keywords the trainer node's process function (`main`) passes to TrainerWorker(...)."""
  return call_keywords(module_name, function, "TrainerWorker")


def logps_keywords(process_main: Optional[str], module_name: str, worker_class: Any,
                   trainer_args: Any) -> Tuple[Dict[str, Keyword], Dict[str, Choice], str]:
  """The log-prob keywords (LOGPS_KEYWORDS) the trainer node's process function passes to
  TrainerWorker(...): (those it passes, a Choice per keyword with its value on the parsed argv
  or None when not passed, one line). A keyword this TrainerWorker does not take is
  TunixMissing: the image's own call would fail."""
  function = process_main.rsplit(".", 1)[1] if process_main and "." in process_main else "main"
  path, keywords = trainer_worker_keywords(module_name, function)
  params, var_kw = named_params(worker_class.__init__)
  passed: Dict[str, Keyword] = {}
  choices: Dict[str, Choice] = {}
  found = []
  for name in LOGPS_KEYWORDS:
    keyword = keywords.get(name)
    if keyword is None:
      choices[name] = Choice(
          None, f"not passed: the image's {path} {function}() calls "
          f"TrainerWorker(...) without {name}")
      continue
    value = keyword.value(trainer_args)
    if name not in params and not var_kw:
      raise TunixMissing(f"the image's {path} passes TrainerWorker({name}={keyword.text}) but "
                         f"this TrainerWorker ({source_file(worker_class)}) takes no {name}")
    passed[name] = keyword
    choices[name] = Choice(
        value, f"TrainerWorker({name}={keyword.text}) as the image's {path} "
        f"{function}() passes it")
    found.append(f"{name}={value!r}")
  return passed, choices, (", ".join(found) or "no log-prob keyword") + f" (read from {path})"


def rollout_logprobs_asked(module_name: str, args: Any) -> Tuple[Optional[bool], str]:
  """Whether the orchestrator asks its rollouts for log-probs, read from its one
  GenerationArgs(...) call: (its return_logprobs=, evaluated on the parsed argv, where it was
  read), (False, ...) when that call passes none, (None, why) when the module makes no such
  call or several (the caller then judges by the argv)."""
  path, calls = module_calls(module_name, "GenerationArgs")
  if len(calls) != 1:
    return None, f"{path} makes {len(calls)} GenerationArgs(...) calls"
  keyword = calls[0].get("return_logprobs")
  if keyword is None:
    return False, f"{path}: GenerationArgs(...) without return_logprobs"
  return bool(keyword.value(args)), f"{path}: GenerationArgs(return_logprobs={keyword.text})"


RL_PROGRAM_MODULE = "tunix.experimental.orchestrator.rl_program"


def rl_program_agreement(module_name: str = RL_PROGRAM_MODULE) -> Tuple[str, str]:
  """(how the image's rl_program checks the sampler against the trainer, where that was read):
  "fusable" when it sets can_fuse_agreement_in_loss before calling
  _apply_sampler_trainer_agreement (the pass is skipped when the loss can do it), "always" when
  it calls _apply_sampler_trainer_agreement without that condition, "never" when it makes no
  such call (no actor log-prob pass). TunixMissing when the source cannot be read."""
  path, text = module_source(module_name)
  try:
    tree = ast.parse(text, filename=path)
  except SyntaxError as exc:
    raise TunixMissing(f"cannot parse {path}: {exc.msg} (line {exc.lineno})") from None
  assigned = {
      target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
      for target in node.targets if isinstance(target, ast.Name)
  }
  called = {_callee_name(node) for node in ast.walk(tree) if isinstance(node, ast.Call)}
  if "_apply_sampler_trainer_agreement" not in called:
    return "never", path
  return ("fusable" if "can_fuse_agreement_in_loss" in assigned else "always"), path
