#!/usr/bin/env bash
# Runs the libFuzzer targets of a fuzz build for a fixed time each.
#
#   fuzz/run.sh BUILD_DIR SECONDS [TARGET...]
#
# BUILD_DIR is a build of the `fuzzers` target (cmake --preset asan; cmake --build build/asan
# --target fuzzers). TARGETs are names like dryrun_fuzz or dryrun (default: every fuzz/*_fuzz.cc).
# Each target runs for SECONDS (-max_total_time) on a working corpus BUILD_DIR/fuzz-corpus/<name>,
# seeded by copying its seed files from testdata/ and fuzz/seeds/ (the sources are never written),
# with its dictionary fuzz/dicts/<name>.dict; crash, leak, timeout and OOM inputs go to
# BUILD_DIR/fuzz-artifacts/<name>/, the fuzzer's output to BUILD_DIR/fuzz-logs/<name>.log.
# FUZZ_PARALLEL=N runs N targets at a time (default 1).
#
# Prints one line per target and exits 0 when no target found anything, 1 when one did (naming
# the artifact), 2 on a usage error or a missing binary.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

if [[ $# -lt 2 || ! $2 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 BUILD_DIR SECONDS [TARGET...]" >&2
  exit 2
fi
build=$(cd "$1" 2>/dev/null && pwd) || {
  echo "$0: no build directory $1" >&2
  exit 2
}
seconds=$2
shift 2
parallel=${FUZZ_PARALLEL:-1}

# Seed files and directories of each target, relative to the source root. Every target also gets
# testdata/bad (hostile inputs for all tools).
seeds_of() {
  case $1 in
    dryrun) echo testdata/launch_dryrun.txt testdata/launch_dryrun_v5p.txt \
      testdata/trainer_no_proxy.txt testdata/diff_not_jobset.yaml ;;
    shell) echo fuzz/seeds/shell ;;
    flags) echo fuzz/seeds/flags ;;
    hlo | hlo_pieces) echo testdata/hlo ;;
    hlo_proto) echo fuzz/seeds/hlo_proto ;;
    profile) echo fuzz/seeds/profile ;;
    configlog) echo testdata/configlog_*.log ;;
    memlog) echo testdata/memlog_*.log ;;
    steplog) echo testdata/bench_logs ;;
    npy) echo testdata/payload_numpy_* fuzz/seeds/npy ;;
    routing) echo testdata/routing_*.csv data/routing ;;
  esac
}

# Longest input per target: large enough for a whole seed of the kind (DRY_RUNs are ~40 KB),
# small enough to keep the targets fast.
max_len_of() {
  case $1 in
    dryrun | hlo | hlo_pieces | hlo_proto | profile | configlog | memlog) echo 65536 ;;
    steplog) echo 32768 ;;
    npy | routing) echo 16384 ;;
    *) echo 4096 ;;
  esac
}

if [[ $# -eq 0 ]]; then
  set -- $(cd "$here" && ls *_fuzz.cc | sed 's/_fuzz\.cc$//')
fi
targets=()
for target in "$@"; do
  target=${target%_fuzz}
  if [[ ! -x $build/bin/${target}_fuzz ]]; then
    echo "$0: $build/bin/${target}_fuzz is not built (cmake --build $build --target fuzzers)" >&2
    exit 2
  fi
  targets+=("$target")
done

# Copies the seeds of `target` into its working corpus (names prefixed by where they come from,
# so files of different seed directories never collide). Files already there are kept.
seed_corpus() {
  local target=$1 corpus=$2 seed file
  mkdir -p "$corpus"
  for seed in $(cd "$root" && seeds_of "$target") testdata/bad; do
    [[ -e $root/$seed ]] || continue
    while IFS= read -r -d '' file; do
      local name=${file#"$root"/}
      cp -n "$file" "$corpus/seed-${name//\//_}"
    done < <(find "$root/$seed" -type f -print0)
  done
}

# Runs one target; writes its one-line result to $build/fuzz-logs/<target>.result.
run_target() {
  local target=$1 name=${1}_fuzz
  local corpus=$build/fuzz-corpus/$name artifacts=$build/fuzz-artifacts/$name
  local log=$build/fuzz-logs/$name.log result=$build/fuzz-logs/$name.result
  mkdir -p "$artifacts" "$build/fuzz-logs"
  seed_corpus "$target" "$corpus"
  local marker=$build/fuzz-logs/$name.start
  touch "$marker"
  local dict=()
  [[ -f $here/dicts/$target.dict ]] && dict=(-dict="$here/dicts/$target.dict")
  local status=0
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
    "$build/bin/$name" "$corpus" "${dict[@]}" -max_total_time="$seconds" \
    -max_len="$(max_len_of "$target")" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1 || status=$?
  local runs rate
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  local files
  files=$(find "$corpus" -type f | wc -l)
  local found
  found=$(find "$artifacts" -type f -newer "$marker" \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | head -1)
  if [[ $status -ne 0 || -n $found ]]; then
    local what
    what=$(sed -n 's/^SUMMARY: //p' "$log" | head -1 | cut -c1-120)
    echo "$name: FAILED (exit $status${what:+, $what}): ${found:-no artifact} (log: $log)" >"$result"
    return 1
  fi
  echo "$name: ok: ${seconds}s, ${runs:-?} runs, ${rate:-?} exec/s, corpus $files files" >"$result"
}

failed=0
running=0
for target in "${targets[@]}"; do
  run_target "$target" &
  running=$((running + 1))
  if [[ $running -ge $parallel ]]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [[ $running -gt 0 ]]; do
  wait -n || failed=1
  running=$((running - 1))
done
for target in "${targets[@]}"; do
  cat "$build/fuzz-logs/${target}_fuzz.result"
done
exit $failed
