"""Writes the end-to-end fixtures of issue 26 (credentials never reach a report) and planted.json,
the list of what each fixture carries: its credential values (none may print outside a runnable
artifact) and its must-print (name, value) pairs (non-secrets that must print in clear).

  launch_dryrun_credentials.txt     testdata/launch_dryrun.txt with credentials planted in the
                                    trainer (and orchestrator) JobSets, and must-print settings
  launch_dryrun_credentials_b.txt   the same, with two trainer credentials and one non-secret
                                    trainer flag changed (what diff-renders A B must show)
  maxtext_config_credentials.log    testdata/configlog_trainer_node.log with credential config
                                    params and credentials in other log lines
  maxtext_config_credentials_b.log  the same, one secret param and three must-print params changed
  bench_credentials.log             a bench driver log (after testdata/bench_logs/
                                    bench_setup_checkpoint.log) with credentials in the fields
                                    bench-report echoes
  bench_credentials_error.log       a BENCH_SUMMARY whose enum field holds a credential: the one
                                    bench-report error that quotes a value

Every credential value is made up (random characters of the shape the table in data/secrets.tsv
describes), unique across the fixtures, and long enough for the table's minimum lengths.
Deterministic: run from the repository root with
  python3 testdata/secrets/make_fixtures.py
"""
import json
import os
from typing import Dict, List

OUT = "testdata/secrets"

# --- the credential values (one use each, except where a test needs the same value twice) ------
HF_TOKEN = "hf_NJZqPAi1HXwj5Q4FBvqlZr6NBkwWu7sCW6"  # trainer script: export HF_TOKEN=
WANDB_KEY = "692ee549bf508b0f7c438f9495f3fb12f9b4e56b"  # trainer + orchestrator startup env
WANDB_KEY_B = "60a6c9925335301283554a851c152b5294a25b3f"  # trainer startup env, variant b
AWS_ID = "AKIAZZYKSHTSD28LBJOQ"  # trainer startup env AWS_ACCESS_KEY_ID
AWS_SECRET = "rvg1Ja5+gRydUOhfIA87/Mhseg+nvdHblEP8RCUv"  # trainer startup env, quoted
PIP_PASSWORD = "WIfA9lij6pulYrBI4i"  # trainer startup env PIP_INDEX_URL=https://ci-bot:PW@...
HF_ACCESS_TOKEN = "hf_ELa2l1Bi7nDw5AlEKFznocZmcmlIkX5b7A"  # trainer MAXTEXT_EXTRA_FLAGS
OPENAI_KEY = "sk-proj-4ioz1uznYnHOuJih61SRF0v1lu61Sm1Lv8_aawC1"  # trainer argv, JSON-quoted
GITHUB_TOKEN = "ghp_RUh9NZ0CXISgjR820pSLi4Ujkul2R0xhstlf"  # trainer main container env list
GITHUB_TOKEN_B = "ghp_mSIc0940ByIho9MjjmhfCjcyxNoqetAmdYKx"  # the same entry, variant b
JUDGE_KEY = "sk-proj-dGciVKxRan5GkZPPfrtZCgNFFqDvd55ANmFUTxfL"  # orchestrator argv
PEM_LINES = [  # trainer script: a heredoc that writes an SSH deploy key
    "2HO2Y7vcmIWFgSF2cI1IUgfcWeQrvnNKLSE6PmhCSnZvtecuwFCAI4n+09nykaBO",
    "TIImYnzsjjEvYaIjoD7R6ufMHp45l/GJELQjBOAgMGmwrSMQx0ylj9w1VszIbY15",
]

