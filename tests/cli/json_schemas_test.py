"""schemas/ holds one JSON Schema per --json document the tools print (issue 27, item 4). This test
runs every (tool, mode) that prints one on fixtures and validates the output against its file,
checks that every file is some mode's schema and uses only keywords json_schema.py checks, and
compares each file with its tool's doc: every top-level property is named in docs/<tool>.md, and
every field the doc lists in backticks after "schema `<name>`" is a property of the schema."""

import json
import os
import re
import tempfile
import unittest
from typing import Callable, NamedTuple, Sequence

import json_schema
from aot_check_test import make_stub
from cli_common import LAUNCH_DRYRUN as FIXTURE
from cli_common import LAUNCH_DRYRUN_V5P as V5P
from cli_common import BIN, TESTDATA, run_tool

SOURCE_ROOT = os.path.dirname(json_schema.SCHEMA_DIR)
DOCS = os.path.join(SOURCE_ROOT, "docs")
LOGS = os.path.join(TESTDATA, "bench_logs")
HLO = os.path.join(TESTDATA, "hlo")
XPK = os.path.join(TESTDATA, "diff_renders")
# check-payload's small micro-batch (check_payload_test.py's SMALL).
SMALL = [
    "--rows", "3", "--tokens", "1024", "--layers", "4", "--topk", "2", "--experts", "16", "--vocab",
    "1000", "--real-len", "900", "--segments", "3", "--seed", "5", "--routing-targets", "1,1.5,3,8"
]
# A real Tunix trainer log without step times, timed by its timestamps and never compared with
# the driver's device-timed steps (issue 28; testdata/SOURCES.md).
PEFT = "tunix_peft_dpo_qwen3-0.6b_tpu-v5p-8.log"
TILES = ["--cp", "2", "--block-q", "128", "--block-kv", "256", "--pad-align", "64"]
# Two arms of a same-pod A/B (aot-check --arm).
ARMS = ["--arm", "base", "--arm", "blk:--maxtext-flag=sa_block_q=2048"]
# The documents whose `arms` items are another document's fields with the arm's name: (schema
# file, the other document's schema file).
ARMS_OF = [("rtb.aot-check.arms.1.json", "rtb.aot-check.1.json"),
           ("rtb.aot-check.arms-run.1.json", "rtb.aot-summarize.1.json")]

# Real JobSets of testdata/diff_renders/ whose documents diff-renders pairs by being the only one
# (two names of one experiment; a render and the live object kubectl printed).
REAL_RENDER_PAIRS = [
    ("jobset_wap_high-priority-jobset_at_c6b198a6.yaml",
     "jobset_wap_low-priority-jobset_at_c6b198a6.yaml"),
    ("kueue_sample-jobset_at_3d8443b6.yaml", "kueue_issue7649_kubectl_get_jobset.yaml"),
    ("kueue_issue8101_render_reconstructed.yaml", "kueue_issue8101_kubectl_get_jobset.yaml"),
]

# The real jax.profiler capture (testdata/profile) and a cut copy of its device plane
# (fuzz/seeds/profile; testdata/SOURCES.md), for profile-report.
PROFILE = os.path.join(TESTDATA, "profile", "jax0.11.2_h200_bench_driver_profile_window.xplane.pb")
PROFILE_CUT = os.path.join(SOURCE_ROOT, "fuzz", "seeds", "profile",
                           "h200_device_plane_cut_40_events_per_line.xplane.pb")


def data(*parts):
    return os.path.join(TESTDATA, *parts)


def logs(*names):
    """Bench and numerics logs of testdata/bench_logs, by name."""
    return [os.path.join(LOGS, name) for name in names]


def maxtext(*names):
    """Real MaxText logs of testdata/maxtext_steplogs, by the name after `maxtext_`."""
    return [data("maxtext_steplogs", f"maxtext_{name}.log") for name in names]


