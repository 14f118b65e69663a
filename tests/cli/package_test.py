"""`make deb`'s package (CPack DEB): built here into a scratch directory from this build, then
unpacked with `dpkg -x` into a scratch root: its control fields, render-bench running from the
root, the man pages and completions in it."""

import glob
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


class PackageTest(unittest.TestCase):
    # Set once, by setUpClass.
    dir: str
    cpack: tuple[int, str, str]
    debs: list[str]
    root: str

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rtb-deb-")
        build = os.environ["RTB_BUILD_DIR"]
        config = os.path.join(build, "CPackConfig.cmake")
        out = os.path.join(cls.dir, "out")
        cls.cpack = run_tool([os.environ["RTB_CPACK"], "--config", config, "-G", "DEB", "-B", out],
                             cwd=build)
        cls.debs = glob.glob(os.path.join(cls.dir, "out", "*.deb"))
        cls.root = os.path.join(cls.dir, "root")
        if len(cls.debs) == 1:
            subprocess.run(["dpkg", "-x", cls.debs[0], cls.root], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def setUp(self):
        self.assertEqual(self.cpack[0], 0, self.cpack[1] + self.cpack[2])
        self.assertEqual(len(self.debs), 1, self.debs)

    def field(self, name):
        return subprocess.run(["dpkg-deb", "-f", self.debs[0], name], check=True,
                              capture_output=True, text=True).stdout.strip()

    def version(self):
        code, stdout, _ = run_tool(os.path.join(BIN, "render-bench"), ["--version"])
        self.assertEqual(code, 0)
        return stdout.split()[-1]

    def test_control_fields(self):
        version = self.version()
        self.assertEqual(os.path.basename(self.debs[0]),
                         "rl-trainer-bench_%s_%s.deb" % (version, self.field("Architecture")))
        self.assertEqual(self.field("Package"), "rl-trainer-bench")
        self.assertEqual(self.field("Version"), version)
        self.assertRegex(self.field("Maintainer"), r"^[^<>]+ <[^<>@\s]+@[^<>\s]+>$")
        # Depends: dpkg-shlibdeps' packages for the shared libraries the tools link, and only
        # those: libc6 always; the others only when the tools link them shared (RTB_STATIC_DEPS=OFF).
        depends = [d.strip().split()[0] for d in self.field("Depends").split(",")]
        needed = set()
        for tool in TOOLS:
            dynamic = subprocess.run(
                ["readelf", "-d", os.path.join(self.root, "usr", "bin", tool)], check=True,
                capture_output=True, text=True).stdout
            needed.update(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))
        self.assertIn("libc.so.6", needed)
        packages = {
            "libc.so.6": r"libc6$", "libstdc++.so.6": r"libstdc\+\+6$",
            "libyaml-cpp.so": r"libyaml-cpp0", "libyaml-0.so": r"libyaml-0-2$",
            "libz.so": r"zlib1g$", "libnettle.so": r"libnettle8$", "libfmt.so": r"libfmt\d",
            "libspdlog.so": r"libspdlog"
        }
        for soname, package in packages.items():
            linked = any(n.startswith(soname) for n in needed)
            listed = any(re.match(package, d) for d in depends)
            self.assertEqual(linked, listed, (soname, sorted(needed), depends))

    def test_render_bench_runs_from_the_unpacked_root(self):
        render_bench = os.path.join(self.root, "usr", "bin", "render-bench")
        code, stdout, stderr = run_tool(render_bench, ["--version"])
        self.assertEqual(code, 0, stderr)
        self.assertEqual(stdout, "render-bench (rl-trainer-bench) %s\n" % self.version())
        code, stdout, stderr = run_tool(render_bench, ["--demo", "--name", "deb-check"])
        self.assertEqual(code, 0, stderr)
        self.assertIn("name: deb-check\n", stdout)
        self.assertEqual(sorted(os.listdir(os.path.join(self.root, "usr", "bin"))), TOOLS)

    def test_man_pages_completions_and_docs_are_in_it(self):
        if os.environ.get("RTB_MAN_PAGES") == "1":
            self.assertEqual(sorted(os.listdir(os.path.join(self.root, "usr/share/man/man1"))),
                             sorted(tool + ".1.gz" for tool in TOOLS))
        self.assertEqual(
            sorted(os.listdir(os.path.join(self.root, "usr/share/bash-completion/completions"))),
            TOOLS)
        doc = os.path.join(self.root, "usr/share/doc/rl-trainer-bench")
        for name in ["README.md", "LICENSE", "docs/render-bench.md", "docs/bench-report.md"]:
            self.assertTrue(os.path.isfile(os.path.join(doc, name)), name)


if __name__ == "__main__":
    unittest.main()
