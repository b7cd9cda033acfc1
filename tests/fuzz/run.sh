#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each, JOBS of them at a time.
#
#   tests/fuzz/run.sh [SECONDS] [BUILD_DIR] [JOBS]   (defaults: 60, build/fuzz, 2)
#
# Build the targets first: cmake --workflow --preset fuzz (or asan, whose
# build holds them with edge coverage only: tests/fuzz/run.sh 30 build/asan). Each target
# starts from a scratch copy of its committed seeds (tests/fuzz/corpus/NAME),
# so new inputs never land in the repository, and uses NAME.dict beside this
# script if there is one. Prints one line per target with its executions;
# exits non-zero if any target crashed, hung or leaked, naming it, the
# crashing input and the log (both kept in the scratch directory).
#
# To replay an input: build/fuzz/tests/fuzz/NAME INPUT (subscribe_fuzz and
# admin_fuzz print each operation with HOURGLASS_FUZZ_TRACE=1). A crash,
# once fixed, goes into corpus/NAME as regression_<what> beside a test in
# tests/.
set -euo pipefail

seconds="${1:-60}"
build_dir="${2:-build/fuzz}"
parallel="${3:-2}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
targets=(keys_fuzz timing_wheel_fuzz validation_fuzz subscribe_fuzz token_file_fuzz
         admin_fuzz cron_fuzz)

scratch="$(mktemp -d "${TMPDIR:-/tmp}/hourglass-fuzz.XXXXXX")"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Fuzzes one target; prints its line; returns non-zero if it failed.
fuzz_one() {
  local target="$1"
  local binary="${build_dir}/tests/fuzz/${target}"
  if [[ ! -x "${binary}" ]]; then
    echo "${target}: no binary at ${binary} (build it: cmake --workflow --preset fuzz, or asan)" >&2
    return 1
  fi
  local work="${scratch}/${target}"
  mkdir -p "${work}/corpus" "${work}/artifacts"
  cp -R "${here}/corpus/${target}/." "${work}/corpus/" 2>/dev/null || true
  local args=(-max_total_time="${seconds}" -timeout=30 -rss_limit_mb=4096
              -print_final_stats=1 -artifact_prefix="${work}/artifacts/")
  if [[ -f "${here}/${target}.dict" ]]; then
    args+=(-dict="${here}/${target}.dict")
  fi
  local status=0
  "${binary}" "${args[@]}" "${work}/corpus" >"${work}/log" 2>&1 || status=$?
  local executions corpus_size crash
  executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "${work}/log" | tail -n 1)"
  corpus_size="$(find "${work}/corpus" -type f | wc -l)"
  if [[ ${status} -eq 0 ]]; then
    printf '%-18s ok       %10s executions in %ss, corpus %s inputs\n' \
      "${target}" "${executions:-?}" "${seconds}" "${corpus_size}"
    return 0
  fi
  crash="$(find "${work}/artifacts" -type f | head -n 1)"
  printf '%-18s FAILED   exit %s after %s executions; input: %s; log: %s\n' \
    "${target}" "${status}" "${executions:-?}" "${crash:-none}" "${work}/log"
  grep -E 'ERROR|FUZZ_CHECK|SUMMARY|runtime error' "${work}/log" | head -n 5 || true
  return 1
}

# At most `parallel` targets at once; a target's result is its exit status.
declare -A pid_of
failed=()
for target in "${targets[@]}"; do
  while (( $(jobs -rp | wc -l) >= parallel )); do wait -n || true; done
  fuzz_one "${target}" &
  pid_of["${target}"]=$!
done
for target in "${targets[@]}"; do
  wait "${pid_of[${target}]}" || failed+=("${target}")
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz targets failed: ${failed[*]} (inputs and logs kept in ${scratch})" >&2
  exit 1
fi
rm -rf "${scratch}"