def dumps(*names):
    """Scheduled-HLO dumps of testdata/hlo, by name."""
    return [os.path.join(HLO, name) for name in names]


class Run(NamedTuple):
    """One run of a tool's --json mode: the arguments (from a scratch folder) and the exit code."""
    args: Callable[[str], Sequence[str]]
    rc: int
    env: Callable[[str], dict] = lambda tmp: {}


def real_render_pair(a: str, b: str) -> Run:
    """diff-renders --json of two files of testdata/diff_renders/, which differ (exit 1)."""
    return Run(lambda tmp: ["--json", os.path.join(XPK, a), os.path.join(XPK, b)], 1)


class Mode(NamedTuple):
    tool: str
    mode: str
    schema: str  # the file in schemas/
    runs: Sequence[Run]


def render(tmp, name, *args):
    """A bench render of the v7x fixture by the built render-bench, in tmp."""
    path = os.path.join(tmp, name)
    rc, out, err = run_tool(os.path.join(BIN, "render-bench"),
                            [FIXTURE, "--name", "abtest-bench", *args, "-o", path])
    assert rc == 0, out + err
    return path


def payload(tmp):
    """A small .npz by the built check-payload, in tmp."""
    path = os.path.join(tmp, "small.npz")
    if not os.path.exists(path):
        rc, out, err = run_tool(os.path.join(BIN, "check-payload"), ["build", *SMALL, "-o", path])
        assert rc == 0, out + err
    return path


def stub_path(tmp):
    """PATH with aot-check_test's python3 stub first (it prints STUB_LOG as the compile's log)."""
    make_stub(os.path.join(tmp, "bin"))
    return {
        "PATH": os.path.join(tmp, "bin") + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
        "STUB_LOG": data("memlog_engine_compile_b.log")
    }


def numerics(reference_a, reference_b, variant):
    """The arguments of a `bench-report --numerics --json` run on three logs."""
    return lambda tmp: ["--numerics", *logs(reference_a, reference_b, variant), "--json"]


