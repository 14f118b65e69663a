"""End-to-end test of issue 26: credentials never reach a report, explanation, diff, log (stderr) or
error message; a masked value prints as `***#` and 8 lowercase hex digits (an HMAC fingerprint
under a key drawn once per run); `--show-secrets` prints them in clear; the artifacts meant to be
run keep the real values (render-bench's bench JobSet on stdout or -o, its --preflight Job,
aot-check's AOT script, render-bench --print-driver).

The fixtures are in testdata/secrets/ (make_fixtures.py, testdata/SOURCES.md): a DRY_RUN and its _b
variant, a MaxText config log and its _b variant, a bench driver log, each with at least six
credentials; planted.json lists, per fixture, the credential values, which of them some tool
prints today ("printed": --show-secrets must show those), which runnable artifacts carry them
("artifacts"), and the must-print (name, value) pairs, plus the credentials the test itself gives
on command lines. Every tool and output mode that reads a fixture runs twice, masked (the default)
and with --show-secrets, with stdout, stderr and output files captured; the checks:

  (a) no planted value in any report, explanation, diff, log or error, and fingerprints where the
      tool prints a credential;
  (b) with --show-secrets, every printed credential of a fixture in the union of its reports, and
      no fingerprint anywhere;
  (c) the bench JobSet (stdout and -o), the preflight Job and the AOT script hold the real values
      and no fingerprint; --print-driver is the built driver, byte for byte;
  (d) every must-print pair prints in clear wherever the tool prints it;
  (e) a diff of a fixture and its _b variant shows a changed secret as two different
      fingerprints, and no unchanged one; one output gives one value one fingerprint, and two runs
      give it two (a fresh key per run).

The bench driver (cli_common.DRIVER) is checked with credentials in its environment:
--print-settings, its settings errors and --preflight mask them.
"""

import json
import os
import re
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence, Tuple

from cli_common import DRIVER, LAUNCH_DRYRUN, PYTHON, TempDirTestCase, run_tool, testdata, tool_path

SECRETS = testdata("secrets")
with open(os.path.join(SECRETS, "planted.json"), encoding="utf-8") as _f:
    PLANTED = json.load(_f)
FIXTURES = PLANTED["fixtures"]
COMMAND_LINE = PLANTED["command_line"]

DRYRUN = "launch_dryrun_credentials.txt"
DRYRUN_B = "launch_dryrun_credentials_b.txt"
CONFIG = "maxtext_config_credentials.log"
CONFIG_B = "maxtext_config_credentials_b.log"
BENCH = "bench_credentials.log"
BENCH_ERROR = "bench_credentials_error.log"
TRAINER_NODE = testdata("configlog_trainer_node.log")
BENCH_CONTROL = testdata("bench_logs", "bench_setup_checkpoint.log")

FINGERPRINT = re.compile(r"\*\*\*#[0-9a-f]{8}")
# Anything that looks like the start of a masked value, well formed or not: none may be in an
# artifact or a --show-secrets output (outside the bench driver's source, which has the masking).
MASK_MARK = "***#"
# The driver verbatim in a client script's heredoc. A driver too large for the script is base64
# in the command's arguments (render_bench_test.py), whose alphabet has neither '*' nor '#'.
DRIVER_BLOCK = re.compile(r"(?s)cat > /tmp/bench_driver\.py <<'(\w+)'.*?\n\s*\1\n")


def without_driver(text: str) -> str:
    return DRIVER_BLOCK.sub("", text)


def fixture(name: str) -> str:
    return os.path.join(SECRETS, name)


def command_line(name: str) -> str:
    """The value of the command-line credential whose `where` starts with the knob `name`."""
    for entry in COMMAND_LINE:
        if entry["where"].startswith(name):
            return entry["value"]
    raise KeyError(name)


KNOB_HF_ACCESS_TOKEN = command_line("render-bench/aot-check --maxtext-flag")
KNOB_HF_TOKEN = command_line("render-bench --trainer-arg")
KNOB_JUDGE_KEY = command_line("render-bench --orch-arg")
KNOB_WANDB_KEY = command_line("render-bench --driver-env")
ERROR_TOKEN = command_line("error paths")
ERROR_ARGV_TOKEN = command_line("a copy of the DRY_RUN")


def value(fixture_name: str, credential_name: str) -> str:
    """The value of the credential `credential_name` planted in `fixture_name`."""
    found = [
        c["value"] for c in FIXTURES[fixture_name]["credentials"] if c["name"] == credential_name
    ]
    assert len(found) == 1, (fixture_name, credential_name)
    return found[0]


