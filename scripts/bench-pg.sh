# Sourced by the worker benchmarks (`bench-workers.sh`, `bench-workers-ab.sh`), after PGURL and
# RUNS are set: a scratch directory TMP, databases made by `newdb NAME` (it prints the URL) and
# dropped at exit (their names go through a file, since `url=$(newdb …)` runs in a subshell),
# `queue_runs`, and an environment without the caller's Warrant and provider settings.
TMP=$(mktemp -d)
: > "$TMP/dbs"
cleanup() {
  while read -r db; do
    psql -q "$PGURL/postgres" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  done < "$TMP/dbs"
  rm -rf "$TMP"
}
trap cleanup EXIT
newdb() {
  local db="warrant_bench_$$_$1"
  psql -q "$PGURL/postgres" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null 2>&1
  echo "$db" >> "$TMP/dbs"
  echo "$PGURL/$db"
}
# queue_runs BIN URL DIR, in a subshell of the caller's: enters a fresh workspace DIR with its
# own home and managed layer, makes its store at URL with BIN, and queues RUNS runs of
# $TMP/run.yaml there for the workers the caller starts next.
queue_runs() {
  rm -rf "$3"
  mkdir -p "$3/home" "$3/managed"
  cd "$3"
  export HOME="$3/home" WARRANT_MANAGED_DIR="$3/managed"
  "$1" --store "$2" init --yes >/dev/null
  for i in $(seq 1 "$RUNS"); do
    "$1" --store "$2" submit --model "scripted:$TMP/run.yaml" "job $i" >/dev/null 2>&1
  done
}
unset XDG_CONFIG_HOME XDG_STATE_HOME
for v in $(env | grep -oE '^(WARRANT|OPENAI|ANTHROPIC)_[A-Z_]*'); do unset "$v"; done
export WARRANT_ACTOR=bench WARRANT_TENANT=bench
