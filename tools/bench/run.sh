#!/usr/bin/env bash
# run.sh: run the benchmarks one at a time, saying which one runs, how far
# along the run is and how long each took, and print their `bench <name>
# <value> <unit>` figures as they come. `make bench` calls it.
#
#   tools/bench/run.sh [regexp]
#
# regexp (default: every benchmark) selects benchmarks by name, as go test
# -bench does: `make bench BENCH=Cost` runs BenchmarkCost only. The full
# output of every benchmark goes to build/bench.log; the exit code is 1 when
# any benchmark failed (each one still runs), 3 when none failed but one
# left its wall-clock figures unmeasured because other processes were using
# the machine (it prints `bench <figure> not measured: <why>` instead).
set -uo pipefail

pattern=${1:-.}
go=${GO:-go}
log=build/bench.log
mkdir -p build
: >"$log"

# `go test -list` prints the matching names of each package (tests,
# benchmarks, fuzz targets, examples, in that order), then its "ok
# <package>" line; a package that does not build says FAIL.
list=$("$go" test -run '^$' -list "$pattern" ./... 2>&1) || { echo "$list" >&2; exit 1; }
todo=()
names=()
while IFS= read -r line; do
  case $line in
    Benchmark*) names+=("$line") ;;
    ok*)
      pkg=$(awk '{print $2}' <<<"$line")
      for n in "${names[@]}"; do todo+=("$pkg $n"); done
      names=()
      ;;
    FAIL* | "?"*) names=() ;;
    *) ;; # a test, fuzz target or example listed beside the benchmarks
  esac
done <<<"$list"
if [[ ${#todo[@]} -eq 0 ]]; then
  echo "bench: no benchmark matches '$pattern'" >&2
  exit 2
fi

failed=()
unmeasured=()
one=$(mktemp)
trap 'rm -f "$one"' EXIT
start=$SECONDS
i=0
for item in "${todo[@]}"; do
  i=$((i + 1))
  pkg=${item% *} name=${item#* }
  echo "== [$i/${#todo[@]}] $name (${pkg#github.com/shardloop/shardloop/}) at $(date -u +%H:%M:%S), $(((SECONDS - start) / 60)) min in"
  t0=$SECONDS
  "$go" test -run '^$' -bench "^${name}\$" -benchtime 1x -timeout 60m "$pkg" 2>&1 | tee "$one" |
    grep --line-buffered -E '^(bench |--- FAIL|FAIL|panic)'
  if [[ ${PIPESTATUS[0]} -ne 0 ]]; then
    failed+=("$name")
  elif grep -q '^bench [a-z0-9_]* not measured: ' "$one"; then
    unmeasured+=("$name")
  fi
  cat "$one" >>"$log"
  echo "   $name took $((SECONDS - t0)) s"
done
echo "== ${#todo[@]} benchmarks in $(((SECONDS - start) / 60)) min; full output in $log"
if [[ ${#unmeasured[@]} -gt 0 ]]; then
  # A wall-clock figure timed while other processes took the CPUs is not
  # comparable with a quiet run's; the benchmark printed why instead.
  echo "bench: not measured, the machine was busy: ${unmeasured[*]}" >&2
fi
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "bench: failed: ${failed[*]}" >&2
  exit 1
fi
if [[ ${#unmeasured[@]} -gt 0 ]]; then
  exit 3
fi
