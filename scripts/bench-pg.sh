# Sourced by the worker benchmarks (`bench-workers.sh`, `bench-workers-ab.sh`), after PGURL is
# set: a scratch directory TMP, databases made by `newdb NAME` (it prints the URL) and dropped
# at exit, and an environment without the caller's Warrant and provider settings. The names go
# through a file, since `url=$(newdb …)` runs it in a subshell.
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
unset XDG_CONFIG_HOME XDG_STATE_HOME
for v in $(env | grep -oE '^(WARRANT|OPENAI|ANTHROPIC)_[A-Z_]*'); do unset "$v"; done
export WARRANT_ACTOR=bench WARRANT_TENANT=bench