# MaxText config log
CFG_HF_ACCESS_TOKEN = "hf_mvvjLNsgR30Lzb5nk9V2XhUQl6yafhkENs"
CFG_HF_ACCESS_TOKEN_B = "hf_EhqBGR6DDb4CVeSklMNLIDo766y0CX0GYG"
CFG_HF_TOKEN_ARG = "hf_wjd2pUQSzwRoZUj9z07EFT5QzFCBiW0kZm"  # Namespace(...) and the echoed command
CFG_WANDB_KEY = "e21ac4aaa18631a7176e255dc4963a9dd67d098c"
CFG_AWS_ID = "AKIAOTL4S47AIGGPKWRE"
CFG_AWS_SECRET = "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"
CFG_GCP_CREDENTIALS = "ya29.a0VH4gTr0Q5qcB8tt7me9pfuUDdZYyS-edQQepmtVk"
CFG_URL_PASSWORD = "maxqxL9dKPRrOsUeHH"
CFG_SLACK = "xoxb-327351623919-o4QulfAPdkVyvJRDnplkU3te"
CFG_UPLOAD_PASSWORD = "dcV0jL5a6wyMqfbTdv"

# bench log
BENCH_CKPT_PASSWORD = "wdgVP1uNbwJ4dpYbvI"
BENCH_HF_TOKEN = "hf_sxPDJbeeiGLhjaX18oCnoduJr2HmjrnsMm"
BENCH_HF_ACCESS_TOKEN = "hf_Qd067UiBhfnVMfwbttDSAcn4IvEQIiH9Qp"
BENCH_WANDB_KEY = "d55e8935c00c575955341b225f00a349d6be1061"
BENCH_PROFILER_PASSWORD = "XOThCrRANzcPL7LeXP"
BENCH_GITHUB_TOKEN = "ghs_73XxH2hCGr3OAEFyTRSGi4yQA4DXPTLM1cYo"
BENCH_AWS_SECRET = "Cvl0+nBsNpLCHObhLVi+qSfsEeD0vcpnnV5ttTh+"
BENCH_OPENAI_KEY = "sk-proj-8wSvJcRmImuCrDoajM8FOddJJqTWCN79pOBwqOeg"
BENCH_FAILURE_TOKEN = "hf_FBNLEcazUQAqbRkm6TYQOiWjtDDGqunKVk"
BENCH_MALFORMED_AWS_ID = "AKIA0YN47G3KOU0J4I2W"
BENCH_TIMING_SLACK = "xoxb-312001027659-HhAFfl5wyRU0bG0PWrCXmsdW"
BENCH_SESSION_KEY = "f445575bddbf7c553680c4dc2a3e6da6"
BENCH_ERROR_TOKEN = "ghs_LNvjSsUAxxwMnO3qkjsdIhB9zaSZ90ezt9YA"

# given on the tests' command lines, or in inputs they derive
KNOB_HF_ACCESS_TOKEN = "hf_KBVRal6CF2U1tYi8zti44626EUFAjcp9KA"
KNOB_HF_TOKEN = "hf_nSyP7YBKiOfJbmzct82ZMz1FrNbQTCr8Qp"
KNOB_JUDGE_KEY = "sk-proj-hnnhMmIR2BgW9mqrhYcObparWQZ2ypBUGUK4AYyg"
KNOB_WANDB_KEY = "f260abfc787e7d565c7555b9d316b78bd71de8ff"
ERROR_HF_TOKEN = "hf_n7Q1ZFGiuCWj6W5PGO0vLuDdw11rp0sRjB"
ERROR_ARGV_TOKEN = "hf_3EduwxqwjBzuFG55RjtVrcVuzy9H2epWkZ"


def replace_once(text, old, new, start=0, end=None):
  """`text` with the one occurrence of `old` in text[start:end] replaced by `new`."""
  end = len(text) if end is None else end
  at = text.find(old, start, end)
  assert at >= 0 and text.find(old, at + 1, end) < 0, (old, start, end)
  return text[:at] + new + text[at + len(old):]


ORCHESTRATOR = "\n  name: abtest-orch\n"
TRAINER = "\n  name: abtest-train\n"
ROLLOUT = "\n  name: abtest-roll\n"