# Every planted value: none may be in a report, whatever the fixture.
PLANTED_VALUES = {c["value"] for f in FIXTURES.values() for c in f["credentials"]}
ALL_VALUES = sorted(PLANTED_VALUES | {c["value"] for c in COMMAND_LINE})

# The must-print pairs, by fixture.
MP = {name: [(pair[0], pair[1]) for pair in f["must_print"]] for name, f in FIXTURES.items()}


def pairs(fixture_name: str, *names: str) -> List[Tuple[str, str]]:
    """The must-print pairs of `fixture_name` with these names (all of them when none given)."""
    chosen = [p for p in MP[fixture_name] if not names or p[0] in names]
    assert not names or len(chosen) == len(names), (fixture_name, names)
    return chosen


def must_print_pattern(name: str, value: str) -> "re.Pattern[str]":
    """`name`, then `value` later on its line or on an indented continuation line (a diff prints a
    list entry below its path), in clear."""
    return re.compile(re.escape(name) + r"(?:[^\n]|\n[ \t]){0,400}?" + re.escape(value))


class Run:
    """One tool run: its words (`{out}` stands for the mode's output directory), the exit code it
    must give, the fixtures it reads, and what its channels (stdout, stderr, file:NAME) hold."""

    def __init__(self, label: str, argv: Sequence[str], code: int, fixtures: Sequence[str],
                 files: Optional[Dict[str, str]] = None, artifacts: Optional[Dict[str, str]] = None,
                 secret_channels: Sequence[str] = (),
                 must_print: Optional[Dict[str, List[Tuple[str, str]]]] = None,
                 nonempty: Sequence[str] = ("stdout", ), replaced: Sequence[str] = ()):
        self.label = label
        self.argv = list(argv)
        self.code = code
        self.fixtures = list(fixtures)
        self.files = files or {}  # channel -> path with {out}
        self.artifacts = artifacts or {}  # channel -> jobset | preflight | aot_script | driver
        self.secret_channels = list(secret_channels)  # reports that print a credential
        self.must_print = must_print or {}  # channel -> pairs
        self.nonempty = list(nonempty)
        # Fixture credentials a knob of this run replaces: its artifacts hold the knob's instead.
        self.replaced = list(replaced)

    def words(self, out: str, show: bool) -> List[str]:
        words = [w.replace("{out}", out) for w in self.argv]
        if show:
            words.insert(1, "--show-secrets")
        return words

    def reports(self) -> List[str]:
        return [c for c in self.channels() if c not in self.artifacts]

    def channels(self) -> List[str]:
        return ["stdout", "stderr"] + ["file:" + name for name in self.files]