# Every --json document a tool can print: (tool, mode) -> schema file, and runs that print it.
MODES = [
    Mode("render-bench", "--print-knobs", "rtb.render-bench.knobs.1.json", [
        Run(lambda tmp: ["--print-knobs"], 0),
    ]),
    Mode("aot-check", "--print", "rtb.aot-check.1.json", [
        Run(lambda tmp: [FIXTURE, "--json"], 0),
        Run(lambda tmp: [V5P, "--json"], 0),
    ]),
    Mode("aot-check", "--run", "rtb.aot-summarize.1.json", [
        Run(lambda tmp: [FIXTURE, "--run", "--log",
                         os.path.join(tmp, "b.log"), "--json"], 1, stub_path),
    ]),
    Mode("aot-check", "--print --arm", "rtb.aot-check.arms.1.json", [
        Run(lambda tmp: [FIXTURE, *ARMS, "--json"], 0),
    ]),
    Mode("aot-check", "--run --arm", "rtb.aot-check.arms-run.1.json", [
        Run(lambda tmp: [FIXTURE, *ARMS, "--run", "--log",
                         os.path.join(tmp, "arms.log"), "--json"], 1, stub_path),
    ]),
    Mode("aot-summarize", "summary", "rtb.aot-summarize.1.json", [
        Run(lambda tmp: [data("memlog_engine_compile_a.log"), "--json"], 0),
        Run(lambda tmp: [data("memlog_train_compile.log"), "--json"], 0),
        Run(lambda tmp: [data("memlog_live_tpu_usage.log"), "--json"], 0),
        Run(lambda tmp: [data("memlog_oom_train_compile_used_of.log"), "--json"], 1),
        Run(lambda tmp: [data("memlog_oom_runtime_allocate_mib.log"), "--json"], 1),
        Run(lambda tmp: [data("memlog_oom_with_truncated_dict.log"), "--json"], 1),
        Run(
            lambda tmp:
            ["--json",
             data("memlog_engine_compile_a.log"),
             data("memlog_engine_compile_b.log")], 1),
        Run(lambda tmp: [data("memlog_bad_empty.log"), "--json"], 2),
        Run(lambda tmp: [data("memlog_oom_runtime_reserve_e0101_wrapped.log"), "--json"], 1),
        Run(
            lambda tmp: [
                data("memlog_maxtext_gemma4_baseline_L4440-4729_measured_fits_estimate_not.log"),
                "--json"
            ], 0),
    ]),
    Mode("bench-report", "runs", "rtb.bench-report.1.json", [
        Run(lambda tmp: [*logs("bench_ctl.log"), "--json"], 0),
        Run(lambda tmp: [*logs("bench_ctl.log", "bench_same.log"), "--json"], 0),
        Run(lambda tmp: [*logs("bench_ctl.log", "bench_slow.log", "bench_fast.log"), "--json"], 0),
        Run(lambda tmp: [*logs("bench_drops_counted.log"), "--json"], 0),
        Run(lambda tmp: [*logs("bench_profiled.log"), "--json"], 0),
        Run(lambda tmp: [*logs("bench_partial.log"), "--json"], 0),
        Run(lambda tmp: [*logs("bench_device_ctl.log"), "--json"], 0),
        Run(lambda tmp: [*logs("bench_dispatch_var.log"), "--json"], 0),
        Run(
            lambda tmp: [
                *logs("bench_setup_staged.log", "bench_setup_unstaged.log",
                      "bench_setup_checkpoint.log", "bench_setup_replayed.log"), "--json"
            ], 0),
        Run(
            lambda tmp:
            [*logs("bench_ctl.log", "bench_slow.log"), "--fail-if-slower", "0.1", "--json"], 1),
        Run(lambda tmp: [*logs("bench_drops_counted.log"), "--require-no-drops", "--json"], 1),
        Run(
            lambda tmp: [
                *logs("bench_setup_staged.log", "bench_setup_unstaged.log"), "--require-same-setup",
                "--json"
            ], 1),
        Run(lambda tmp: [data("maxtext_steplogs", PEFT), "--json"], 0),
        Run(lambda tmp: [*logs("bench_device_ctl.log"),
                         data("maxtext_steplogs", PEFT), "--json"], 0),
        Run(lambda tmp: [*maxtext("gemma4_before_full", "gemma4_after_full"), "--json"], 0),
    ]),
    Mode("bench-report", "--arms", "rtb.bench-report.arms.1.json", [
        Run(lambda tmp: ["--arms", *logs("pod_arms_abba.log"), "--json"], 0),
        Run(lambda tmp: ["--arms", *logs("pod_arms_abba.log", "pod_arms_abba.log"), "--json"], 0),
    ]),
    Mode("bench-report", "--numerics", "rtb.bench-report.1.json", [
        Run(numerics("numerics_ref1.log", "numerics_ref2.log", "numerics_variant.log"), 0),
        Run(numerics("numerics_ref1.log", "numerics_ref2.log", "numerics_bad.log"), 1),
        Run(numerics("e2e_orchestrator.log", "e2e_maxtext_no_ready.log", "e2e_orchestrator.log"),
            0),
    ]),
    Mode("check-payload", "build", "check-payload.build.json", [
        Run(lambda tmp: ["build", *SMALL, "--json", "--ep", "2"], 0),
        Run(lambda tmp: ["build", *SMALL, "--json", "-o",
                         os.path.join(tmp, "b.npz")], 0),
    ]),
    Mode("check-payload", "verify", "check-payload.verify.json", [
        Run(lambda tmp: ["verify", payload(tmp), "--json"], 0),
        Run(lambda tmp: ["verify", payload(tmp), "--json", "--ep", "2"], 0),
    ]),
    Mode("check-payload", "measure", "check-payload.measure.json", [
        Run(lambda tmp: ["measure", payload(tmp), "--ep", "2", "--json"], 0),
        Run(
            lambda tmp:
            ["measure",
             payload(tmp), "--ep", "2", "-o",
             os.path.join(tmp, "t.txt"), "--json"], 0),
    ]),
    Mode("check-payload", "tiles", "check-payload.tiles.json", [
        Run(lambda tmp: ["tiles", *TILES, "--rows", "2", "--tokens", "1024", "--json"], 0),
        Run(lambda tmp: ["tiles", payload(tmp), *TILES, "--json"], 0),
    ]),
    Mode("diff-configs", "diff", "rtb.diff-configs.1.json", [
        Run(
            lambda tmp: [
                "--json",
                data("configlog_maxtext_gpu_a3-h100x8_gpt3-22b_train.log"),
                data("configlog_maxtext_gpu_a3-h100x8_llama2-7b_prepgo_train.log")
            ], 1),
        Run(lambda tmp: ["--json", FIXTURE, data("configlog_trainer_node.log")], 1),
        Run(
            lambda tmp: [
                "--json",
                data("configlog_maxtext_grpo_demo_0ac2a42e_cell27_64rules.log"),
                data("configlog_maxtext_grpo_demo_1a9d434c_cell27_63rules.log")
            ], 1),
        Run(lambda tmp: ["--json", FIXTURE, FIXTURE], 0),
    ]),
    Mode("diff-configs", "--list-dumps", "rtb.diff-configs.dumps.1.json", [
        Run(lambda tmp: ["--list-dumps", "--json",
                         data("configlog_restart.log"), FIXTURE], 0),
    ]),
    Mode("diff-renders", "diff", "rtb.diff-renders.1.json", [
        Run(lambda tmp: ["--json", FIXTURE, V5P], 1),
        Run(lambda tmp: ["--json", FIXTURE, FIXTURE], 0),
        *[real_render_pair(a, b) for a, b in REAL_RENDER_PAIRS],
        Run(lambda tmp: ["--json", "--by-role", FIXTURE,
                         render(tmp, "r.yaml")], 1),
        Run(
            lambda tmp: [
                "--json",
                os.path.join(XPK, "xpk_pathways_v5p-8_at_254bbe3f.yaml"),
                os.path.join(XPK, "xpk_pathways_v5p-8_at_254bbe3f_kubectl_get.yaml")
            ], 0),
    ]),
    Mode("diff-renders", "--expect-bench", "rtb.diff-renders.1.json", [
        Run(
            lambda tmp: [
                "--json", "--expect-bench", FIXTURE,
                render(tmp, "e.yaml", "--trainer-slice", "tpu7x:4x4x4")
            ], 0),
    ]),
    Mode("hlo-overlap", "one dump", "rtb.hlo-overlap.1.json", [
        Run(lambda tmp: [*dumps("handwritten_while_trip_counts.hlo.txt"), "--json"], 0),
        Run(lambda tmp: [*dumps("handwritten_async_all_to_all.hlo.txt"), "--json"], 0),
        Run(lambda tmp: [*dumps("handwritten_unpaired.hlo.txt"), "--json"], 0),
        Run(
            lambda tmp: [
                *dumps("maxtext_ref_llama3_8b_tpu-v6e-4_8fcc9e13.hlo.txt"), "--allow-truncated",
                "--json"
            ], 0),
    ]),
    Mode("hlo-overlap", "two dumps", "rtb.hlo-overlap-compare.1.json", [
        Run(
            lambda tmp: [
                *dumps("latency_hiding_scheduler__AllGatherAsyncBalance.hlo.txt",
                       "handwritten_async_all_to_all.hlo.txt"), "--json"
            ], 1),
        Run(
            lambda tmp: [
                *dumps("handwritten_async_all_to_all.hlo.txt",
                       "handwritten_async_all_to_all.hlo.txt"), "--json"
            ], 0),
    ]),
    Mode("profile-report", "one capture", "rtb.profile-report.2.json", [
        Run(lambda tmp: [PROFILE, "--json"], 0),
        Run(lambda tmp: [PROFILE_CUT, "--json", "--top", "2"], 0),
        Run(
            lambda tmp: [
                data("profile", "synthetic_overlap_tpu.xplane.pb"), "--json", "--hlo", *dumps(
                    "latency_hiding_scheduler__ResourceLimitWithinAnnotationGroup.hlo.txt")
            ], 0),
    ]),
    Mode("profile-report", "two captures", "rtb.profile-report-compare.1.json", [
        Run(lambda tmp: [PROFILE, PROFILE, "--json"], 0),
        Run(lambda tmp: [PROFILE, PROFILE_CUT, "--json"], 1),
    ]),
]


