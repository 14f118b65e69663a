#!/usr/bin/env python3
"""Builds the one-file bench driver that render-bench embeds, from the rtb_driver package.

The pod gets the driver inside the JobSet's client command (one `kubectl apply`, no image
rebuild), so it must be one readable Python file: `render-bench --print-driver` prints it, the
client writes it verbatim (or gzip + base64 when it is too large for one argument) and the
preflight's docker recipe mounts it. A zipapp would not survive any of these as text.

The file is the package's modules in dependency order, each under a banner
`# ---- module: NAME ----`, with:
  - one module docstring (the package's), one `from __future__ import annotations`, and the
    modules' top-level imports of other packages hoisted and deduplicated;
  - the intra-package imports (`from .x import a, b`) dropped: every name lives in one namespace;
  - each module's own docstring kept as comment lines under its banner;
  - the data files the package reads through `embedded.embedded_text` carried inline (the
    `EMBEDDED_FILES = {}` assignment of module `embedded` is filled in);
  - `if __name__ == "__main__": sys.exit(main())` at the end.
It refuses what would not survive the flattening: a top-level name defined in two modules (or a
definition that shadows another module's import), an intra-package import of a name the module
does not define, `import .x` style qualified access, and an import cycle. The output has no
timestamp or path in it: two builds of the same sources give the same bytes.

With `--packed FILE` it also writes the same text packed as a client script carries it: gzip
(best compression, no name or time in the header, so the bytes are reproducible too), then base64
in lines of 76 characters, each ending in a newline. render-bench embeds that form beside the text
and puts it in a client script as it is, so a render neither compresses nor encodes the driver.

Usage: amalgamate.py PACKAGE_DIR OUTPUT [--embed FILE]... [--packed FILE]   (OUTPUT "-" is stdout)
Exit codes: 0 written, 2 the package cannot be flattened (one line on stderr says why).
"""

from __future__ import annotations

import argparse
import ast
import base64
import gzip
import os
import sys
from typing import Dict, List, Optional, Sequence, Set, Tuple

BANNER = "# ---- module: {} ----"
EMBED_MODULE = "embedded"
EMBED_NAME = "EMBEDDED_FILES"
# Modules that are not part of the amalgamation: the package marker (its docstring heads the file)
# and the `python3 -m rtb_driver` entry point (the file's own __main__ block replaces it).
SKIPPED = ("__init__", "__main__")


class AmalgamationError(Exception):
  """The package cannot be flattened into one file; the message says where and why."""


class Module:
  """One source module: its text, what it imports from the package and from outside, and the
  top-level names it defines."""

  def __init__(self, name: str, path: str, text: str):
    self.name = name
    self.path = path
    self.text = text
    try:
      self.tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
      raise AmalgamationError(f"{path}:{exc.lineno}: {exc.msg}") from None
    self.local_imports: Dict[str, List[str]] = {}  # module -> names
    self.external_imports: List[Tuple[int, int, str]] = []  # (first line, last line, text)
    self.dropped_lines: Set[int] = set()  # 1-based lines left out of the output
    self.defined: Dict[str, int] = {}  # top-level name -> line
    self.imported: Dict[str, str] = {}  # top-level name -> the import statement binding it
    self.docstring: Optional[str] = None
    self._read()

  def _lines_of(self, node: ast.stmt) -> range:
    first = node.lineno
    last = node.end_lineno or first
    return range(first, last + 1)

  def _read(self) -> None:
    body = self.tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(
        body[0].value, ast.Constant) and (isinstance(body[0].value.value, str)):
      self.docstring = body[0].value.value
      self.dropped_lines.update(self._lines_of(body[0]))
      body = body[1:]
    for node in body:
      where = f"{self.path}:{node.lineno}"
      if isinstance(node, ast.ImportFrom) and node.level:
        if node.level != 1 or not node.module:
          raise AmalgamationError(f"{where}: `from . import x` keeps module-qualified names, which "
                                  "one file cannot have; import the names (`from .x import a`)")
        if any(alias.asname for alias in node.names) or any(
            alias.name == "*" for alias in node.names):
          raise AmalgamationError(f"{where}: an intra-package import must name its names as they "
                                  "are (no `as`, no `*`)")
        self.local_imports.setdefault(node.module, []).extend(alias.name for alias in node.names)
        self.dropped_lines.update(self._lines_of(node))
      elif isinstance(node, ast.ImportFrom) and node.module == "__future__":
        self.dropped_lines.update(self._lines_of(node))
      elif isinstance(node, (ast.Import, ast.ImportFrom)):
        text = ast.get_source_segment(self.text, node) or ""
        self.external_imports.append((node.lineno, node.end_lineno or node.lineno, text))
        self.dropped_lines.update(self._lines_of(node))
        for alias in node.names:
          bound = alias.asname or alias.name.split(".")[0]
          self.imported[bound] = text
      else:
        for name in _bound_names(node):
          if name in self.defined:
            continue  # a module may rebind its own name (e.g. a conditional definition)
          self.defined[name] = node.lineno

  def body_text(self) -> str:
    """The module's source without its docstring, its imports and its leading blank lines."""
    lines = self.text.splitlines()
    kept = [line for number, line in enumerate(lines, 1) if number not in self.dropped_lines]
    while kept and not kept[0].strip():
      kept.pop(0)
    while kept and not kept[-1].strip():
      kept.pop()
    return "\n".join(kept) + "\n"