def runs(tmp: str) -> List[Run]:
    """Every tool and output mode that reads the fixtures. `tmp` holds the inputs derived from
    them (made by setUpClass)."""
    a, b = fixture(DRYRUN), fixture(DRYRUN_B)
    cfg, cfg_b, bench = fixture(CONFIG), fixture(CONFIG_B), fixture(BENCH)
    bench_yaml = os.path.join(tmp, "bench.yaml")
    knob_yaml = os.path.join(tmp, "knob.yaml")
    bad_argv = os.path.join(tmp, "dryrun_bad_argv.txt")
    rb, dr, dc = tool_path("render-bench"), tool_path("diff-renders"), tool_path("diff-configs")
    aot, br = tool_path("aot-check"), tool_path("bench-report")
    knobs = [
        "--maxtext-flag", "hf_access_token=" + KNOB_HF_ACCESS_TOKEN, "--maxtext-replace",
        "num_moe_token_chunks=4", "--trainer-arg=--hf_token=" + KNOB_HF_TOKEN,
        "--orch-arg=--judge_api_key=" + KNOB_JUDGE_KEY, "--driver-env",
        "WANDB_API_KEY=" + KNOB_WANDB_KEY
    ]
    # What the knobs replace in the render: its artifacts hold the knobs' values instead.
    knobs_replace = [value(DRYRUN, "hf_access_token"), value(DRYRUN, "--judge_api_key")]
    dry_all = pairs(DRYRUN)
    max_seq_a_b = [(name, v) for name, va, vb in PLANTED["differences"][0]["must_print_changed"]
                   for v in (va, vb)]
    chunks_2_4 = [("num_moe_token_chunks", "2"), ("num_moe_token_chunks", "4")]
    e2e_a = pairs(DRYRUN, "TOKENIZER_PATH", "reasoning_start_token", "solution_end_token",
                  "max_tokens", "imagePullSecrets")
    e2e_b = pairs(DRYRUN_B, "TOKENIZER_PATH", "reasoning_start_token", "solution_end_token",
                  "max_tokens", "imagePullSecrets")
    aot_pairs = pairs(DRYRUN, "TOKENIZER_PATH", "num_moe_token_chunks")
    config_a_b = (pairs(CONFIG, "max_tokens", "num_moe_token_chunks", "reasoning_start_token") +
                  pairs(CONFIG_B, "max_tokens", "num_moe_token_chunks", "reasoning_start_token"))
    config_only = [
        "reasoning_start_token", "solution_end_token", "token_embedder", "max_tokens",
        "google_auth_provider", "tokenizer_path"
    ]
    config_b_only = ["num_moe_token_chunks"] + config_only
    chunks_render_b_log_b = (pairs(DRYRUN_B, "num_moe_token_chunks") +
                             pairs(CONFIG_B, "num_moe_token_chunks"))
    bench_all = pairs(BENCH)
    stdout, stderr = ["stdout"], ["stderr"]
    return [
        # --- render-bench ------------------------------------------------------------------------
        Run("render-bench stdout", [rb, a, "--name", "ab-sec"], 0, [DRYRUN],
            artifacts={"stdout": "jobset"}, must_print={"stdout": dry_all}),
        Run("render-bench -o --explain --summary -v",
            [rb, a, "--name", "ab-sec", "-o", "{out}/rb.yaml", "--explain", "--summary", "-v"], 0,
            [DRYRUN], files={"jobset": "{out}/rb.yaml"}, artifacts={"file:jobset": "jobset"},
            must_print={"file:jobset": dry_all}, nonempty=["stderr", "file:jobset"]),
        Run("render-bench knobs --explain -vv",
            [rb, a, "--name", "ab-knob", "-o", "{out}/knob.yaml", "--explain", "-vv"] + knobs, 0,
            [DRYRUN], files={"jobset": "{out}/knob.yaml"}, artifacts={"file:jobset": "jobset"
                                                                      }, secret_channels=stderr,
            replaced=knobs_replace, must_print={"stderr": pairs(DRYRUN, "num_moe_token_chunks")},
            nonempty=["stderr", "file:jobset"]),
        Run("render-bench --preflight", [rb, a, "--name", "ab-sec", "--preflight"], 0, [DRYRUN],
            artifacts={"stdout": "preflight"}, must_print={"stdout": dry_all}),
        Run("render-bench --preflight --numerics -o",
            [rb, a, "--name", "ab-sec", "--preflight", "--numerics", "-o", "{out}/pf.yaml", "-v"],
            0, [DRYRUN], files={"preflight": "{out}/pf.yaml"},
            artifacts={"file:preflight": "preflight"}, must_print={"file:preflight": dry_all},
            nonempty=["file:preflight"]),
        Run("render-bench B stdout", [rb, b, "--name", "ab-b"], 0, [DRYRUN_B],
            artifacts={"stdout": "jobset"}, must_print={"stdout": pairs(DRYRUN_B)}),
        Run("render-bench B --preflight", [rb, b, "--name", "ab-b", "--preflight"], 0, [DRYRUN_B],
            artifacts={"stdout": "preflight"}),
        Run("render-bench --print-driver", [rb, "--print-driver"], 0, [],
            artifacts={"stdout": "driver"}),
        Run("render-bench error --maxtext-replace",
            [rb, a, "--name", "ab-sec", "--maxtext-replace", "hf_token=" + ERROR_TOKEN], 2, [],
            secret_channels=stderr, nonempty=stderr),
        Run("render-bench error --maxtext-flag",
            [rb, a, "--name", "ab-sec", "--maxtext-flag", ERROR_TOKEN], 2, [],
            secret_channels=stderr, nonempty=stderr),
        Run("render-bench error --driver-env",
            [rb, a, "--name", "ab-sec", "--driver-env", ERROR_TOKEN], 2, [], secret_channels=stderr,
            nonempty=stderr),
        # --- diff-renders ------------------------------------------------------------------------
        Run("diff-renders A B", [dr, a, b], 1, [DRYRUN, DRYRUN_B], secret_channels=stdout,
            must_print={"stdout": max_seq_a_b}),
        Run("diff-renders A B (again)", [dr, a, b], 1, [DRYRUN, DRYRUN_B], secret_channels=stdout),
        Run("diff-renders A B --json", [dr, a, b, "--json"], 1, [DRYRUN, DRYRUN_B],
            secret_channels=stdout, must_print={"stdout": max_seq_a_b}),
        Run("diff-renders A B --stat", [dr, a, b, "--stat"], 1, [DRYRUN, DRYRUN_B]),
        Run("diff-renders A B -v --color always", [dr, a, b, "-v", "--color", "always"], 1,
            [DRYRUN, DRYRUN_B], secret_channels=stdout, nonempty=["stdout", "stderr"]),
        Run("diff-renders e2e A (script line diff)", [dr, LAUNCH_DRYRUN, a], 1, [DRYRUN],
            secret_channels=stdout, must_print={"stdout": e2e_a}),
        Run("diff-renders e2e A --json", [dr, LAUNCH_DRYRUN, a, "--json"], 1, [DRYRUN],
            secret_channels=stdout, must_print={"stdout": e2e_a}),
        Run("diff-renders e2e B", [dr, LAUNCH_DRYRUN, b], 1, [DRYRUN_B], secret_channels=stdout,
            must_print={"stdout": e2e_b}),
        Run("diff-renders --expect-bench A bench --show-allowed",
            [dr, "--expect-bench", a, bench_yaml, "--show-allowed"], 0, [DRYRUN],
            secret_channels=stdout),
        Run("diff-renders --expect-bench A bench --json",
            [dr, "--expect-bench", a, bench_yaml, "--json", "-v"], 0, [DRYRUN],
            secret_channels=stdout),
        Run("diff-renders --expect-bench A knob-bench --show-allowed",
            [dr, "--expect-bench", a, knob_yaml, "--show-allowed"], 0, [DRYRUN],
            secret_channels=stdout, must_print={"stdout": chunks_2_4}),
        Run("diff-renders bench knob-bench",
            [dr, bench_yaml, knob_yaml, "--rename", "ab-bench=ab-knob"], 1, [DRYRUN],
            secret_channels=stdout, must_print={"stdout": chunks_2_4}),
        Run("diff-renders error --rename", [dr, a, b, "--rename", ERROR_TOKEN], 2, [],
            secret_channels=stderr, nonempty=stderr),
        # --- diff-configs ------------------------------------------------------------------------
        Run("diff-configs log log_b", [dc, cfg, cfg_b], 1, [CONFIG, CONFIG_B],
            secret_channels=stdout, must_print={"stdout": config_a_b}),
        Run("diff-configs log log_b --json", [dc, cfg, cfg_b, "--json"], 1, [CONFIG, CONFIG_B],
            secret_channels=stdout, must_print={"stdout": config_a_b}),
        Run("diff-configs log log_b -v --color always", [dc, cfg, cfg_b, "-v", "--color", "always"],
            1, [CONFIG, CONFIG_B], secret_channels=stdout, nonempty=["stdout", "stderr"]),
        Run("diff-configs log e2e-log", [dc, cfg, TRAINER_NODE], 1, [CONFIG],
            secret_channels=stdout, must_print={"stdout": pairs(CONFIG, *config_only)}),
        Run("diff-configs log_b e2e-log --json", [dc, cfg_b, TRAINER_NODE, "--json"], 1, [CONFIG_B],
            secret_channels=stdout, must_print={"stdout": pairs(CONFIG_B, *config_b_only)}),
        Run("diff-configs render log", [dc, a, cfg, "-v"], 1, [DRYRUN, CONFIG],
            secret_channels=stdout, nonempty=["stdout", "stderr"]),
        Run("diff-configs render_b log_b", [dc, b, cfg_b], 1, [DRYRUN_B, CONFIG_B],
            secret_channels=stdout, must_print={"stdout": chunks_render_b_log_b}),
        Run("diff-configs bench log --json", [dc, knob_yaml, cfg, "--json"], 1, [CONFIG],
            secret_channels=stdout, must_print={"stdout": chunks_2_4}),
        Run("diff-configs --list-dumps -v", [dc, cfg, "--list-dumps", "-v"], 0, [CONFIG]),
        # --- aot-check ---------------------------------------------------------------------------
        Run("aot-check script --explain -v", [aot, a, "--explain", "-v"], 0, [DRYRUN],
            artifacts={"stdout": "aot_script"}, secret_channels=stderr,
            must_print={"stdout": aot_pairs, "stderr": aot_pairs}, nonempty=["stdout", "stderr"]),
        Run("aot-check --print -o", [aot, a, "--print", "-o", "{out}/aot.sh"], 0, [DRYRUN],
            files={"aot_script": "{out}/aot.sh"}, artifacts={"file:aot_script": "aot_script"},
            must_print={"file:aot_script": aot_pairs}, nonempty=["file:aot_script"]),
        Run("aot-check B", [aot, b], 0, [DRYRUN_B], artifacts={"stdout": "aot_script"}),
        Run("aot-check --json", [aot, a, "--json"], 0, [DRYRUN], secret_channels=stdout,
            must_print={"stdout": aot_pairs}),
        Run("aot-check knob --explain", [
            aot, a, "--maxtext-flag", "hf_access_token=" + KNOB_HF_ACCESS_TOKEN, "--explain", "-o",
            "{out}/aot-knob.sh"
        ], 0, [DRYRUN], files={"aot_script": "{out}/aot-knob.sh"},
            artifacts={"file:aot_script": "aot_script"}, secret_channels=stderr,
            replaced=knobs_replace[:1], nonempty=["stderr", "file:aot_script"]),
        Run("aot-check error --compile-key", [aot, a, "--compile-key", ERROR_TOKEN], 2, [],
            secret_channels=stderr, nonempty=stderr),
        Run("aot-check error: DRY_RUN value", [aot, bad_argv], 2, [], secret_channels=stderr,
            nonempty=stderr),
        # --- bench-report ------------------------------------------------------------------------
        Run("bench-report text -v", [br, bench, "-v"], 0, [BENCH], secret_channels=stdout,
            must_print={"stdout": bench_all}, nonempty=["stdout", "stderr"]),
        Run("bench-report --json", [br, bench, "--json"], 0, [BENCH], secret_channels=stdout,
            must_print={"stdout": bench_all}),
        Run("bench-report -o --svg",
            [br, bench, "-o", "{out}/report.txt", "--svg", "{out}/timeline.svg"], 0, [BENCH],
            files={"report": "{out}/report.txt",
                   "svg": "{out}/timeline.svg"}, secret_channels=["file:report"],
            must_print={"file:report": bench_all}, nonempty=["file:report", "file:svg"]),
        Run("bench-report control variant --require-same-setup",
            [br, BENCH_CONTROL, bench, "--require-same-setup"], 1, [BENCH],
            secret_channels=["stdout", "stderr"], nonempty=["stdout", "stderr"]),
        Run("bench-report control variant --json -o",
            [br, BENCH_CONTROL, bench, "--json", "-o", "{out}/report.json"], 0, [BENCH],
            files={"report": "{out}/report.json"}, secret_channels=["file:report"],
            nonempty=["file:report"]),
        Run("bench-report --control-pair",
            [br, BENCH_CONTROL, bench, "--control-pair", BENCH_CONTROL, bench], 0, [BENCH],
            secret_channels=["stdout", "stderr"], nonempty=["stdout", "stderr"]),
        Run("bench-report error --numerics (weights differ)",
            [br, "--numerics", BENCH_CONTROL, BENCH_CONTROL, bench], 2, [BENCH],
            secret_channels=stderr, nonempty=stderr),
        Run("bench-report error", [br, fixture(BENCH_ERROR)], 2, [BENCH_ERROR],
            secret_channels=stderr, nonempty=stderr),
        # --- aot-summarize: it reads MaxText logs, and finds no memory analysis in this one -----
        Run("aot-summarize config log", [tool_path("aot-summarize"), cfg], 2, [], nonempty=stderr),
    ]


