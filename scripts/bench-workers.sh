#!/usr/bin/env bash
# The shared store at scale, side by side in one run (issue 22, part 4): N queued runs of
# CALLS `write_file` calls each, driven to the end by 1, 2 and 4 `warrant worker` processes on
# one PostgreSQL, and pgbench's single-row insert workload (1 and 4 clients) against the same
# server. Reports governed calls/s, events/s and the ratio to pgbench's transactions/s.
# Needs: a PostgreSQL on 127.0.0.1:5432 (trust auth for `postgres`, or PGURL), pgbench, python3,
# and a release build:
#   CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target} cargo build --release -p warrant-cli
# Usage: scripts/bench-workers.sh [runs] [calls]   (default 60 runs of 20 calls)
#   WARRANT=path   the binary to measure (default $CARGO_TARGET_DIR/release/warrant)
#   BASELINE=path  a second binary (e.g. an older build) measured in the same run, each worker
#                  count right after the first binary's
#   WORKERS="1 2 4"   the worker counts; SECONDS_PGBENCH=10 pgbench's duration per client count
#   OUT=dir        where results.json and results.md go (default /tmp/warrant-bench-workers)
set -euo pipefail
RUNS=${1:-60}
CALLS=${2:-20}
TARGET=${CARGO_TARGET_DIR:-target}
WARRANT=$(realpath "${WARRANT:-$TARGET/release/warrant}")
BINS=("warrant=$WARRANT")
[ -n "${BASELINE:-}" ] && BINS+=("baseline=$(realpath "$BASELINE")")
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
WORKERS=${WORKERS:-1 2 4}
SECONDS_PGBENCH=${SECONDS_PGBENCH:-10}
OUT=${OUT:-/tmp/warrant-bench-workers}
mkdir -p "$OUT"

# shellcheck source=bench-pg.sh
. "$(dirname "$0")/bench-pg.sh"

# One transcript: CALLS turns of one write_file each, then an answer.
python3 "$(dirname "$0")/calls-transcript.py" "$CALLS" > "$TMP/run.yaml"

results="$TMP/results.jsonl"
: > "$results"

# pgbench: one single-row INSERT per transaction, as an append of one event would be at best.
PGB_URL=$(newdb pgbench)
psql -q "$PGB_URL" -c "CREATE TABLE ins (id bigserial PRIMARY KEY, v bigint NOT NULL, at timestamptz NOT NULL DEFAULT now())" >/dev/null
echo 'INSERT INTO ins (v) VALUES (:client_id);' > "$TMP/ins.sql"
for c in 1 4; do
  tps=$(pgbench -n -c "$c" -j "$c" -T "$SECONDS_PGBENCH" -f "$TMP/ins.sql" "$PGB_URL" 2>/dev/null \
    | awk '/^tps = /{print $3; exit}')
  echo "{\"what\":\"pgbench\",\"clients\":$c,\"tps\":$tps}" >> "$results"
  echo "pgbench, $c client(s): $tps transactions/s"
done

for w in $WORKERS; do
for entry in "${BINS[@]}"; do
  tag=${entry%%=*}
  WARRANT=${entry#*=}
  url=$(newdb "${tag}_w$w")
  (
    queue_runs "$WARRANT" "$url" "$TMP/ws-$tag-$w"
    # Each worker drives runs until none is left to lease (`--once`), so the round ends when
    # the last worker exits: no poller shares the two cores with the workers and PostgreSQL
    # (polling `runs list` five times a second cost about a fifth of the throughput).
    start=$(date +%s.%N)
    pids=()
    for n in $(seq 1 "$w"); do
      "$WARRANT" --store "$url" worker --once --poll-ms 20 --id "w$n" >/dev/null 2>&1 &
      pids+=($!)
    done
    failed=0
    for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
    end=$(date +%s.%N)
    [ "$failed" = 0 ] || echo "warning: $failed worker(s) of $w exited with an error" >&2
    completed=$("$WARRANT" --store "$url" runs list --json | python3 -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin)["runs"] if r["status"] == "completed"))')
    events=$(psql -tA "$url" -c "SELECT count(*) FROM events")
    "$WARRANT" --store "$url" audit verify >/dev/null
    python3 - "$w" "$start" "$end" "$completed" "$events" "$RUNS" "$CALLS" "$tag" >> "$results" <<'EOF'
import json, sys
w, start, end, completed, events, runs, calls, tag = sys.argv[1:]
secs = float(end) - float(start)
print(json.dumps({"what": "workers", "binary": tag, "workers": int(w), "seconds": round(secs, 3),
                  "runs": int(runs), "completed": int(completed), "events": int(events),
                  "calls_per_s": round(int(completed) * int(calls) / secs, 1),
                  "events_per_s": round(int(events) / secs, 1)}))
EOF
    tail -n1 "$results"
  )
done
done

python3 - "$results" "$OUT" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out = sys.argv[2]
json.dump(rows, open(f"{out}/results.json", "w"), indent=2)
pg = {r["clients"]: r["tps"] for r in rows if r["what"] == "pgbench"}
lines = ["| binary | workers | runs completed | seconds | governed calls/s | events/s | events/s ÷ pgbench tps (same client count, else 4) |",
         "|---|---:|---:|---:|---:|---:|---:|"]
for r in rows:
    if r["what"] != "workers":
        continue
    base = pg.get(r["workers"], pg.get(4))
    lines.append(f"| {r['binary']} | {r['workers']} | {r['completed']}/{r['runs']} | {r['seconds']} | {r['calls_per_s']} | {r['events_per_s']} | {r['events_per_s'] / base:.2f} |")
lines.append("")
lines.append("pgbench single-row INSERT: " + ", ".join(f"{c} client(s) {t:.0f} tps" for c, t in sorted(pg.items())))
open(f"{out}/results.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
