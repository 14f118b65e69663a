"""Docs that run: every `$ command` shown in README.md and docs/*.md runs here against testdata/, and
what the doc shows after it must be what the command prints (issue 27).

A shown session is a fenced block whose lines start with `$ `: each such line (with its `\\`
continuations) is a command, and the lines up to the next command are its output, stdout and
stderr as a terminal shows them. The commands of one block run in order in one bash, so
`$ echo $?` shows the previous command's exit code. A line `...` in the shown output stands for
any number of lines, and `...` inside a line any text. The commands of one doc run in one scratch
folder, block after block (a file one block writes, the next reads), where every file of testdata/
is reachable by its name (and `testdata/...` by its path), with the built tools on PATH, `python3`
the interpreter with NumPy, and the built driver as `bench_driver.py`.

A block that cannot run here (a live cluster, minutes of benchmark, an elided command line) is
preceded by the comment `<!-- docs-test: not run: <reason> -->`; the reason is required, and the
test checks that such a block does hold a command.
"""

import os
import re
import subprocess
import tempfile
import unittest
from dataclasses import dataclass, field
from typing import Optional

import cli_common

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = [os.path.join(REPO, "README.md")] + sorted(
    os.path.join(REPO, "docs", name)
    for name in os.listdir(os.path.join(REPO, "docs")) if name.endswith(".md"))
NOT_RUN = re.compile(r"<!--\s*docs-test:\s*not run:\s*(.*?)\s*-->")
ELISION = "..."


@dataclass
class Command:
    text: str  # the command as bash reads it (continuations kept)
    line: int  # 1-based line of its `$ ` in the doc
    shown: list[str] = field(default_factory=list)


@dataclass
class Session:
    doc: str
    line: int  # the opening fence
    commands: list[Command]
    not_run: Optional[str]  # the reason, for a block marked not run


def sessions_of(path: str, text: str) -> list[Session]:
    """The shown sessions of a Markdown text: fenced blocks with at least one `$ ` line."""
    lines = text.splitlines()
    found: list[Session] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        fence_line = i
        marker = None
        for back in (i - 1, i - 2):
            if back >= 0 and (m := NOT_RUN.search(lines[back])):
                marker = m.group(1)
        body: list[tuple[int, str]] = []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append((i + 1, lines[i]))
            i += 1
        i += 1
        commands: list[Command] = []
        j = 0
        while j < len(body):
            number, line = body[j]
            if line.startswith("$ "):
                text = line[2:]
                while text.endswith("\\") and j + 1 < len(body):
                    j += 1
                    text += "\n" + body[j][1]
                commands.append(Command(text, number))
            elif commands:
                commands[-1].shown.append(line)
            j += 1
        if commands:
            found.append(Session(os.path.relpath(path, REPO), fence_line + 1, commands, marker))
    return found


def line_matches(shown: str, printed: str) -> bool:
    """Whether one printed line is the shown one, where `...` inside a shown line stands for any
  text (a time, a path)."""
    if ELISION not in shown:
        return shown == printed
    pattern = ".*".join(re.escape(part) for part in shown.split(ELISION))
    return re.fullmatch(pattern, printed) is not None


def matches(shown: list[str], printed: list[str]) -> bool:
    """Whether `printed` is `shown`, where a line `...` in `shown` stands for any lines, and `...`
  in a line for any text (blanks at the ends of lines do not count)."""
    shown = [line.rstrip() for line in shown]
    printed = [line.rstrip() for line in printed]
    # Classic glob matching over lines, `...` as `*`.
    s = p = 0
    star_s, star_p = -1, 0
    while p < len(printed):
        if s < len(shown) and shown[s] == ELISION:
            star_s, star_p = s, p
            s += 1
        elif s < len(shown) and line_matches(shown[s], printed[p]):
            s += 1
            p += 1
        elif star_s >= 0:
            star_p += 1
            s, p = star_s + 1, star_p
        else:
            return False
    while s < len(shown) and shown[s] == ELISION:
        s += 1
    return s == len(shown)


MARK = "@@rtb-docs-command@@"