def _bound_names(node: ast.stmt) -> List[str]:
  """The names a top-level statement binds."""
  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
    return [node.name]
  targets: List[ast.expr] = []
  if isinstance(node, ast.Assign):
    targets = list(node.targets)
  elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
    targets = [node.target]
  elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
    names: List[str] = []
    for child in ast.iter_child_nodes(node):
      if isinstance(child, ast.stmt):
        names.extend(_bound_names(child))
    return names
  names = []
  for target in targets:
    for leaf in ast.walk(target):
      if isinstance(leaf, ast.Name):
        names.append(leaf.id)
  return names


def read_package(package_dir: str) -> Tuple[str, Dict[str, Module]]:
  """(the package docstring, its modules by name)."""
  init_path = os.path.join(package_dir, "__init__.py")
  if not os.path.isfile(init_path):
    raise AmalgamationError(f"{package_dir}: not a package (no __init__.py)")
  with open(init_path, encoding="utf-8") as handle:
    docstring = ast.get_docstring(ast.parse(handle.read(), filename=init_path), clean=False)
  if not docstring:
    raise AmalgamationError(f"{init_path}: the package needs a docstring (it heads the file)")
  modules = {}
  for entry in sorted(os.listdir(package_dir)):
    name, extension = os.path.splitext(entry)
    if extension != ".py" or name in SKIPPED:
      continue
    path = os.path.join(package_dir, entry)
    with open(path, encoding="utf-8") as handle:
      modules[name] = Module(name, path, handle.read())
  if "main" not in modules:
    raise AmalgamationError(f"{package_dir}: no module `main` (the file ends by calling main())")
  return docstring, modules


def dependency_order(modules: Dict[str, Module]) -> List[str]:
  """Modules after everything they import; ties in name order, so the order is reproducible."""
  for module in modules.values():
    for source, names in module.local_imports.items():
      if source not in modules:
        raise AmalgamationError(f"{module.path}: imports from .{source}, which is not a module "
                                "of the package")
      for name in names:
        if name not in modules[source].defined:
          raise AmalgamationError(f"{module.path}: imports {name} from .{source}, which does not "
                                  "define it at its top level")
  order: List[str] = []
  placed: Set[str] = set()
  while len(order) < len(modules):
    ready = [
        name for name in sorted(modules)
        if name not in placed and all(source in placed for source in modules[name].local_imports)
    ]
    if not ready:
      cycle = sorted(name for name in modules if name not in placed)
      raise AmalgamationError("import cycle among the modules " + ", ".join(cycle))
    order.append(ready[0])
    placed.add(ready[0])
  return order


def check_names(modules: Dict[str, Module]) -> None:
  """One namespace: no name defined twice, none shadowing another module's import."""
  owner: Dict[str, str] = {}
  for name in sorted(modules):
    for symbol, line in modules[name].defined.items():
      if symbol in owner:
        raise AmalgamationError(f"{modules[name].path}:{line}: {symbol} is also defined in "
                                f"{modules[owner[symbol]].path}; the one-file driver has one "
                                "namespace")
      owner[symbol] = name
  imports: Dict[str, Tuple[str, str]] = {}  # bound name -> (statement, module)
  for name in sorted(modules):
    for symbol, statement in modules[name].imported.items():
      if symbol in owner:
        raise AmalgamationError(f"{modules[name].path}: `{statement}` binds {symbol}, which "
                                f"{modules[owner[symbol]].path} defines")
      seen = imports.get(symbol)
      if seen is not None and seen[0] != statement and not _same_binding(
          seen[0], statement, symbol):
        raise AmalgamationError(f"{modules[name].path}: `{statement}` binds {symbol}, which "
                                f"{modules[seen[1]].path} binds with `{seen[0]}`")
      imports.setdefault(symbol, (statement, name))


def _same_binding(first: str, second: str, symbol: str) -> bool:
  """Whether two import statements bind `symbol` to the same object."""

  def source(statement: str) -> Optional[str]:
    node = ast.parse(statement).body[0]
    if isinstance(node, ast.Import):
      for alias in node.names:
        if (alias.asname or alias.name.split(".")[0]) == symbol:
          return alias.name if alias.asname else alias.name.split(".")[0]
    elif isinstance(node, ast.ImportFrom):
      for alias in node.names:
        if (alias.asname or alias.name) == symbol:
          return f"{node.module}.{alias.name}"
    return None

  return source(first) == source(second) and source(first) is not None


