#!/usr/bin/env bash
# under-load.sh: run a command beside N busy processes, as a developer's
# machine often is. `make test-under-load` runs `make test` this way.
#
#   tools/load/under-load.sh [N] -- command [args...]
#
# N (default 6) processes spin `sh -c 'while :; do :; done'` until the
# command ends; they are killed however it ends. The exit code is the
# command's.
set -euo pipefail

usage() { echo "usage: $0 [N] -- command [args...]" >&2; exit 2; }

n=6
if [[ $# -gt 0 && $1 != -- ]]; then
  [[ $1 =~ ^[0-9]+$ ]] || { echo "under-load.sh: N must be a whole number of busy processes, got '$1'" >&2; usage; }
  n=$1; shift
fi
[[ $# -gt 0 && $1 == -- ]] || usage
shift
[[ $# -gt 0 ]] || usage

pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop EXIT INT TERM
for ((i = 0; i < n; i++)); do
  sh -c 'while :; do :; done' &
  pids+=("$!")
done
echo "under-load: $n busy processes beside: $*" >&2
start=$(date +%s)
set +e
"$@"
rc=$?
set -e
echo "under-load: exit $rc after $(( $(date +%s) - start )) s beside $n busy processes (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
exit "$rc"
