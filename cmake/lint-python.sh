#!/usr/bin/env bash
# `make lint`: every Python file of the repository through three checks, each from a Debian package
# (the Makefile's LINT_PACKAGES):
#   pyflakes3      unused imports and variables, undefined names, f-strings without fields
#   yapf3 --diff   the format: .style.yapf at the root, tests/cli/.style.yapf there (yapf takes the
#                  nearest one above each file); prints what `yapf3 -i FILE` would change
#   mypy           types, configured by mypy.ini
# The files are the ones git tracks plus the untracked ones it does not ignore, so a new file is
# checked before it is added. Prints one line per phase and a final verdict; exits 1 on any finding.
# Needs a git checkout (the file list comes from git).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$PWD
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "lint: $root is not a git checkout; the file list comes from git ls-files" >&2
  exit 2
fi

files=()
while IFS= read -r -d '' file; do
  [ -f "$file" ] && files+=("$file")  # git still lists a tracked file deleted from the work tree
done < <(git ls-files -z --cached --others --exclude-standard -- '*.py' | sort -zu)
if [ ${#files[@]} -eq 0 ]; then
  echo "lint: no Python files" >&2
  exit 1
fi
echo "lint: ${#files[@]} Python files"

failed=()
phase() {  # phase NAME STATUS
  if [ "$2" -eq 0 ]; then
    echo "lint: $1: ok"
  else
    echo "lint: $1: FAILED"
    failed+=("$1")
  fi
}

pyflakes3 "${files[@]}"
phase pyflakes3 $?

# yapf3 exits non-zero when --diff finds a change; an empty diff with a zero status is a pass.
yapf3 --diff --parallel "${files[@]}"
phase "yapf3 --diff" $?

# mypy runs once per group: the folder a module is imported from by plain name (tests/cli for
# `import cli_common`), which is the file's folder, or for a file inside a package (a folder with
# __init__.py, like the driver's) the folder above the outermost package, so the package is checked
# as one (`rtb_driver.settings`). That folder is the group's MYPYPATH, from which
# explicit_package_bases names each module.
declare -A group_of=()
for file in "${files[@]}"; do
  dir=$(dirname "$file")
  while [ "$dir" != . ] && [ -f "$dir/__init__.py" ]; do dir=$(dirname "$dir"); done
  group_of[$file]=$dir
done
mapfile -t groups < <(printf '%s\n' "${group_of[@]}" | sort -u)
mypy_status=0
for group in "${groups[@]}"; do
  members=()
  for file in "${files[@]}"; do
    [ "${group_of[$file]}" = "$group" ] && members+=("$file")
  done
  echo "lint: mypy $group/ (${#members[@]} files)"
  MYPYPATH="$root/$group" mypy --config-file "$root/mypy.ini" -- "${members[@]}" ||
    mypy_status=1
done
phase mypy $mypy_status

if [ ${#failed[@]} -eq 0 ]; then
  echo "lint: all ${#files[@]} Python files pass pyflakes3, yapf3 and mypy"
else
  summary=$(printf '%s, ' "${failed[@]}")
  echo "lint: FAILED: ${summary%, } (their findings are above)"
  exit 1
fi
