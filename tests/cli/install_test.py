"""`cmake --install <build> --prefix P` (what `make install` runs): the 8 tools in P/bin, a man page
per tool generated from its --help, and bash completions that bash-completion's loader finds
next to the tools and that complete options, values and subcommands."""

import gzip
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from cli_common import BIN, run_tool

TOOLS = [
    "aot-check", "aot-summarize", "bench-report", "check-payload", "diff-configs", "diff-renders",
    "hlo-overlap", "profile-report", "render-bench"
]
BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"  # Debian's bash-completion


def help_options(tool, *subcommand):
    """The long options a tool's --help lists (CLI11: two spaces, then the option names)."""
    code, stdout, _ = run_tool(os.path.join(BIN, tool), list(subcommand) + ["--help"])
    assert code == 0, tool
    names = set()
    for line in stdout.splitlines():
        if line.startswith("  -"):
            names.update(re.findall(r"--[a-z0-9-]+", line.split()[0]))
    return sorted(names)


class InstallTest(unittest.TestCase):
    # Set once, by setUpClass.
    prefix: str
    install: tuple[int, str, str]

    @classmethod
    def setUpClass(cls):
        cls.prefix = tempfile.mkdtemp(prefix="rtb-install-")
        cls.install = run_tool([
            os.environ["RTB_CMAKE"], "--install", os.environ["RTB_BUILD_DIR"], "--prefix",
            cls.prefix
        ])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.prefix)

    def path(self, *parts):
        return os.path.join(self.prefix, *parts)

    def test_installs_the_tools_that_run_from_the_prefix(self):
        self.assertEqual(self.install[0], 0, self.install[2])
        self.assertEqual(sorted(os.listdir(self.path("bin"))), TOOLS)
        for tool in TOOLS:
            code, stdout, stderr = run_tool(self.path("bin", tool), ["--version"])
            self.assertEqual(code, 0, stderr)
            self.assertRegex(stdout, r"^%s \(rl-trainer-bench\) \d+\.\d+\.\d+\n$" % tool)

    @unittest.skipUnless(os.environ.get("RTB_MAN_PAGES") == "1", "built with RTB_MAN_PAGES=OFF")
    def test_a_man_page_per_tool_made_from_its_help(self):
        self.assertEqual(sorted(os.listdir(self.path("share", "man", "man1"))),
                         sorted(tool + ".1.gz" for tool in TOOLS))
        for tool in TOOLS:
            with gzip.open(self.path("share", "man", "man1", tool + ".1.gz"), "rt") as f:
                page = f.read()
            self.assertIn('.TH %s "1"' % tool.upper(), page)
            self.assertTrue(re.search(r"\.SH NAME\n%s \\- \S" % re.escape(tool), page), tool)
            # Every option of --help is in the page (roff writes - as \-).
            for option in help_options(tool):
                self.assertIn(option.replace("-", "\\-"), page, tool)
        with gzip.open(self.path("share", "man", "man1", "check-payload.1.gz"), "rt") as f:
            page = f.read()
        for subcommand in ["build", "verify", "measure", "tiles"]:
            self.assertIn('.SH "SUBCOMMAND %s"' % subcommand.upper(), page)
            for option in help_options("check-payload", subcommand):
                self.assertIn(option.replace("-", "\\-"), page, subcommand)
        # man renders the page without a warning.
        if shutil.which("man"):
            page = self.path("share", "man", "man1", "render-bench.1.gz")
            proc = subprocess.run(["man", "--warnings", "-l", page], capture_output=True, text=True,
                                  env=dict(os.environ, MANWIDTH="100"))
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(proc.stderr, "")
            self.assertIn("--libtpu-flag", proc.stdout)

    def complete(self, *words):
        """What bash offers for the last of `words` (the command line so far), through
        bash-completion's own loader, which finds P/share/bash-completion/completions/<tool> as it
        finds /usr/local/share's (XDG_DATA_DIRS)."""
        self.assertTrue(os.path.exists(BASH_COMPLETION), "install bash-completion (make deps)")
        script = """
source %s
__load_completion "$1" || { echo "no completion loaded for $1" >&2; exit 3; }
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
spec=$(complete -p "$1") || exit 4
function=${spec#*-F }; function=${function%% *}
"$function" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%%s\\n' "${COMPREPLY[@]}"
""" % BASH_COMPLETION
        env = {
            "PATH": self.path("bin") + os.pathsep + os.environ.get("PATH", ""),
            "XDG_DATA_DIRS": self.path("share"), "BASH_COMPLETION_USER_DIR": "/nonexistent"
        }
        code, stdout, stderr = run_tool(["bash", "--norc", "-c", script, "bash"] + list(words),
                                        env=env, unset=["BASH_COMPLETION_COMPAT_DIR"])
        self.assertEqual(code, 0, stderr)
        return stdout.split()

    def test_completions_load_from_the_prefix_and_complete(self):
        self.assertTrue(
            os.path.isfile(self.path("share", "bash-completion", "completions", "render-bench")))
        for tool in TOOLS:
            self.assertEqual(self.complete(tool, "--vers"), ["--version"], tool)
        self.assertEqual(self.complete("render-bench", "--libtpu"), ["--libtpu-flag"])
        self.assertEqual(self.complete("render-bench", "--trainer-a"),
                         ["--trainer-arg", "--trainer-arg-remove"])
        self.assertEqual(self.complete("render-bench", "--logp-gates", ""), ["on", "off"])
        self.assertEqual(self.complete("render-bench", "--stage-boundary", "=", "o"), ["on", "off"])
        self.assertEqual(self.complete("diff-renders", "--color", "al"), ["always"])
        self.assertEqual(self.complete("bench-report", "--fail-if"), ["--fail-if-slower"])
        # Subcommands, then each subcommand's own options.
        self.assertEqual(self.complete("check-payload", ""),
                         ["build", "verify", "measure", "tiles"])
        self.assertEqual(self.complete("check-payload", "build", "--pad-p"), ["--pad-position"])
        self.assertEqual(self.complete("check-payload", "tiles", "--pad-p"), [])
        self.assertEqual(self.complete("check-payload", "build", "--pad-position", ""),
                         ["end", "start"])
        # A word that is no option is a file name (readline's default): nothing from us.
        self.assertEqual(self.complete("render-bench", "dry"), [])


if __name__ == "__main__":
    unittest.main()