def hoisted_imports(modules: Dict[str, Module], order: Sequence[str]) -> List[str]:
  """The modules' imports of other packages, each once: the standard library's `import x`
  lines, then `from x import ...` merged per source module, then the third-party imports."""
  plain: Set[str] = set()
  from_names: Dict[str, Set[str]] = {}
  for name in order:
    for _, _, statement in modules[name].external_imports:
      node = ast.parse(statement).body[0]
      if isinstance(node, ast.Import):
        for alias in node.names:
          plain.add(f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else ""))
      elif isinstance(node, ast.ImportFrom) and node.module:
        for alias in node.names:
          from_names.setdefault(
              node.module, set()).add(alias.name + (f" as {alias.asname}" if alias.asname else ""))
  third_party = sorted(line for line in plain if _is_third_party(line))
  standard = sorted(line for line in plain if not _is_third_party(line))
  merged = [
      f"from {source} import {', '.join(sorted(names))}"
      for source, names in sorted(from_names.items())
  ]
  out = standard + merged
  if third_party:
    out += [""] + third_party
  return out


def _is_third_party(statement: str) -> bool:
  return statement.split()[1].split(".")[0] in ("numpy",)


def embed_files(module: Module, files: Sequence[str]) -> str:
  """The `embedded` module's body with EMBEDDED_FILES = {name: text} filled in."""
  body = module.body_text()
  empty = f"{EMBED_NAME}: Dict[str, str] = {{}}"
  if body.count(empty) != 1:
    raise AmalgamationError(f"{module.path}: needs exactly one line `{empty}` for the build to "
                            "fill in")
  entries = []
  for path in files:
    with open(path, encoding="utf-8") as handle:
      text = handle.read()
    pieces = "\n".join("        " + repr(line) for line in text.splitlines(keepends=True))
    entries.append(f"    {os.path.basename(path)!r}: (\n{pieces}),")
  filled = f"{EMBED_NAME}: Dict[str, str] = {{\n" + "\n".join(entries) + "\n}"
  return body.replace(empty, filled)


def amalgamate(package_dir: str, embed: Sequence[str] = ()) -> str:
  """The one-file driver's text."""
  docstring, modules = read_package(package_dir)
  order = dependency_order(modules)
  check_names(modules)
  if embed and EMBED_MODULE not in modules:
    raise AmalgamationError(f"{package_dir}: files to embed but no module `{EMBED_MODULE}`")
  package = os.path.basename(os.path.normpath(package_dir))
  parts = [
      "#!/usr/bin/env python3\n",
      '"""' + docstring + '"""\n',
      f"# Built from the {package} package by amalgamate.py: edit the package, not this file.\n",
      "from __future__ import annotations\n",
      "\n".join(hoisted_imports(modules, order)) + "\n",
  ]
  for name in order:
    module = modules[name]
    banner = BANNER.format(name)
    doc = ""
    if module.docstring:
      doc = "".join(
          f"# {line}".rstrip() + "\n" for line in module.docstring.strip("\n").splitlines())
    body = embed_files(module, embed) if name == EMBED_MODULE else module.body_text()
    parts.append(f"\n{banner}\n{doc}\n{body}")
  parts.append('\nif __name__ == "__main__":\n  sys.exit(main())\n')
  text = "\n".join(parts)
  try:
    compile(text, "bench_driver.py", "exec")
  except SyntaxError as exc:
    raise AmalgamationError(f"the amalgamation does not compile: line {exc.lineno}: "
                            f"{exc.msg}") from None
  return text


def gzip_bytes(text: str) -> bytes:
  """`text` as UTF-8, gzip-compressed at level 9 with mtime 0 (`gzip -dc` reads it back)."""
  return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def packed_bytes(text: str) -> bytes:
  """gzip_bytes(text) in base64, lines of 76 characters each ending in a newline: what
  rtb::base64_encode writes, and what the client script's arguments hold (`base64 -d` reads it)."""
  return base64.encodebytes(gzip_bytes(text))


def write_atomically(path: str, data: bytes) -> None:
  """Writes through a temporary file in the same directory, then renames it over `path`."""
  directory = os.path.dirname(os.path.abspath(path))
  temporary = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
  try:
    with open(temporary, "wb") as handle:
      handle.write(data)
    os.replace(temporary, path)
  finally:
    if os.path.exists(temporary):
      os.unlink(temporary)


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description="Build the one-file bench driver.")
  parser.add_argument("package_dir")
  parser.add_argument("output", help="the file to write, or - for stdout")
  parser.add_argument("--embed", action="append", default=[], metavar="FILE",
                      help="a data file the package reads through embedded.embedded_text")
  parser.add_argument("--packed", metavar="FILE",
                      help="also write the driver gzip-compressed and base64-encoded to FILE")
  options = parser.parse_args(argv)
  try:
    text = amalgamate(options.package_dir, options.embed)
    if options.output == "-":
      sys.stdout.write(text)
    else:
      write_atomically(options.output, text.encode("utf-8"))
    if options.packed:
      write_atomically(options.packed, packed_bytes(text))
  except (AmalgamationError, OSError) as exc:
    print(f"amalgamate.py: {exc}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