def replace_in(text, section, next_section, old, new):
  """replace_once in one part of `text`: from `section` to the first `next_section` after it (both
  found again on each call, as every edit moves what follows it)."""
  start = text.index(section)
  return replace_once(text, old, new, start, text.index(next_section, start))


def dryrun(wandb_key, github_token, max_seq_token):
  with open("testdata/launch_dryrun.txt", encoding="utf-8") as f:
    text = f.read()
  gap = " " * 7  # the separator of the startup lines' words
  ind = " " * 18  # the trainer script's indent
  pem = "".join(f"{ind}{line}\n" for line in PEM_LINES)
  # (part of the text, the one string there, what it becomes), in order.
  edits = [
      # Orchestrator: the W&B key in its startup env, a judge API key and the reasoning tokens in
      # its argv (render-bench copies that argv into the bench as ORCH_ARGV).
      ((ORCHESTRATOR, TRAINER), 'WANDB_RUN_NAME="abtest"' + gap,
       f'WANDB_RUN_NAME="abtest"{gap}WANDB_API_KEY={WANDB_KEY}{gap}'),
      ((ORCHESTRATOR, TRAINER), '--wandb_run_name="abtest"',
       f'--wandb_run_name="abtest"{gap}--judge_api_key={JUDGE_KEY}'
       f'{gap}--reasoning_start_token="<think>"{gap}--solution_end_token="</answer>"'),
      # Trainer pod spec: a pull secret by name.
      ((TRAINER, "\n  - name: pw-node\n"), "            serviceAccountName: xpk-sa\n",
       "            serviceAccountName: xpk-sa\n"
       "            imagePullSecrets: [{name: regcred}]\n"),
      # Trainer script: an exported token and a multi-line heredoc holding a PEM private key.
      ((TRAINER, ROLLOUT), f"{ind}trap _sigterm SIGTERM\n\n", f"{ind}trap _sigterm SIGTERM\n\n"
       f"{ind}export HF_TOKEN={HF_TOKEN}\n"
       f"{ind}mkdir -p /root/.ssh\n"
       f"{ind}cat > /root/.ssh/id_ed25519 <<'EOF'\n"
       f"{ind}-----BEGIN OPENSSH PRIVATE KEY-----\n"
       f"{pem}"
       f"{ind}-----END OPENSSH PRIVATE KEY-----\n"
       f"{ind}EOF\n"
       f"{ind}chmod 600 /root/.ssh/id_ed25519\n\n"),
      # Trainer startup env: W&B and AWS keys, a package index URL with a password, the tokenizer
      # path.
      ((TRAINER, ROLLOUT), 'WANDB_RUN_NAME="abtest"' + gap,
       f'WANDB_RUN_NAME="abtest"{gap}WANDB_API_KEY={wandb_key}{gap}AWS_ACCESS_KEY_ID={AWS_ID}'
       f"{gap}AWS_SECRET_ACCESS_KEY='{AWS_SECRET}'"
       f'{gap}PIP_INDEX_URL="https://ci-bot:{PIP_PASSWORD}@pypi.example.com/simple"'
       f"{gap}TOKENIZER_PATH=/models/qwen3.5-397b/tokenizer{gap}"),
      # Trainer MAXTEXT_EXTRA_FLAGS: MaxText's hf_access_token.
      ((TRAINER, ROLLOUT), " num_moe_token_chunks=2 ",
       f" num_moe_token_chunks=2 hf_access_token={HF_ACCESS_TOKEN} "),
      # Trainer argv: a JSON-quoted argument with an API key (and max_tokens beside it).
      ((TRAINER, ROLLOUT), "--skip_first_n_profiler_steps=-1 ",
       f"--skip_first_n_profiler_steps=-1 --rollout_env_json='{{\"OPENAI_API_KEY\": "
       f"\"{OPENAI_KEY}\", \"max_tokens\": 8192}}' "),
      ((TRAINER, ROLLOUT), "--max_seq_token_per_tpu=65536 --maxtext_skip",
       f"--max_seq_token_per_tpu={max_seq_token} --maxtext_skip"),
      # Trainer main container env list, as `kubectl get -o yaml` prints it.
      ((TRAINER, ROLLOUT), "              - name: VLLM_ENABLE_V1_MULTIPROCESSING\n",
       f"              - name: GITHUB_TOKEN\n                value: {github_token}\n"
       "              - name: VLLM_ENABLE_V1_MULTIPROCESSING\n"),
  ]
  for (section, next_section), old, new in edits:
    text = replace_in(text, section, next_section, old, new)
  return text