# What the bench driver reads from its environment: credentials in the argvs and settings it
# prints (the values planted in the DRY_RUN, as render-bench passes them), and must-print ones.
DRIVER_ENV = {
    "TRAINER_ARGV": ("--worker_id=ab-sec --hf_access_token=" + KNOB_HF_ACCESS_TOKEN +
                     " --max_seq_token_per_tpu=65536 '--rollout_env_json={\"OPENAI_API_KEY\": \"" +
                     value(DRYRUN, "OPENAI_API_KEY") + "\", \"max_tokens\": 8192}'"),
    "ORCH_ARGV": ("--judge_api_key " + KNOB_JUDGE_KEY +
                  " --reasoning_start_token='<think>' --solution_end_token='</answer>'"),
    "BENCH_NAME": "ab-sec",
    "PROFILE_DIR": "https://xprof:" + value(BENCH, "PROFILE_DIR") + "@xprof.example.com/ab-sec",
    "NUMERICS_MAXTEXT_FLAGS": "hf_access_token=" + KNOB_HF_TOKEN + " num_moe_token_chunks=2",
    "HF_TOKEN": ERROR_TOKEN,  # not a driver setting: nothing may print it
}
DRIVER_SECRETS = [
    KNOB_HF_ACCESS_TOKEN, KNOB_JUDGE_KEY, KNOB_HF_TOKEN,
    value(DRYRUN, "OPENAI_API_KEY"),
    value(BENCH, "PROFILE_DIR")
]
DRIVER_MUST_PRINT = [("--max_seq_token_per_tpu", "65536"), ("max_tokens", "8192"),
                     ("reasoning_start_token", "<think>"), ("solution_end_token", "</answer>"),
                     ("num_moe_token_chunks", "2")]

