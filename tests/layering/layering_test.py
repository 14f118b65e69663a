"""The layering of lib/rtb, held to what the build declares (issue 27).

CMake writes <build>/layering.tsv (CMakeLists.txt, `rtb_layering`): one row per target whose code is
checked, with the tab-separated fields

  kind     `domain` (the static library of lib/rtb/<domain>), `binary` (a test binary, a fuzzer,
           the benchmarks) or `library` (a target that only passes links on: rtb, rtb_tool)
  target   the CMake target
  sources  the folder or file it compiles, relative to the source tree (`-`: none)
  links    its direct link libraries as the build has them (LINK_LIBRARIES, or what a fuzzer would
           link in a build without fuzzers), comma-separated; only our own targets matter here
  archive  a domain's static archive ($<TARGET_FILE>; `-` for other kinds)

A target may use its own domain and every domain reachable through its links (the transitive
closure is computed here, from the direct links CMake wrote). Two checks, both against that file
and nothing copied from it:

  includes  every `#include "rtb/<domain>/..."` in lib/rtb/, tests/ and fuzz/ names a domain the
            target compiling the file may use (a file in a folder above several targets' folders,
            such as tests/test_util.h, is compiled by all of them and may use what they all may);
  symbols   every symbol a domain's archive leaves undefined (`nm -A -P`) that another domain's
            archive defines (a strong definition: inline and template code is defined weakly
            wherever it is used) is defined by a domain it may use; symbols defined by none of our
            archives come from the system or a third-party library.

ctest sets RTB_LAYERING (the file), RTB_SOURCE_DIR (the source tree) and RTB_NM (CMake's nm).
"""

import dataclasses
import os
import posixpath
import re
import shutil
import subprocess
import unittest
from typing import Dict, FrozenSet, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