DRYRUN_MUST_PRINT = [
    ["--max_seq_token_per_tpu", "65536"],
    ["num_moe_token_chunks", "2"],
    ["TOKENIZER_PATH", "/models/qwen3.5-397b/tokenizer"],
    ["reasoning_start_token", "<think>"],
    ["solution_end_token", "</answer>"],
    ["max_tokens", "8192"],
    ["imagePullSecrets", "regcred"],
]


def cred(name, value, where, printed=True, artifacts=()):
  """One planted credential: `printed` when some tool prints the line or field that carries it
  (so --show-secrets shows it; false: no tool echoes that line, and it must still never leak);
  `artifacts`, the runnable outputs that carry it today (render-bench's JobSet and preflight Job,
  aot-check's script) and must keep its real value."""
  return {
      "name": name, "value": value, "where": where, "printed": printed, "artifacts": list(artifacts)
  }


ALL_ARTIFACTS = ("jobset", "preflight", "aot_script")
BENCH_ARTIFACTS = ("jobset", "preflight")


def carried_by(artifacts, *rows):
  """Credentials (name, value, where) that the same runnable artifacts carry."""
  return [cred(name, value, where, artifacts=artifacts) for name, value, where in rows]


def dryrun_credentials(wandb_key, github_token):
  return [
      cred(
          "HF_TOKEN", HF_TOKEN, "trainer script: export HF_TOKEN= (the bench client replaces "
          "the script: only diff-renders' line diff of the script shows it)"),
      *carried_by(
          ALL_ARTIFACTS,
          ("WANDB_API_KEY", wandb_key,
           "trainer startup env (and, value of A, orchestrator startup env)"),
          ("AWS_ACCESS_KEY_ID", AWS_ID, "trainer startup env (AKIA shape)"),
          ("AWS_SECRET_ACCESS_KEY", AWS_SECRET, "trainer startup env, single-quoted"),
          ("PIP_INDEX_URL", PIP_PASSWORD,
           "trainer startup env, password of https://ci-bot:PASSWORD@pypi.example.com"),
          ("hf_access_token", HF_ACCESS_TOKEN, "trainer MAXTEXT_EXTRA_FLAGS item"),
      ),
      *carried_by(
          BENCH_ARTIFACTS,
          ("OPENAI_API_KEY", OPENAI_KEY,
           "trainer argv --rollout_env_json='{\"OPENAI_API_KEY\": ...}' (JSON-quoted)"),
          ("GITHUB_TOKEN", github_token, "trainer main container env list (- name: / value:)"),
          ("--judge_api_key", JUDGE_KEY, "orchestrator argv (the bench's ORCH_ARGV)"),
      ),
      *(cred(
          "PRIVATE KEY", line,
          f"trainer script heredoc, PEM private key body line {number} (replaced like HF_TOKEN)")
        for number, line in enumerate(PEM_LINES, 1)),
  ]


