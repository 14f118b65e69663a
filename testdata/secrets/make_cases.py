"""Writes testdata/secrets/cases.jsonl: texts with credentials (and names that are not), each with
its masked form under the tests' fixed key, as the bench driver's masking makes it. The C++ library
must agree (tests/base/secrets_test.cc). Run from the repository root:
  /usr/bin/python3 testdata/secrets/make_cases.py
"""
import json
import sys

sys.path.insert(0, "tools/render-bench/driver")
from rtb_driver.masking import SecretMasker

KEY = bytes([7] + [0] * 31)
m = SecretMasker(KEY)
hf = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
gh = "ghp_" + "x" * 36
aws = "AKIA" + "IOSFODNN7EXAMPL1"
pat = "github_pat_" + "11ABCDEFG0" * 4
slack = "xoxb-" + "1234-5678-abcdefghij"
sk = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k"
cases = [
    "export HF_TOKEN=abc123 && python3 run.py",
    "WANDB_API_KEY='k e y' python3",
    "python3 -m x --hf_token=qwerty99 --steps 5",
    "python3 -m x --hf-token qwerty99 --steps 5",
    '{"env": {"GITHUB_TOKEN": "tok-123"}}',
    '["--wandb_api_key=zzz111", "--x"]',
    "password: hunter2\nother: 1",
    "- name: AWS_SECRET_ACCESS_KEY\n  value: wJalrXUtnFEMI\n",
    '[{"name":"DB_PASSWORD","value":"pw-9"}]',
    "pip install --index-url https://user:s3cret@pypi.example/simple x",
    "token in prose: " + hf + ".",
    "GH=" + gh,
    "id " + aws + " and " + pat + " and " + slack + " and " + sk,
    "key: |\n  -----BEGIN RSA PRIVATE KEY-----\n  MIIEow\n  -----END RSA PRIVATE KEY-----\nx: 1",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r (cut)",
    "DJANGO_SECRET_KEY=\"a\\\"b\" SESSION_KEY=s1 clientSecret: c2 PGPASSWORD=p3 GCP_CREDENTIALS=c4",
    "--max_seq_token_per_tpu=65536 --num_moe_token_chunks 4",
    "reasoning_start_token: '<think>'\nsolution_end_token='</answer>'",
    "max_tokens: 8192 token_embedder: dense TOKENIZER_PATH=/tok/qwen google_auth_provider=gke",
    "imagePullSecrets:\n- name: regcred\n",
    "HF_TOKEN=${HF_TOKEN} GITHUB_TOKEN=$GH GOOGLE_APPLICATION_CREDENTIALS=/secrets/sa.json",
    "hf_transfer sk-learn ghp_short https://huggingface.co/Qwen/x time 12:30:01 error: none",
    "--use_auth_token true --api_key 1e-3 MY_TOKEN=4096",
    '{"cmd": "export HF_TOKEN=\\"abc9\\" && run", "argv": ["--wandb_api_key", "zzz111", "--x"]}',
    '"{\\"GITHUB_TOKEN\\": \\"v4l\\", \\"max_tokens\\": 5}"',
    "- name: HF_TOKEN\n  valueFrom:\n    secretKeyRef:\n      name: hf\n",
]
with open("testdata/secrets/cases.jsonl", "w") as out:
  for text in cases:
    out.write(json.dumps({"text": text, "masked": m.scrub(text)}) + "\n")