def outputs(mode, tmp):
    """The --json documents of `mode`'s runs, with their command lines."""
    for run in mode.runs:
        args = list(run.args(tmp))
        rc, out, err = run_tool(os.path.join(BIN, mode.tool), args, env=run.env(tmp))
        command = " ".join([mode.tool] + args)
        if rc != run.rc:
            raise AssertionError(f"{command}: exit {rc}, not {run.rc}: {out}{err}")
        yield command, json.loads(out)


def schema_files():
    return sorted(f for f in os.listdir(json_schema.SCHEMA_DIR) if f.endswith(".json"))


# The doc of each tool (aot-summarize is documented in aot-check's).
DOC = {"aot-summarize": "aot-check.md"}


def doc_of(schema_file):
    """The tools' docs that describe `schema_file`: those of every tool whose mode prints it."""
    tools = sorted({m.tool for m in MODES if m.schema == schema_file})
    return sorted({os.path.join(DOCS, DOC.get(tool, tool + ".md")) for tool in tools})


def keywords(schema, where="$"):
    """(where, keyword) of every keyword in `schema` and the schemas inside it."""
    for key, value in schema.items():
        yield where, key
        if key in ("properties", "$defs"):
            for name, sub in value.items():
                yield from keywords(sub, f"{where}.{key}.{name}")
        elif key == "items":
            yield from keywords(value, f"{where}.items")