def config_log(hf_access_token, max_tokens, chunks, reasoning_start):
  with open("testdata/configlog_trainer_node.log", encoding="utf-8") as f:
    lines = f.read().split("\n")
  assert lines[-1] == ""
  params: Dict[str, str] = {}
  head: List[str] = []
  tail: List[str] = []
  for line in lines[:-1]:
    at = line.find("[TrainerNode] Config param ")
    if at < 0:
      (tail if params else head).append(line)
      continue
    key, value = line[at + len("[TrainerNode] Config param "):].split(": ", 1)
    params[key] = value
  params.update({
      "aws_access_key_id": CFG_AWS_ID,
      "aws_secret_access_key": CFG_AWS_SECRET,
      "gcp_credentials": CFG_GCP_CREDENTIALS,
      "google_auth_provider": "gke",
      "hf_access_token": hf_access_token,
      "hf_train_files": f"https://hf-reader:{CFG_URL_PASSWORD}@hf-mirror.example.com/datasets/train-*.parquet",
      "max_tokens": max_tokens,
      "num_moe_token_chunks": chunks,
      "reasoning_start_token": reasoning_start,
      "slack_bot_token": CFG_SLACK,
      "solution_end_token": "</answer>",
      "token_embedder": "dense",
      "tokenizer_path": "/models/qwen3.5-397b/tokenizer",
      "wandb_api_key": CFG_WANDB_KEY,
  })
  head[0] = head[0].replace("trainer_backend='maxtext')",
                            f"trainer_backend='maxtext', hf_token='{CFG_HF_TOKEN_ARG}')")
  head.insert(
      1, "2026-08-21 10:00:00,102 - [TrainerNode] Launch command: python -m "
      "tunix.experimental.distributed.runtime.main --worker_id=abtest-train "
      f"--hf_token={CFG_HF_TOKEN_ARG} --wandb_api_key {CFG_WANDB_KEY} --max_tokens={max_tokens}")
  head.append(f"2026-08-21 10:00:09,990 - [TrainerNode] export HF_TOKEN={CFG_HF_TOKEN_ARG} "
              f"AWS_ACCESS_KEY_ID={CFG_AWS_ID}")
  out = list(head)
  for i, key in enumerate(sorted(params)):
    out.append(f"2026-08-21 10:00:10,{3 + i:03d} - [TrainerNode] Config param {key}: {params[key]}")
  out += tail
  out.append(f"2026-08-21 10:00:11,500 - [TrainerNode] Uploading the config to "
             f"https://uploader:{CFG_UPLOAD_PASSWORD}@artifacts.example.com/abtest/config.yml")
  return "\n".join(out) + "\n"


def config_credentials(hf_access_token):
  return [
      cred("hf_access_token", hf_access_token, "Config param"),
      cred(
          "hf_token", CFG_HF_TOKEN_ARG,
          "Parsed args: Namespace(hf_token='...'), the echoed launch command and an export "
          "line (no tool echoes those lines)", printed=False),
      cred("wandb_api_key", CFG_WANDB_KEY,
           "Config param, and the echoed launch command (--wandb_api_key VALUE)"),
      cred("aws_access_key_id", CFG_AWS_ID, "Config param (AKIA shape), and an export line"),
      cred("aws_secret_access_key", CFG_AWS_SECRET, "Config param"),
      cred("gcp_credentials", CFG_GCP_CREDENTIALS, "Config param"),
      cred("hf_train_files", CFG_URL_PASSWORD,
           "Config param, password of https://hf-reader:PASSWORD@..."),
      cred("slack_bot_token", CFG_SLACK, "Config param (xoxb- shape)"),
      cred("upload URL", CFG_UPLOAD_PASSWORD,
           "last log line, password of https://uploader:PASSWORD@... (no tool echoes it)",
           printed=False),
  ]


def config_must_print(max_tokens, chunks, reasoning_start):
  return [
      ["num_moe_token_chunks", chunks],
      ["reasoning_start_token", reasoning_start],
      ["solution_end_token", "</answer>"],
      ["token_embedder", "dense"],
      ["max_tokens", max_tokens],
      ["google_auth_provider", "gke"],
      ["tokenizer_path", "/models/qwen3.5-397b/tokenizer"],
  ]


