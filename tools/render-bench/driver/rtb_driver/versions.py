"""What code a run imported (BENCH_SUMMARY "versions"), so that two arms of an A/B can be shown to
have run the same Tunix, MaxText and JAX: each package's installed version, and a short hash of
the file of every module the driver calls into (an image built from a branch often keeps the
package version of its base while its code differs).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import sys
from types import ModuleType
from typing import Any, Dict, Iterable, Mapping, Optional

# The packages whose versions a run reports, by import name.
PACKAGES = ("tunix", "maxtext", "jax", "jaxlib", "libtpu", "numpy")
# The length of a file's hash in the record (hex digits of its SHA-256).
HASH_DIGITS = 12


def package_version(name: str, modules: Mapping[str, ModuleType]) -> Optional[str]:
  """The installed distribution's version of import package `name`, else its __version__; None
  when the run did not import it."""
  module = modules.get(name)
  if module is None:
    return None
  try:
    distributions = importlib.metadata.packages_distributions().get(name, [])
  except Exception:  # pylint: disable=broad-except  # metadata of a broken install: use __version__
    distributions = []
  for distribution in distributions:
    try:
      return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
      continue
  version = getattr(module, "__version__", None)
  return str(version) if version is not None else "unknown"


def file_hash(module: ModuleType) -> Optional[str]:
  """The first HASH_DIGITS hex digits of the SHA-256 of a module's source file, None without
  one."""
  path = getattr(module, "__file__", None)
  if not path:
    return None
  try:
    with open(path, "rb") as handle:
      return hashlib.sha256(handle.read()).hexdigest()[:HASH_DIGITS]
  except OSError:
    return None


def module_of(value: Any, modules: Mapping[str, ModuleType]) -> Optional[ModuleType]:
  """The module an object (a module, a class, a function or an instance) comes from."""
  if isinstance(value, ModuleType):
    return value
  name = getattr(value, "__module__", None) or getattr(type(value), "__module__", None)
  return modules.get(name) if name else None


def imported_versions(called: Iterable[Any] = (),
                      modules: Optional[Mapping[str, ModuleType]] = None) -> Dict[str, Any]:
  """{"packages": {name: version or None}, "modules": {module: hash}, "code": one hash of all
  the module hashes}. `called`: the modules (or objects of the modules) the driver called into;
  None entries are skipped."""
  modules = sys.modules if modules is None else modules
  found: Dict[str, Optional[str]] = {}
  for value in called:
    module = module_of(value, modules) if value is not None else None
    if module is not None and module.__name__ not in found:
      found[module.__name__] = file_hash(module)
  hashes = {name: found[name] for name in sorted(found)}
  digest = hashlib.sha256()
  for name, value in hashes.items():
    digest.update(f"{name}={value}\n".encode("utf-8"))
  packages = {name: package_version(name, modules) for name in PACKAGES}
  return {
      "packages": packages, "modules": hashes,
      "code": digest.hexdigest()[:HASH_DIGITS] if hashes else None
  }