def run_session(session: Session, workdir: str) -> list[list[str]]:
    """Runs the commands of `session` in one bash in `workdir`; returns each one's printed lines."""
    script = ["set +e"]
    for number, command in enumerate(session.commands):
        # The mark must not change $? for a following `echo $?`.
        script += [
            "__rtb_rc=$?", f"printf '%s %d\\n' '{MARK}' {number}", "(exit $__rtb_rc)",
            "{ " + command.text + "\n} 2>&1"
        ]
    env = dict(os.environ)
    # The built tools, and `python3` as the interpreter with NumPy the tests use.
    env["PATH"] = os.pathsep.join(
        [cli_common.BIN, os.path.join(workdir, ".bin"),
         env.get("PATH", "")])
    env["NO_COLOR"] = "1"
    proc = subprocess.run(["bash", "-c", "\n".join(script)], cwd=workdir, env=env,
                          capture_output=True, timeout=300)
    outputs: list[list[str]] = [[] for _ in session.commands]
    current = -1
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith(MARK + " "):
            current = int(line[len(MARK) + 1:])
        elif current >= 0:
            outputs[current].append(line)
    return outputs


def make_workdir(root: str) -> None:
    """Links every testdata file into `root` by its name, testdata/ itself, and the driver."""
    testdata = cli_common.TESTDATA
    os.symlink(testdata, os.path.join(root, "testdata"))
    seen: set[str] = set()
    for folder, _, files in sorted(os.walk(testdata)):
        for name in sorted(files):
            if name in seen or os.path.exists(os.path.join(root, name)):
                continue
            seen.add(name)
            os.symlink(os.path.join(folder, name), os.path.join(root, name))
    os.symlink(cli_common.DRIVER, os.path.join(root, "bench_driver.py"))
    os.mkdir(os.path.join(root, ".bin"))
    os.symlink(cli_common.PYTHON, os.path.join(root, ".bin", "python3"))


class MatchingTest(unittest.TestCase):

    def test_elision_stands_for_any_lines(self) -> None:
        self.assertTrue(matches(["a", "...", "d"], ["a", "b", "c", "d"]))
        self.assertTrue(matches(["a", "...", "d"], ["a", "d"]))
        self.assertTrue(matches(["...", "x"], ["p", "x", "q", "x"]))
        self.assertTrue(matches(["a  "], ["a"]))
        self.assertFalse(matches(["a", "...", "d"], ["a", "b", "c"]))
        self.assertFalse(matches(["a", "b"], ["a", "c"]))
        self.assertFalse(matches(["a"], ["a", "b"]))
        self.assertTrue(matches(["wrote x (... s)"], ["wrote x (0.17 s)"]))
        self.assertFalse(matches(["wrote x (... s)"], ["wrote y (0.17 s)"]))

    def test_sessions_are_commands_and_what_follows(self) -> None:
        text = (
            "text\n<!-- docs-test: not run: needs a cluster -->\n```\n$ kubectl get x\nout\n```\n"
            "```\n$ tool a \\\n  --flag\nline 1\nline 2\n$ echo $?\n1\n```\n```\nno command\n```\n")
        found = sessions_of(os.path.join(REPO, "docs", "x.md"), text)
        self.assertEqual(len(found), 2)
        self.assertEqual(found[0].not_run, "needs a cluster")
        self.assertIsNone(found[1].not_run)
        self.assertEqual([c.text for c in found[1].commands], ["tool a \\\n  --flag", "echo $?"])
        self.assertEqual(found[1].commands[0].shown, ["line 1", "line 2"])
        self.assertEqual(found[1].commands[0].line, 8)


class DocsExamplesTest(unittest.TestCase):

    def test_every_shown_command_prints_what_the_doc_shows(self) -> None:
        total = run = 0
        with tempfile.TemporaryDirectory(prefix="rtb_docs_") as scratch:
            for doc_number, path in enumerate(DOCS):
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                workdir = os.path.join(scratch, f"doc{doc_number}")
                os.mkdir(workdir)
                make_workdir(workdir)
                for session in sessions_of(path, text):
                    total += 1
                    if session.not_run is not None:
                        self.assertTrue(session.not_run,
                                        f"{session.doc}:{session.line}: a reason is needed")
                        continue
                    run += 1
                    for command, printed in zip(session.commands, run_session(session, workdir)):
                        with self.subTest(doc=session.doc, line=command.line, command=command.text):
                            if not matches(command.shown, printed):
                                self.fail(
                                    f"{session.doc}:{command.line}: `$ {command.text}` printed:\n" +
                                    "\n".join(printed) + "\n--- the doc shows:\n" +
                                    "\n".join(command.shown))
        # The docs do show sessions, and most of them run.
        self.assertGreater(total, 10)
        self.assertGreater(run, total // 2)


if __name__ == "__main__":
    unittest.main()