def bench_log():
  with open("testdata/bench_logs/bench_setup_checkpoint.log", encoding="utf-8") as f:
    text = f.read().replace("ab3-checkpoint", "ab-secrets")
  summary_at = text.index("BENCH_SUMMARY ")
  line_end = text.index("\n", summary_at)
  summary = json.loads(text[summary_at + len("BENCH_SUMMARY "):line_end])
  summary["microbatch_timing_why"] = (
      "the worker's get_step_timing publishes a ready time per call (num_moe_token_chunks=2, "
      "--max_seq_token_per_tpu=65536)")
  summary["update_path"]["why"] = (
      "the worker's fwd_bwd names apply_optimizer and applied the update in the warm-up step "
      f"(TRAINER_ARGV --hf_access_token={BENCH_HF_ACCESS_TOKEN} --wandb_api_key {BENCH_WANDB_KEY})")
  summary["weights"]["path"] = (
      f"https://ckpt-reader:{BENCH_CKPT_PASSWORD}@storage.example.com/qwen3.5-397b/0/items")
  summary["weights"]["why"] = (
      "--maxtext_ckpt_path reaches MaxText as load_parameters_path "
      f"(fetched with HF_TOKEN={BENCH_HF_TOKEN}, TOKENIZER_PATH=/models/qwen3.5-397b/tokenizer, "
      "max_tokens=8192)")
  summary["profiler"]["why"] = (
      "PROFILE_WINDOW not set and the render sets no trainer profiler flags "
      f"(PROFILE_DIR=https://xprof:{BENCH_PROFILER_PASSWORD}@xprof.example.com/ab-secrets)")
  summary["grad_norm"]["why"] = (
      "the trainer's metrics held no gradient_norm in any step (skip_step_on_spikes is off; "
      f'{{"GITHUB_TOKEN": "{BENCH_GITHUB_TOKEN}", "max_tokens": 8192}})')
  summary["token_dropping"]["why"] = (
      "counted zero by the trainer in every step, and no replay (moe_dropless_replays 0); "
      f"AWS_SECRET_ACCESS_KEY={BENCH_AWS_SECRET} reasoning_start_token=<think> "
      "solution_end_token=</answer>")
  summary["stage_boundary"]["source"] = f"STAGE_BOUNDARY=off SESSION_KEY={BENCH_SESSION_KEY}"
  summary["choices"]["logps_chunk_size"]["source"] = (
      f"run_trainer_node.main passes TrainerWorker(logps_chunk_size=) --openai_api_key={BENCH_OPENAI_KEY}"
  )
  text = (text[:summary_at] + "BENCH_SUMMARY " + json.dumps(summary, separators=(",", ":")) +
          text[line_end:])
  # A TRAINER_STEP_TIMING that could not be read, a cut BENCH_STEP line, and the driver's failure
  # line after the summary (a run that crashed while it wrote its last lines).
  step2 = text.index("[TrainerBench] ab-secrets step 2/4")
  text = (text[:step2] + "TRAINER_STEP_TIMING step=2 unavailable: RpcError: UNAUTHENTICATED "
          f"(authorization: Bearer {BENCH_TIMING_SLACK})\n" + text[step2:])
  done = text.index("[TrainerBench] ab-secrets: done")
  text = (text[:done] + 'BENCH_STEP {"step":5,"seconds":90.7,"note":"upload with '
          f'{BENCH_MALFORMED_AWS_ID}\n' + text[done:])
  text += (
      f"bench_driver: failed: HTTPError: 401 Client Error: Unauthorized for url: "
      f"https://huggingface.co/api/models/Qwen/Qwen3.5-397B-A17B?token={BENCH_FAILURE_TOKEN}\n")
  return text


