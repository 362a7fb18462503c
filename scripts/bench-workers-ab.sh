#!/usr/bin/env bash
# Two builds' workers side by side in interleaved rounds (issue 22): each round gives both
# binaries a fresh database with RUNS queued runs of CALLS `write_file` calls and times WORKERS
# `warrant worker --once` processes driving them to the end. Interleaving puts the VM's drift
# on both sides alike, which back-to-back script runs (`bench-workers.sh`) do not.
# Usage: WARRANT=new/warrant BASELINE=old/warrant scripts/bench-workers-ab.sh [rounds] [runs] [calls] [workers]
#   PGURL  the server (default postgres://postgres@127.0.0.1:5432)
# Prints one line per round and binary (governed calls/s), then each binary's mean.
set -euo pipefail
ROUNDS=${1:-5}
RUNS=${2:-20}
CALLS=${3:-20}
WORKERS=${4:-1}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
BINS=("warrant=$(realpath "${WARRANT:?set WARRANT}")" "baseline=$(realpath "${BASELINE:?set BASELINE}")")
# shellcheck source=bench-pg.sh
. "$(dirname "$0")/bench-pg.sh"
python3 "$(dirname "$0")/calls-transcript.py" "$CALLS" > "$TMP/run.yaml"
: > "$TMP/rates"
for r in $(seq 1 "$ROUNDS"); do
  for entry in "${BINS[@]}"; do
    tag=${entry%%=*}
    bin=${entry#*=}
    url=$(newdb "ab_${tag}_$r")
    (
      queue_runs "$bin" "$url" "$TMP/ws-$tag"
      sync
      start=$(date +%s.%N)
      for w in $(seq 1 "$WORKERS"); do
        "$bin" --store "$url" worker --once --poll-ms 20 --id "w$w" >/dev/null 2>&1 &
      done
      wait
      end=$(date +%s.%N)
      rate=$(python3 -c "print(round($RUNS * $CALLS / ($end - $start), 1))")
      echo "$r $tag $rate"
      echo "$tag $rate" >> "$TMP/rates"
    )
  done
done
awk '{s[$1] += $2; n[$1]++} END {for (k in s) printf "%s mean %.1f governed calls/s over %d rounds\n", k, s[k] / n[k], n[k]}' "$TMP/rates"