def doc_fields(text, name):
    """The fields a doc lists in backticks after "schema `name`": from there to the end of the
    paragraph, every `word` that is a plain name (a JSON example's "keys" are not listed)."""
    fields = []
    for match in re.finditer(r"schema `" + re.escape(name) + "`", text):
        paragraph = text[match.end():].split("\n\n")[0]
        fields += re.findall(r"`([a-z_][a-z0-9_]*)`", paragraph)
    return fields


def names_in(schema):
    """Every property name and string enum value in `schema`, at any depth (a doc lists nested
    fields, and the values of some)."""
    names = {v for v in schema.get("enum", []) if isinstance(v, str)}
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            for name, sub in value.items():
                if key == "properties":
                    names.add(name)
                names |= names_in(sub)
        elif key == "items":
            names |= names_in(value)
    return names


class JsonSchemasTest(unittest.TestCase):

    def test_outputs_fit_their_schema(self):
        with tempfile.TemporaryDirectory() as tmp:
            for mode in MODES:
                schema = json_schema.load(mode.schema)
                for command, doc in outputs(mode, tmp):
                    with self.subTest(command=command):
                        try:
                            json_schema.validate(schema, doc)
                        except AssertionError as e:
                            raise AssertionError(f"schemas/{mode.schema}: {command}: {e}") from None
                        if "schema" in doc:
                            self.assertEqual(doc["schema"], schema["$id"],
                                             f"schemas/{mode.schema}: {command}")

    def test_every_schema_file_is_used(self):
        used = {m.schema for m in MODES}
        for name in schema_files():
            self.assertIn(name, used, f"schemas/{name}: no (tool, mode) in MODES prints it")
        for name in used:
            self.assertIn(name, schema_files(), f"MODES names schemas/{name}, which is missing")

    def test_every_json_flag_has_a_mode(self):
        # Each tool whose sources declare --json (add_json_flag) has a mode here; a check-payload
        # subcommand is a tool file of its own.
        tools = os.path.join(SOURCE_ROOT, "tools")
        declared = set()
        for tool in os.listdir(tools):
            folder = os.path.join(tools, tool)
            if not os.path.isdir(folder) or tool == "common":
                continue
            for name in os.listdir(folder):
                if not name.endswith(".cc"):
                    continue
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    if "add_json_flag(" in f.read():
                        declared.add(tool if tool != "check-payload" else name[:-3])
        modes = {m.tool if m.tool != "check-payload" else m.mode for m in MODES}
        self.assertEqual(declared - modes, set(), "a --json with no mode in MODES")

    def test_schema_files_are_what_the_checker_checks(self):
        for name in schema_files():
            schema = json_schema.load(name)
            self.assertEqual(schema.get("$schema"), "https://json-schema.org/draft/2020-12/schema",
                             f"schemas/{name}: $schema")
            self.assertIn("$id", schema, f"schemas/{name}")
            stem = name[:-len(".json")]
            if schema["$id"].startswith("rtb."):  # the name the document's "schema" field holds
                self.assertEqual(schema["$id"].replace("/", "."), stem, f"schemas/{name}: $id")
                self.assertEqual(schema["properties"]["schema"], {"enum": [schema["$id"]]},
                                 f"schemas/{name}: schema")
            else:
                self.assertEqual(schema["$id"], name, f"schemas/{name}: $id")
            for where, key in keywords(schema):
                self.assertIn(key, json_schema.KEYWORDS,
                              f"schemas/{name}: {where}: {key} is not checked by json_schema.py")

    def test_arms_items_are_the_fields_of_one_document(self):
        # Each item holds `arm` and every field of the one-render document but `schema`, each
        # referring to that document's own definition, so that the two cannot drift apart.
        for arms_file, single_file in ARMS_OF:
            single = json_schema.load(single_file)
            item = json_schema.load(arms_file)["properties"]["arms"]["items"]
            fields = [name for name in single["properties"] if name != "schema"]
            self.assertEqual(list(item["properties"]), ["arm"] + fields, arms_file)
            self.assertEqual(item["required"],
                             ["arm"] + [name for name in single["required"] if name != "schema"],
                             arms_file)
            for name in fields:
                self.assertEqual(item["properties"][name],
                                 {"$ref": f"{single['$id']}#/properties/{name}"},
                                 f"{arms_file}: {name}")

    def test_docs_name_every_top_level_property(self):
        missing = []
        for name in schema_files():
            schema = json_schema.load(name)
            for path in doc_of(name):
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                missing += [
                    f"schemas/{name}: {prop} is not named in {path}"
                    for prop in schema["properties"]
                    if not re.search(r"[`\"]" + re.escape(prop) + r"[`\"]", text)
                ]
        self.assertEqual(missing, [])

    def test_docs_point_to_their_schema_files(self):
        missing = []
        for name in schema_files():
            for path in doc_of(name):
                with open(path, encoding="utf-8") as f:
                    if f"schemas/{name}" not in f.read():
                        missing.append(f"{path} does not point to schemas/{name}")
        self.assertEqual(missing, [])

    def test_fields_the_docs_list_exist(self):
        missing = []
        for name in schema_files():
            schema = json_schema.load(name)
            names = names_in(schema)
            for path in doc_of(name):
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                missing += [
                    f"{path}: {field} (after schema `{schema['$id']}`) is neither a property "
                    f"nor a value in schemas/{name}" for field in doc_fields(text, schema["$id"])
                    if field not in names
                ]
        self.assertEqual(missing, [])


if __name__ == "__main__":
    unittest.main()