BENCH_CREDENTIALS = [
    cred("weights.path", BENCH_CKPT_PASSWORD,
         "BENCH_SUMMARY weights.path, password of https://ckpt-reader:PASSWORD@..."),
    cred("HF_TOKEN", BENCH_HF_TOKEN, "BENCH_SUMMARY weights.why"),
    cred("--hf_access_token", BENCH_HF_ACCESS_TOKEN, "BENCH_SUMMARY update_path.why"),
    cred("--wandb_api_key", BENCH_WANDB_KEY, "BENCH_SUMMARY update_path.why (--name value form)"),
    cred("PROFILE_DIR", BENCH_PROFILER_PASSWORD,
         "BENCH_SUMMARY profiler.why, password of https://xprof:PASSWORD@..."),
    cred("GITHUB_TOKEN", BENCH_GITHUB_TOKEN,
         "BENCH_SUMMARY grad_norm.why, as JSON in a string (bench-report --json prints it)"),
    cred("AWS_SECRET_ACCESS_KEY", BENCH_AWS_SECRET, "BENCH_SUMMARY token_dropping.why"),
    cred("token", BENCH_FAILURE_TOKEN, "bench_driver: failed: line, URL query ?token="),
    cred("SESSION_KEY", BENCH_SESSION_KEY,
         "BENCH_SUMMARY stage_boundary.source (bench-report does not print it)", printed=False),
    cred("--openai_api_key", BENCH_OPENAI_KEY,
         "BENCH_SUMMARY choices.logps_chunk_size.source (bench-report does not print it)",
         printed=False),
    cred("AKIA", BENCH_MALFORMED_AWS_ID,
         "a cut (malformed) BENCH_STEP line (bench-report warns without quoting it)",
         printed=False),
    cred(
        "Bearer", BENCH_TIMING_SLACK,
        "TRAINER_STEP_TIMING step=2 unavailable: line, xoxb- shape (bench-report warns "
        "without quoting it)", printed=False),
]
BENCH_MUST_PRINT = [
    ["num_moe_token_chunks", "2"],
    ["--max_seq_token_per_tpu", "65536"],
    ["TOKENIZER_PATH", "/models/qwen3.5-397b/tokenizer"],
    ["max_tokens", "8192"],
    ["reasoning_start_token", "<think>"],
    ["solution_end_token", "</answer>"],
]


def bench_error_log():
  with open(os.path.join(OUT, "bench_credentials.log"), encoding="utf-8") as f:
    text = f.read()
  return text.replace('"by":"none"', f'"by":"{BENCH_ERROR_TOKEN}"', 1)


