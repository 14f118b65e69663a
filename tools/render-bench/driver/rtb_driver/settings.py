"""The driver's settings, read from the environment through the settings table (settings.tsv).

Every field of Settings is a row of the table (its name in lower case), and so are its default and
the words a bad value is refused with; this module only says how a parsed value is stored.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .common import one_line, SettingsError
from .table import rows_by_name, SettingRow, setting_rows, table_default
from .values import BLANKS


@dataclasses.dataclass
class Settings:
  """The driver's settings, parsed from the environment (None means "resolved at run time")."""
  trainer_argv: List[str]
  orch_argv: List[str]
  steps: int = table_default("STEPS")
  micro_steps: int = table_default("MICRO_STEPS")
  seed: int = table_default("SEED")
  routing_targets: Optional[List[float]] = None
  routing_scale: float = table_default("ROUTING_SCALE")
  logp_gates: bool = table_default("LOGP_GATES") == "on"
  advantages: str = table_default("ADVANTAGES")
  pad_position: Optional[str] = None  # None: the e2e orchestrator's, else end
  pad_align: Optional[int] = None  # None: the e2e orchestrator's, else 4096
  real_len: Optional[int] = None
  segments: Optional[int] = None
  final_rows: Optional[int] = None
  profile_window: Optional[Tuple[int, int]] = None
  profile_dir: Optional[str] = None
  dump_hlo: bool = table_default("DUMP_HLO")
  bench_name: str = "bench"
  # A run of a same-pod A/B (render-bench --arm): its arm and its place in the pod's run order.
  bench_arm: Optional[str] = None
  bench_run: Optional[int] = None
  stage_boundary: str = table_default("STAGE_BOUNDARY")
  routing: str = table_default("ROUTING")
  logps_pass: str = table_default("LOGPS_PASS")
  allow_fallbacks: bool = table_default("ALLOW_FALLBACKS")
  # The orchestrator's environment that auto settings follow (ORCH_* copies by render-bench),
  # kept as written: it is logged as the source of what it decided.
  orch_pack_pad_position: Optional[str] = None
  orch_pack_pad_align: Optional[str] = None
  orch_return_routed_experts: Optional[str] = None
  orch_pipeline_step_boundary: Optional[str] = None
  orch_stage_next_microbatch: Optional[str] = None
  # The rollout JobSet's --return_routed_experts (or its environment), copied by render-bench.
  rollout_return_routed_experts: Optional[str] = None
  # `--preflight --numerics`: the miniature model's MaxText flags (None: numerics.MINIATURE_FLAGS).
  numerics_maxtext_flags: Optional[str] = None

  def arm_fields(self) -> Dict[str, Any]:
    """`arm` and `run` of a same-pod A/B's run, for BENCH_ARM, BENCH_STEP and BENCH_SUMMARY;
    empty for a bench of one arm."""
    if self.bench_arm is None and self.bench_run is None:
      return {}
    return {"arm": self.bench_arm, "run": self.bench_run}

  def knobs(self) -> Dict[str, Any]:
    """The settings as parsed, for BENCH_SUMMARY."""
    return {
        "steps": self.steps,
        "micro_steps": self.micro_steps,
        "seed": self.seed,
        "routing_targets": self.routing_targets,
        "routing_scale": self.routing_scale,
        "logp_gates": "on" if self.logp_gates else "off",
        "advantages": self.advantages,
        "pad_position": self.pad_position,
        "pad_align": self.pad_align,
        "real_len": self.real_len,
        "segments": self.segments,
        "final_rows": self.final_rows,
        "profile_window": (None if self.profile_window is None else
                           f"{self.profile_window[0]}:{self.profile_window[1]}"),
        "profile_dir": self.profile_dir,
        "dump_hlo": self.dump_hlo,
        "stage_boundary": self.stage_boundary,
        "routing": self.routing,
        "logps_pass": self.logps_pass,
        "allow_fallbacks": self.allow_fallbacks,
    }


# Settings stored other than as their kind parses them: LOGP_GATES (on|off) is a switch.
STORED_AS = {"LOGP_GATES": lambda word: word == "on"}
# Read before the others, each with its own rule.
REQUIRED = {"TRAINER_ARGV": "trainer", "ORCH_ARGV": "orchestrator"}
NAME_SETTING = "BENCH_NAME"  # default: JOBSET_NAME, else "bench"


def _given(env: Mapping[str, str], name: str) -> Optional[str]:
  """The value of `name`, or None when it is unset or empty (empty means the default)."""
  value = env.get(name)
  if value is None or value.strip(BLANKS) == "":
    return None
  return value


def _store(row: SettingRow, text: str) -> Any:
  if row.keeps_text:
    row.parse(text)  # validated now, read where it is resolved
    return text.strip()
  value = row.parse(text)
  convert = STORED_AS.get(row.name)
  return convert(value) if convert else value


def parse_settings(env: Mapping[str, str]) -> Settings:
  """Reads and validates the environment contract; raises SettingsError on the first bad value,
  in the table's order."""
  rows = setting_rows()
  for name, role in REQUIRED.items():
    if _given(env, name) is None:
      raise SettingsError(f"{name} is not set (the {role} argv as a shell-quoted string)")
  by_name = rows_by_name()
  settings = Settings(trainer_argv=by_name["TRAINER_ARGV"].parse(env["TRAINER_ARGV"]),
                      orch_argv=by_name["ORCH_ARGV"].parse(env["ORCH_ARGV"]))
  for row in rows:
    if row.name in REQUIRED or row.name == NAME_SETTING:
      continue
    text = _given(env, row.name)
    if text is not None:
      setattr(settings, row.field, _store(row, text))
  settings.bench_name = one_line(_given(env, NAME_SETTING) or _given(env, "JOBSET_NAME") or "bench")
  window = settings.profile_window
  if window and sum(window) > settings.steps:
    # render-bench refuses --profile-window in the same words (driver_settings.cc).
    raise SettingsError(f"PROFILE_WINDOW={env['PROFILE_WINDOW']!r}: ends after the last timed "
                        f"step (STEPS={settings.steps}: steps 0..{settings.steps - 1})")
  return settings


def _as_json(value: Any) -> Any:
  if isinstance(value, tuple) and len(value) == 2:
    return f"{value[0]}:{value[1]}"  # a window, as it was written
  return value


def print_settings(env: Mapping[str, str]) -> str:
  """`--print-settings`: every table setting that is set, as the driver reads it, as one JSON
  object ({NAME: value}); a bad one raises SettingsError as the pod run would."""
  parse_settings(env)  # the pod run's checks, in its order
  out: Dict[str, Any] = {}
  for row in setting_rows():
    text = _given(env, row.name)
    if text is not None:
      out[row.name] = _as_json(row.parse(text))
  return json.dumps(out, separators=(",", ":"))