Result = Tuple[int, Dict[str, str]]  # exit code, channel -> text ("" for a missing file)


class SecretsTest(TempDirTestCase):
    """Runs every tool and mode once masked and once with --show-secrets (setUpClass); each test
    checks one property over all runs, one subTest per run and channel."""
    results: Dict[Tuple[str, bool], Result]
    all_runs: List[Run]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        tmp = cls.tmp.name
        for mode in ("masked", "show"):
            os.makedirs(os.path.join(tmp, mode))
        # Inputs derived from the fixtures: a bench render of A (plain, and with knobs that set
        # credentials), and A with a token as the trainer's --max_seq_token_per_tpu.
        a = fixture(DRYRUN)
        knob_words = [
            "--maxtext-flag", "hf_access_token=" + KNOB_HF_ACCESS_TOKEN, "--maxtext-replace",
            "num_moe_token_chunks=4", "--driver-env", "WANDB_API_KEY=" + KNOB_WANDB_KEY
        ]
        renders: List[Tuple[str, List[str]]] = [("bench", []), ("knob", knob_words)]
        for name, extra in renders:
            words = [a, "--name", "ab-" + name, "-o", os.path.join(tmp, name + ".yaml")] + extra
            code, out, err = run_tool(tool_path("render-bench"), words)
            assert code == 0, out + err
        with open(a, encoding="utf-8") as f:
            text = f.read()
        marker = "--max_seq_token_per_tpu=65536 --maxtext_skip"
        assert text.count(marker) == 1
        with open(os.path.join(tmp, "dryrun_bad_argv.txt"), "w", encoding="utf-8") as f:
            f.write(
                text.replace(marker,
                             "--max_seq_token_per_tpu=" + ERROR_ARGV_TOKEN + " --maxtext_skip"))
        cls.all_runs = runs(tmp)
        labels = [r.label for r in cls.all_runs]
        assert len(labels) == len(set(labels)), labels
        jobs = [(r, show) for r in cls.all_runs for show in (False, True)]
        with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
            done = list(pool.map(lambda job: cls.execute(job[0], job[1]), jobs))
        cls.results = {(r.label, show): result for (r, show), result in zip(jobs, done)}

    @classmethod
    def execute(cls, run: Run, show: bool) -> Result:
        out_dir = os.path.join(cls.tmp.name, "show" if show else "masked")
        code, out, err = run_tool(run.words(out_dir, show), timeout=60)
        texts = {"stdout": out, "stderr": err}
        for name, path in run.files.items():
            path = path.replace("{out}", out_dir)
            try:
                with open(path, encoding="utf-8") as f:
                    texts["file:" + name] = f.read()
            except OSError:
                texts["file:" + name] = ""
        return code, texts

    def result(self, label: str, show: bool = False) -> Result:
        return self.results[(label, show)]

    def leaks(self, text: str, values: Sequence[str]) -> List[str]:
        return [v for v in values if v in text]

    # --- it runs --------------------------------------------------------------------------------
    def check_runs(self, show: bool) -> None:
        """Every run, with --show-secrets or without, gives its exit code and writes every channel
        it must write."""
        for run in self.all_runs:
            code, texts = self.result(run.label, show)
            with self.subTest(run=run.label):
                self.assertEqual(
                    code, run.code, f"{run.words('OUT', show)}\n" + texts["stdout"][-3000:] +
                    texts["stderr"][-3000:])
                for channel in run.nonempty:
                    self.assertTrue(texts[channel].strip(), f"{channel} is empty")

    def test_runs_masked(self):
        """Masked mode (no new option)."""
        self.check_runs(False)

    def test_runs_show_secrets(self):
        """--show-secrets is an option of every tool: the same exit codes and channels."""
        self.check_runs(True)

    # --- (a) ------------------------------------------------------------------------------------
    def test_a_no_credential_in_reports(self):
        for run in self.all_runs:
            _, texts = self.result(run.label)
            for channel in run.reports():
                with self.subTest(run=run.label, channel=channel):
                    self.assertEqual(self.leaks(texts[channel], ALL_VALUES), [],
                                     "credentials printed in clear")

    def test_a_fingerprints_where_credentials_print(self):
        for run in self.all_runs:
            _, texts = self.result(run.label)
            for channel in run.secret_channels:
                with self.subTest(run=run.label, channel=channel):
                    self.assertRegex(texts[channel], FINGERPRINT)

    # --- (b) ------------------------------------------------------------------------------------
    def test_b_show_secrets_prints_every_credential(self):
        """The union of a fixture's --show-secrets reports holds each credential a tool prints;
        the command-line ones likewise over all runs."""
        unions: Dict[str, str] = {}
        everything = []
        for run in self.all_runs:
            _, texts = self.result(run.label, True)
            report = "\n".join(texts[c] for c in run.reports())
            everything.append(report)
            for name in run.fixtures:
                unions[name] = unions.get(name, "") + "\n" + report
        for name, data in FIXTURES.items():
            printed = [c["value"] for c in data["credentials"] if c["printed"]]
            with self.subTest(fixture=name):
                self.assertGreaterEqual(len(printed), 1)
                missing = [v for v in printed if v not in unions.get(name, "")]
                self.assertEqual(missing, [], "not shown by --show-secrets")
        with self.subTest(fixture="command line"):
            union = "\n".join(everything)
            self.assertEqual([c["value"] for c in COMMAND_LINE if c["value"] not in union], [])

    def test_b_show_secrets_masks_nothing(self):
        for run in self.all_runs:
            _, texts = self.result(run.label, True)
            for channel in run.channels():
                if run.artifacts.get(channel) == "driver":
                    continue  # the driver's source: test_c_print_driver_is_the_driver
                with self.subTest(run=run.label, channel=channel):
                    self.assertNotIn(MASK_MARK, without_driver(texts[channel]))

    # --- (c) ------------------------------------------------------------------------------------
    def test_c_artifacts_keep_real_values(self):
        kinds = {"jobset", "preflight", "aot_script"}
        for run in self.all_runs:
            for show in (False, True):
                _, texts = self.result(run.label, show)
                for channel, kind in run.artifacts.items():
                    if kind not in kinds:
                        continue
                    with self.subTest(run=run.label, channel=channel, show=show):
                        text = texts[channel]
                        self.assertTrue(text.strip(), "empty artifact")
                        self.assertNotIn(MASK_MARK, without_driver(text))
                        wanted = [
                            c["value"] for f in run.fixtures for c in FIXTURES[f]["credentials"]
                            if kind in c["artifacts"] and c["value"] not in run.replaced
                        ]
                        # The knobs' credentials, where the knob writes into this artifact.
                        wanted += [
                            c["value"] for c in COMMAND_LINE
                            if kind in c["artifacts"] and any(c["value"] in word
                                                              for word in run.argv)
                        ]
                        self.assertTrue(wanted)
                        self.assertEqual([v for v in wanted if v not in text], [],
                                         f"the {kind} lost real values")

    def test_c_every_artifact_is_checked(self):
        """The test's own coverage: for each fixture, each artifact that carries one of its
        credentials is written by some run that reads the fixture."""
        for name, data in FIXTURES.items():
            written = {
                kind
                for run in self.all_runs if name in run.fixtures for kind in run.artifacts.values()
            }
            carried = {kind for c in data["credentials"] for kind in c["artifacts"]}
            with self.subTest(fixture=name):
                self.assertEqual(sorted(carried - written), [])

    def test_c_print_driver_is_the_driver(self):
        with open(DRIVER, encoding="utf-8") as f:
            driver = f.read()
        for show in (False, True):
            with self.subTest(show=show):
                _, texts = self.result("render-bench --print-driver", show)
                self.assertEqual(texts["stdout"], driver)

    # --- (d) ------------------------------------------------------------------------------------
    def test_d_must_print_in_clear(self):
        for run in self.all_runs:
            for show in (False, True):
                _, texts = self.result(run.label, show)
                for channel, wanted in run.must_print.items():
                    for name, value in wanted:
                        with self.subTest(run=run.label, channel=channel, show=show, name=name,
                                          value=value):
                            self.assertRegex(texts[channel], must_print_pattern(name, value))

    def test_d_every_pair_is_checked_in_a_report(self):
        """The test's own coverage: each fixture's must-print pairs are checked in some report
        (not only in an artifact) of a run that reads that fixture."""
        for name, data in FIXTURES.items():
            checked = {
                pair
                for run in self.all_runs if name in run.fixtures
                for channel, wanted in run.must_print.items() if channel in run.reports()
                for pair in wanted
            }
            with self.subTest(fixture=name):
                self.assertEqual([p for p in MP[name] if p not in checked], [])

    # --- (e) ------------------------------------------------------------------------------------
    def fingerprints_on_lines(self, text: str, word: str) -> List[str]:
        return [
            fp for line in text.splitlines() if word in line for fp in FINGERPRINT.findall(line)
        ]

    def check_pair_diff(self, text: str, difference: dict, all_names: Sequence[str]):
        changed = [c["name"] for c in difference["secrets_changed"]]
        for entry in difference["secrets_changed"]:
            with self.subTest(secret=entry["name"]):
                fps = self.fingerprints_on_lines(text, entry["name"])
                self.assertEqual(len(set(fps)), 2, f"{entry['name']}: want two fingerprints")
        for name in all_names:
            if name in changed:
                continue
            with self.subTest(unchanged=name):
                self.assertNotIn(name, text, "an unchanged credential shows as a difference")
        with self.subTest(count="fingerprints"):
            self.assertEqual(len(FINGERPRINT.findall(text)), 2 * len(changed))

    def check_difference(self, index, a, b, command):
        """PLANTED's `index`th difference is between fixtures `a` and `b`, and `command` (its text
        and --json) shows exactly its changed credentials and must-print settings."""
        difference = PLANTED["differences"][index]
        self.assertEqual((difference["a"], difference["b"]), (a, b))
        names = sorted({c["name"] for c in FIXTURES[a]["credentials"]})
        _, texts = self.result(command)
        self.check_pair_diff(texts["stdout"], difference, names)
        _, texts = self.result(command + " --json")
        self.check_pair_diff(texts["stdout"], difference, names)
        self.assertEqual(
            json.loads(texts["stdout"])["summary"]["total"],
            len(difference["secrets_changed"]) + len(difference["must_print_changed"]))

    def test_e_diff_renders_a_b(self):
        self.check_difference(0, DRYRUN, DRYRUN_B, "diff-renders A B")

    def test_e_diff_configs_a_b(self):
        self.check_difference(1, CONFIG, CONFIG_B, "diff-configs log log_b")

    def test_e_render_against_log(self):
        """The render's hf_access_token and the log's differ: two fingerprints."""
        _, texts = self.result("diff-configs render log")
        fps = self.fingerprints_on_lines(texts["stdout"], "hf_access_token")
        self.assertEqual(len(set(fps)), 2, texts["stdout"])

    def test_e_one_value_one_fingerprint_per_run(self):
        """The W&B key of A's orchestrator and trainer is one value: one fingerprint in one output;
        another run (another key) gives it another."""
        _, texts = self.result("diff-renders e2e A (script line diff)")
        fps = self.fingerprints_on_lines(texts["stdout"], "WANDB_API_KEY")
        self.assertEqual(len(fps), 2, texts["stdout"])
        self.assertEqual(len(set(fps)), 1, fps)
        first = self.fingerprints_on_lines(
            self.result("diff-renders A B")[1]["stdout"], "WANDB_API_KEY")
        again = self.fingerprints_on_lines(
            self.result("diff-renders A B (again)")[1]["stdout"], "WANDB_API_KEY")
        self.assertEqual(len(first), 2)
        self.assertEqual(len(again), 2)
        self.assertNotEqual(first, again, "the same fingerprints in two runs: the key is not fresh")

    # --- the bench driver -----------------------------------------------------------------------
    def driver(self, args: Sequence[str], env: Dict[str, str]) -> Tuple[int, str, str]:
        unset = list(DRIVER_ENV) + ["ROUTING", "PROFILE_WINDOW"]
        return run_tool([PYTHON, DRIVER], args, env=env, unset=unset, timeout=60)

    def test_driver_print_settings(self):
        code, out, err = self.driver(["--print-settings"], DRIVER_ENV)
        self.assertEqual(code, 0, out + err)
        self.assertTrue(out.strip())
        self.assertEqual(self.leaks(out + err, DRIVER_SECRETS + ALL_VALUES), [])
        self.assertGreaterEqual(len(set(FINGERPRINT.findall(out))), len(DRIVER_SECRETS))
        for name, value in DRIVER_MUST_PRINT:
            with self.subTest(name=name):
                self.assertRegex(out, must_print_pattern(name, value))

    def test_driver_errors(self):
        modes: List[List[str]] = [["--print-settings"], ["--preflight"], []]
        for name in ("ROUTING", "PROFILE_WINDOW"):
            for args in modes:
                with self.subTest(setting=name, args=args):
                    code, out, err = self.driver(args, dict(DRIVER_ENV, **{name: ERROR_TOKEN}))
                    self.assertEqual(code, 2, out + err)
                    self.assertTrue(err.strip())
                    self.assertEqual(self.leaks(out + err, ALL_VALUES), [])
                    self.assertRegex(err, FINGERPRINT)

    def test_driver_preflight_log(self):
        """--preflight on a machine without Tunix: exit 1, its lines mask what they print."""
        code, out, err = self.driver(["--preflight"], DRIVER_ENV)
        self.assertEqual(code, 1, out + err)
        self.assertTrue((out + err).strip())
        self.assertEqual(self.leaks(out + err, ALL_VALUES), [])


if __name__ == "__main__":
    unittest.main()