def main():
  files = {
      "launch_dryrun_credentials.txt": dryrun(WANDB_KEY, GITHUB_TOKEN, "65536"),
      "launch_dryrun_credentials_b.txt": dryrun(WANDB_KEY_B, GITHUB_TOKEN_B, "131072"),
      "maxtext_config_credentials.log": config_log(CFG_HF_ACCESS_TOKEN, "8192", "2", "<think>"),
      "maxtext_config_credentials_b.log": config_log(CFG_HF_ACCESS_TOKEN_B, "4096", "4",
                                                     "<reasoning>"),
      "bench_credentials.log": bench_log(),
  }
  for name, text in files.items():
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
      f.write(text)
  with open(os.path.join(OUT, "bench_credentials_error.log"), "w", encoding="utf-8") as f:
    f.write(bench_error_log())
  b_must_print = [
      pair if pair[0] != "--max_seq_token_per_tpu" else [pair[0], "131072"]
      for pair in DRYRUN_MUST_PRINT
  ]
  planted = {
      "about": "Written by make_fixtures.py: per fixture, the credential values planted in it "
               "(none may print in a report, explanation, diff, log or error; --show-secrets "
               "prints them) and the must-print [name, value] pairs (non-secrets that print in "
               "clear). `differences`: what a diff of a fixture and its _b variant must show.",
      "fixtures": {
          "launch_dryrun_credentials.txt": {
              "credentials": dryrun_credentials(WANDB_KEY, GITHUB_TOKEN),
              "must_print": DRYRUN_MUST_PRINT,
          },
          "launch_dryrun_credentials_b.txt": {
              "credentials":
                  dryrun_credentials(WANDB_KEY_B, GITHUB_TOKEN_B) +
                  [cred("WANDB_API_KEY", WANDB_KEY, "orchestrator startup env (unchanged from A)")],
              "must_print": b_must_print,
          },
          "maxtext_config_credentials.log": {
              "credentials": config_credentials(CFG_HF_ACCESS_TOKEN),
              "must_print": config_must_print("8192", "2", "<think>"),
          },
          "maxtext_config_credentials_b.log": {
              "credentials": config_credentials(CFG_HF_ACCESS_TOKEN_B),
              "must_print": config_must_print("4096", "4", "<reasoning>"),
          },
          "bench_credentials.log": {
              "credentials": BENCH_CREDENTIALS,
              "must_print": BENCH_MUST_PRINT,
          },
          "bench_credentials_error.log": {
              # bench-report stops at the summary line: only the error prints.
              "credentials": [
                  cred(
                      "profiler.by", BENCH_ERROR_TOKEN,
                      "BENCH_SUMMARY profiler.by (an enum: bench-report refuses "
                      "the line and quotes the value)")
              ] + [dict(c, printed=False) for c in BENCH_CREDENTIALS],
              "must_print": [],
          },
      },
      # Credentials the tests give on command lines (knobs, error paths) and in inputs they
      # derive from the fixtures: none may print either, except in a runnable artifact.
      "command_line": [
          cred(
              "hf_access_token", KNOB_HF_ACCESS_TOKEN, "render-bench/aot-check --maxtext-flag "
              "hf_access_token=VALUE (--explain shows the change)", artifacts=ALL_ARTIFACTS),
          cred("--hf_token", KNOB_HF_TOKEN, "render-bench --trainer-arg=--hf_token=VALUE",
               artifacts=BENCH_ARTIFACTS),
          cred("--judge_api_key", KNOB_JUDGE_KEY, "render-bench --orch-arg=--judge_api_key=VALUE",
               artifacts=BENCH_ARTIFACTS),
          cred("WANDB_API_KEY", KNOB_WANDB_KEY, "render-bench --driver-env WANDB_API_KEY=VALUE",
               artifacts=BENCH_ARTIFACTS),
          cred(
              "hf_token", ERROR_HF_TOKEN, "error paths: render-bench --maxtext-replace "
              "hf_token=VALUE (not in MAXTEXT_EXTRA_FLAGS), --maxtext-flag VALUE, aot-check "
              "--compile-key VALUE, diff-renders --rename VALUE"),
          cred(
              "--max_seq_token_per_tpu", ERROR_ARGV_TOKEN, "a copy of the DRY_RUN whose "
              "trainer --max_seq_token_per_tpu is VALUE: aot-check refuses it and quotes it"),
      ],
      "differences": [
          {
              "a": "launch_dryrun_credentials.txt",
              "b": "launch_dryrun_credentials_b.txt",
              "secrets_changed": [
                  {"name": "WANDB_API_KEY", "a": WANDB_KEY, "b": WANDB_KEY_B},
                  {"name": "GITHUB_TOKEN", "a": GITHUB_TOKEN, "b": GITHUB_TOKEN_B},
              ],
              "must_print_changed": [["--max_seq_token_per_tpu", "65536", "131072"]],
          },
          {
              "a": "maxtext_config_credentials.log",
              "b": "maxtext_config_credentials_b.log",
              "secrets_changed": [
                  {"name": "hf_access_token", "a": CFG_HF_ACCESS_TOKEN, "b": CFG_HF_ACCESS_TOKEN_B},
              ],
              "must_print_changed": [["max_tokens", "8192", "4096"],
                                     ["num_moe_token_chunks", "2", "4"],
                                     ["reasoning_start_token", "<think>", "<reasoning>"]],
          },
      ],
  }
  with open(os.path.join(OUT, "planted.json"), "w", encoding="utf-8") as f:
    json.dump(planted, f, indent=1)
    f.write("\n")


if __name__ == "__main__":
  main()