# The folders whose C++ files the include check reads, and the files it reads there.
SCANNED_FOLDERS = ("lib/rtb", "tests", "fuzz")
CXX_SUFFIXES = (".h", ".hh", ".hpp", ".cc", ".cpp", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]rtb/([^/">]*)/')
# nm -P symbol types: defined strongly (linkable, one owner), and undefined (a use).
STRONG_DEFINITIONS = frozenset("TDBRGSC")
UNDEFINED = frozenset("Uwv")


@dataclasses.dataclass(frozen=True)
class Target:
  kind: str
  name: str
  sources: str
  links: Tuple[str, ...]
  archive: str

  @property
  def folder(self) -> str:
    """The folder of its sources: they are a folder, or one file (a fuzzer's)."""
    return posixpath.dirname(self.sources) if self.sources.endswith(CXX_SUFFIXES) else self.sources

  @property
  def domain(self) -> str:
    """A domain target's folder name (lib/rtb/<domain>), which its includes name."""
    return posixpath.basename(self.sources) if self.kind == "domain" else ""


class Layering:
  """The targets of layering.tsv and what each may use."""

  def __init__(self, targets: Iterable[Target]):
    self.targets: Dict[str, Target] = {}
    for target in targets:
      if target.name in self.targets:
        raise ValueError(f"target {target.name} has two rows")
      self.targets[target.name] = target
    self.domain_targets = {t.domain: t for t in self.targets.values() if t.kind == "domain"}

  def domains(self) -> List[str]:
    return sorted(self.domain_targets)

  def uses(self, name: str) -> FrozenSet[str]:
    """The domains target `name` may use: its own, and every one reachable through its links."""
    found: Set[str] = set()
    seen: Set[str] = set()
    pending = [name]
    while pending:
      current = pending.pop()
      if current in seen or current not in self.targets:
        continue  # a third-party library, or a target reached twice
      seen.add(current)
      target = self.targets[current]
      if target.kind == "domain":
        found.add(target.domain)
      pending.extend(target.links)
    return frozenset(found)

  def rule_for(self, path: str) -> Optional[Tuple[str, FrozenSet[str]]]:
    """(who compiles `path`, the domains it may include) or None when no target compiles it."""
    owners = [
        t for t in self.targets.values()
        if t.sources and (path == t.sources or path.startswith(t.sources + "/"))
    ]
    if owners:
      owner = max(owners, key=lambda t: len(t.sources))
      return owner.name, self.uses(owner.name)
    # A file in a folder above the targets' folders (tests/test_util.h) is shared by them all; a
    # file beside a target's file (a new fuzz/<name>_fuzz.cc) is not.
    folder = posixpath.dirname(path)
    sharers = sorted(t.name
                     for t in self.targets.values()
                     if t.folder.startswith(folder + "/") and t.kind != "library")
    if not sharers:
      return None
    allowed = frozenset.intersection(*(self.uses(name) for name in sharers))
    return "every one of " + ", ".join(sharers), allowed


def parse_layering(text: str) -> Layering:
  targets = []
  for number, line in enumerate(text.splitlines(), 1):
    if not line.strip() or line.startswith("#"):
      continue
    fields = line.split("\t")
    if len(fields) != 5:
      raise ValueError(f"layering.tsv:{number}: {len(fields)} fields, not 5: {line!r}")
    kind, name, sources, links, archive = fields
    if kind not in ("domain", "binary", "library"):
      raise ValueError(f"layering.tsv:{number}: unknown kind {kind!r}")
    targets.append(
        Target(kind=kind, name=name, sources="" if sources == "-" else sources.rstrip("/"),
               links=tuple(link.strip() for link in links.split(",") if link.strip()),
               archive="" if archive == "-" else archive))
  return Layering(targets)


def includes_of(text: str) -> Iterator[Tuple[int, str]]:
  """(line number, domain) of every `#include "rtb/<domain>/..."` in a C++ file."""
  for number, line in enumerate(text.splitlines(), 1):
    match = INCLUDE.match(line)
    if match:
      yield number, match.group(1)


def check_includes(layering: Layering, files: Mapping[str, str]) -> List[str]:
  """One line per include the layering forbids, and per file no target compiles."""
  problems = []
  domains = set(layering.domains())
  for path in sorted(files):
    rule = layering.rule_for(path)
    if rule is None:
      problems.append(f"{path}: no target of layering.tsv compiles it; add it to a domain, a test "
                      "binary or a fuzzer (CMakeLists.txt, fuzz/CMakeLists.txt)")
      continue
    who, allowed = rule
    for number, domain in includes_of(files[path]):
      if domain not in domains:
        problems.append(f"{path}:{number}: includes rtb/{domain}/, which is no domain of lib/rtb "
                        f"(the domains: {', '.join(sorted(domains))})")
      elif domain not in allowed:
        problems.append(f"{path}:{number}: includes rtb/{domain}/, but {who} may use only "
                        f"{', '.join(sorted(allowed)) or 'no domain'} (layering.tsv)")
  return problems


@dataclasses.dataclass
class Symbols:
  """What one archive's `nm -A -P` listing says."""
  defined: Set[str] = dataclasses.field(default_factory=set)  # any definition, weak ones too
  strong: Set[str] = dataclasses.field(default_factory=set)  # global, not weak: one owner
  undefined: Dict[str, Set[str]] = dataclasses.field(default_factory=dict)  # symbol -> members


def parse_nm(listing: str) -> Symbols:
  """Reads `nm -A -P ARCHIVE` (GNU or LLVM): `archive[member]: symbol type [value [size]]`."""
  symbols = Symbols()
  for line in listing.splitlines():
    prefix, separator, rest = line.rpartition(": ")
    fields = rest.split()
    if not separator or len(fields) < 2:
      continue
    name, kind = fields[0], fields[1]
    if kind in UNDEFINED:
      member = prefix[prefix.rfind("[") + 1:].rstrip("]") if prefix.endswith("]") else prefix
      symbols.undefined.setdefault(name, set()).add(member)
    else:
      symbols.defined.add(name)
      if kind in STRONG_DEFINITIONS:
        symbols.strong.add(name)
  return symbols


def demangled(names: Iterable[str]) -> Dict[str, str]:
  """C++ names as c++filt prints them (the raw names where there is no c++filt)."""
  names = sorted(set(names))
  cxxfilt = shutil.which("c++filt")
  if not names or cxxfilt is None:
    return {name: name for name in names}
  result = subprocess.run([cxxfilt], input="\n".join(names) + "\n", capture_output=True, text=True,
                          check=True)
  lines = result.stdout.splitlines()
  return dict(zip(names, lines)) if len(lines) == len(names) else {name: name for name in names}


def check_symbols(layering: Layering, listings: Mapping[str, str]) -> Tuple[List[str], int]:
  """One line per use of a symbol defined in a domain the user may not use; and how many
  cross-domain uses were found in all (so that a check that sees nothing can be told apart)."""
  symbols = {domain: parse_nm(listing) for domain, listing in listings.items()}
  owners: Dict[str, Set[str]] = {}
  for domain, found in symbols.items():
    for name in found.strong:
      owners.setdefault(name, set()).add(domain)
  violations: List[Tuple[str, str, str, Set[str]]] = []  # (domain, member, symbol, its owners)
  cross_domain_uses = 0
  for domain in sorted(symbols):
    allowed = layering.uses(layering.domain_targets[domain].name)
    for name, members in sorted(symbols[domain].undefined.items()):
      defined_by = owners.get(name, set()) - {domain}
      if name in symbols[domain].defined or not defined_by:
        continue  # its own, or the system's or a third-party library's
      cross_domain_uses += 1
      if not defined_by & allowed:
        violations.extend((domain, member, name, defined_by) for member in sorted(members))
  names = demangled(name for _, _, name, _ in violations)
  problems = [
      f"{layering.domain_targets[domain].archive or domain}({member}): uses {names[name]} "
      f"[{name}], defined in {', '.join('lib/rtb/' + d for d in sorted(defined_by))}, but "
      f"{domain} may use only {', '.join(sorted(layering.uses(layering.domain_targets[domain].name)))}"
      for domain, member, name, defined_by in violations
  ]
  return problems, cross_domain_uses


def source_files(source_dir: str) -> Dict[str, str]:
  """The C++ files of SCANNED_FOLDERS by their path relative to the source tree."""
  files = {}
  for folder in SCANNED_FOLDERS:
    for root, _, names in os.walk(os.path.join(source_dir, folder)):
      for name in names:
        if name.endswith(CXX_SUFFIXES):
          path = os.path.join(root, name)
          relative = os.path.relpath(path, source_dir).replace(os.sep, "/")
          with open(path, encoding="utf-8", errors="replace") as file:
            files[relative] = file.read()
  return files


# --- the checker itself, on small made-up inputs ---------------------------------------------------

# The project's graph in small (made up here, not read by the real checks): base <- k8s, hlo;
# k8s <- bench; test binaries and a fuzzer link one domain; rtb and rtb_tool pass everything on.
SAMPLE = "\n".join([
    "# kind\ttarget\tsources\tlinks\tarchive",
    "domain\trtb_base\tlib/rtb/base\tfmt::fmt,ZLIB::ZLIB\t/b/librtb_base.a",
    "domain\trtb_k8s\tlib/rtb/k8s\trtb_base,yaml-cpp\t/b/librtb_k8s.a",
    "domain\trtb_hlo\tlib/rtb/hlo\trtb_base\t/b/librtb_hlo.a",
    "domain\trtb_bench\tlib/rtb/bench\trtb_k8s\t/b/librtb_bench.a",
    "library\trtb\t-\trtb_base,rtb_k8s,rtb_hlo,rtb_bench\t-",
    "library\trtb_tool\t-\trtb,CLI11::CLI11\t-",
    "binary\thlo_tests\ttests/hlo\trtb_hlo,GTest::gtest_main\t-",
    "binary\tbench_tests\ttests/bench\trtb_bench,GTest::gtest_main\t-",
    "binary\ttools_tests\ttests/tools\trtb_tool,GTest::gtest_main\t-",
    "binary\tshell_fuzz\tfuzz/shell_fuzz.cc\trtb_k8s\t-",
]) + "\n"


class LayeringFileTest(unittest.TestCase):

  def test_a_target_may_use_its_domain_and_all_below_it(self):
    layering = parse_layering(SAMPLE)
    self.assertEqual(layering.domains(), ["base", "bench", "hlo", "k8s"])
    self.assertEqual(layering.uses("rtb_base"), {"base"})
    self.assertEqual(layering.uses("rtb_bench"), {"base", "k8s", "bench"})
    self.assertEqual(layering.uses("hlo_tests"), {"base", "hlo"})
    self.assertEqual(layering.uses("shell_fuzz"), {"base", "k8s"})
    self.assertEqual(layering.uses("tools_tests"), {"base", "k8s", "hlo", "bench"})

  def test_the_file_is_read_strictly(self):
    with self.assertRaisesRegex(ValueError, "layering.tsv:1: 4 fields"):
      parse_layering("domain\trtb_base\tlib/rtb/base\t-\n")
    with self.assertRaisesRegex(ValueError, "unknown kind 'tool'"):
      parse_layering("tool\tx\t-\t-\t-\n")
    with self.assertRaisesRegex(ValueError, "rtb_base has two rows"):
      parse_layering(SAMPLE + SAMPLE.splitlines()[1] + "\n")


class IncludeCheckTest(unittest.TestCase):

  def setUp(self):
    self.layering = parse_layering(SAMPLE)

  def test_allowed_includes_pass(self):
    files = {
        "lib/rtb/bench/render.cc": '#include "rtb/bench/render.h"\n#include "rtb/k8s/yaml.h"\n'
                                   '#include "rtb/base/error.h"\n#include <vector>\n',
        "tests/bench/render_test.cc": '#include "rtb/k8s/yaml.h"\n',
        "tests/test_util.h": '#include "rtb/base/error.h"\n',
        "tests/tools/tool_test.cc": '#include "rtb/hlo/scan.h"\n#include "rtb/bench/render.h"\n',
        "fuzz/shell_fuzz.cc": '#include "rtb/k8s/shell.h"\n',
    }
    self.assertEqual(check_includes(self.layering, files), [])

  def test_a_domain_including_one_it_may_not_use_is_named_by_file_and_line(self):
    files = {"lib/rtb/hlo/scan.cc": '#include "rtb/hlo/scan.h"\n\n#include "rtb/k8s/yaml.h"\n'}
    self.assertEqual(check_includes(self.layering, files), [
        "lib/rtb/hlo/scan.cc:3: includes rtb/k8s/, but rtb_hlo may use only base, hlo "
        "(layering.tsv)"
    ])

  def test_a_domain_including_a_domain_above_it_fails(self):
    files = {"lib/rtb/k8s/yaml.h": '  #  include <rtb/bench/render.h>\n'}
    self.assertEqual(len(check_includes(self.layering, files)), 1)

  def test_tests_and_fuzzers_are_held_to_what_their_binary_links(self):
    files = {
        "tests/hlo/scan_test.cc": '#include "rtb/k8s/yaml.h"\n',
        "fuzz/shell_fuzz.cc": '#include "rtb/k8s/shell.h"\n#include "rtb/bench/render.h"\n',
        "tests/test_util.h": '#include "rtb/k8s/yaml.h"\n',
    }
    self.assertEqual(check_includes(self.layering, files), [
        "fuzz/shell_fuzz.cc:2: includes rtb/bench/, but shell_fuzz may use only base, k8s "
        "(layering.tsv)",
        "tests/hlo/scan_test.cc:1: includes rtb/k8s/, but hlo_tests may use only base, hlo "
        "(layering.tsv)",
        "tests/test_util.h:1: includes rtb/k8s/, but every one of bench_tests, hlo_tests, "
        "tools_tests may use only base (layering.tsv)",
    ])

  def test_unknown_domains_and_files_no_target_compiles_fail(self):
    files = {
        "lib/rtb/hlo/scan.cc": '#include "rtb/tools/x.h"\n',
        "lib/rtb/newdomain/a.cc": "",
        "fuzz/new_fuzz.cc": "",
    }
    problems = check_includes(self.layering, files)
    self.assertEqual(len(problems), 3, problems)
    self.assertIn("fuzz/new_fuzz.cc: no target of layering.tsv compiles it", problems[0])
    self.assertIn("lib/rtb/hlo/scan.cc:1: includes rtb/tools/, which is no domain", problems[1])
    self.assertIn("lib/rtb/newdomain/a.cc: no target", problems[2])


# `nm -A -P` listings as GNU nm prints them (LLVM's differ in the value and size fields only).
K8S_NM = """\
/b/librtb_k8s.a[yaml.cc.o]: _ZN3rtb3k8s4yaml4emitEv T 0 10
/b/librtb_k8s.a[yaml.cc.o]: _ZN3rtb5ErrorC1Ev U
/b/librtb_k8s.a[yaml.cc.o]: _ZNSt6vectorIiE9push_backEv W 0 20
/b/librtb_k8s.a[yaml.cc.o]: _ZN4YAML4NodeC1Ev U
/b/librtb_k8s.a[shell.cc.o]: _ZN3rtb3k8s4yaml4emitEv U
/b/librtb_k8s.a[shell.cc.o]: .LC0 r 0
"""
BASE_NM = """\
/b/librtb_base.a[error.cc.o]: _ZN3rtb5ErrorC1Ev T 0 10
/b/librtb_base.a[error.cc.o]: memcpy U
"""
HLO_NM = """\
/b/librtb_hlo.a[scan.cc.o]: _ZN3rtb5ErrorC1Ev U
/b/librtb_hlo.a[scan.cc.o]: _ZN3rtb3hlo4scanEv T 0 10
/b/librtb_hlo.a[scan.cc.o]: _ZNSt6vectorIiE9push_backEv U
"""
BENCH_NM = """\
/b/librtb_bench.a[render.cc.o]: _ZN3rtb3k8s4yaml4emitEv U 0 0
/b/librtb_bench.a[render.cc.o]: _ZN3rtb5render3runEv T 0 10
"""


class SymbolCheckTest(unittest.TestCase):

  def setUp(self):
    self.layering = parse_layering(SAMPLE)
    self.listings = {"base": BASE_NM, "k8s": K8S_NM, "hlo": HLO_NM, "bench": BENCH_NM}

  def test_nm_listings_are_read(self):
    symbols = parse_nm(K8S_NM)
    self.assertEqual(symbols.strong, {"_ZN3rtb3k8s4yaml4emitEv"})
    self.assertEqual(symbols.defined,
                     {"_ZN3rtb3k8s4yaml4emitEv", "_ZNSt6vectorIiE9push_backEv", ".LC0"})
    self.assertEqual(
        symbols.undefined, {
            "_ZN3rtb5ErrorC1Ev": {"yaml.cc.o"},
            "_ZN4YAML4NodeC1Ev": {"yaml.cc.o"},
            "_ZN3rtb3k8s4yaml4emitEv": {"shell.cc.o"},
        })

  def test_uses_of_domains_below_pass_and_system_and_weak_symbols_are_no_ones(self):
    # k8s and hlo use base, bench uses k8s; memcpy, YAML and the weak std::vector code are
    # defined by none of the archives (strongly), so they are the system's or a library's.
    problems, uses = check_symbols(self.layering, self.listings)
    self.assertEqual(problems, [])
    self.assertEqual(uses, 3)

  def test_a_call_into_a_domain_one_may_not_use_fails(self):
    self.listings["hlo"] = HLO_NM + "/b/librtb_hlo.a[analysis.cc.o]: _ZN3rtb3k8s4yaml4emitEv U\n"
    problems, _ = check_symbols(self.layering, self.listings)
    self.assertEqual(len(problems), 1, problems)
    self.assertRegex(
        problems[0], r"^/b/librtb_hlo.a\(analysis.cc.o\): uses .*emit.* "
        r"\[_ZN3rtb3k8s4yaml4emitEv\], defined in lib/rtb/k8s, but hlo may use only base, hlo$")

  def test_a_call_upwards_fails_too(self):
    self.listings["base"] = BASE_NM + "/b/librtb_base.a[json.cc.o]: _ZN3rtb5render3runEv U\n"
    problems, _ = check_symbols(self.layering, self.listings)
    self.assertEqual(len(problems), 1, problems)
    self.assertIn("defined in lib/rtb/bench, but base may use only base", problems[0])


# --- the repository, as the build declares it ------------------------------------------------------


class RepositoryLayeringTest(unittest.TestCase):
  layering: Layering
  source_dir: str

  @classmethod
  def setUpClass(cls):
    missing = [name for name in ("RTB_LAYERING", "RTB_SOURCE_DIR") if not os.environ.get(name)]
    if missing:  # a failure, not a skip: ctest always sets them, and a skip would pass
      raise AssertionError(f"{', '.join(missing)} not set: run this test through ctest")
    with open(os.environ["RTB_LAYERING"], encoding="utf-8") as file:
      cls.layering = parse_layering(file.read())
    cls.source_dir = os.environ["RTB_SOURCE_DIR"]

  def test_every_domain_folder_is_a_domain_of_the_build(self):
    folders = sorted(name for name in os.listdir(os.path.join(self.source_dir, "lib", "rtb"))
                     if os.path.isdir(os.path.join(self.source_dir, "lib", "rtb", name)))
    self.assertEqual(self.layering.domains(), folders)

  def test_includes_follow_the_layering(self):
    files = source_files(self.source_dir)
    self.assertTrue(any(path.startswith("fuzz/") for path in files))
    self.assertGreater(sum(len(list(includes_of(text))) for text in files.values()), 100)
    problems = check_includes(self.layering, files)
    if problems:
      self.fail("the layering is broken:\n" + "\n".join(problems))

  def test_each_archive_uses_only_domains_it_may(self):
    nm = os.environ.get("RTB_NM") or "nm"
    listings = {}
    for domain, target in self.layering.domain_targets.items():
      self.assertTrue(os.path.isfile(target.archive), f"{target.archive}: not built")
      result = subprocess.run([nm, "-A", "-P", target.archive], capture_output=True, text=True)
      self.assertEqual(result.returncode, 0, f"{nm} -A -P {target.archive}: {result.stderr}")
      listings[domain] = result.stdout
    problems, uses = check_symbols(self.layering, listings)
    if problems:
      self.fail("the layering is broken:\n" + "\n".join(problems))
    # Every domain but base calls into base: a check that saw no use at all read nothing.
    self.assertGreaterEqual(uses, len(listings) - 1)


if __name__ == "__main__":
  unittest.main()
