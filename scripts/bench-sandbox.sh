#!/usr/bin/env bash
# Spawn latency of /bin/true: bare, under each sandbox profile shape (through the release
# `warrant-sandbox` launcher, the same code `warrant __sandbox` runs), and under bubblewrap with
# comparable confinement, all in one hyperfine run. Needs: hyperfine, bwrap, root (or user
# namespaces) and a release build:
#   CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target} cargo build --release -p warrant-exec --bin warrant-sandbox
# Usage: scripts/bench-sandbox.sh [runs]   (results: JSON + markdown in $OUT, default /tmp/warrant-bench-sandbox)
set -euo pipefail
RUNS=${1:-300}
TARGET=${CARGO_TARGET_DIR:-target}
LAUNCHER=$(realpath "$TARGET/release/warrant-sandbox")
OUT=${OUT:-/tmp/warrant-bench-sandbox}
mkdir -p "$OUT"

# A realistic workspace: this repository's tracked files, plus a .git, a .env and a key, so the
# launcher splits the root and walks it for denied names as it would in a project.
WS=$(mktemp -d)
trap 'rm -rf "$WS"' EXIT
git -C "$(dirname "$0")/.." ls-files -z | (cd "$(dirname "$0")/.." && xargs -0 cp --parents -t "$WS")
mkdir -p "$WS/.git/hooks" "$WS/.warrant"
echo "TOKEN=x" > "$WS/.env"
echo "key" > "$WS/crates/id_ed25519"
WS=$(realpath "$WS")
echo "workspace: $(find "$WS" | wc -l) entries"

roots=()
for r in /usr /bin /sbin /lib /lib64 /etc/ld.so.cache /etc/passwd /etc/group /etc/nsswitch.conf \
  /etc/localtime /etc/alternatives /etc/hosts /etc/host.conf /etc/resolv.conf /etc/gai.conf \
  /dev/null /dev/zero /dev/random /dev/urandom; do
  [ -e "$r" ] && roots+=("\"$(realpath "$r")\"")
done
roots+=("\"$WS\"")
read_roots=$(IFS=,; echo "${roots[*]}")
denied='".env",".env.*","*.pem","*.key","id_rsa*","id_ecdsa*","id_ed25519*",".warrant"'
plan() { # network limits
  printf '{"enforcement":"required","read_roots":[%s],"write_roots":["%s"],"protected":["%s/.git","%s/.warrant"],"network":%s,"limits":%s,"denied_names":[%s],"egress_socket":"/nonexistent/proxy.sock"}' \
    "$read_roots" "$WS" "$WS" "$WS" "$1" "$2" "$denied"
}
HOST=$(plan '"host"' '{}')
NONE=$(plan '"none"' '{}')
LIMITS=$(plan '"none"' '{"processes":64,"memory_bytes":1073741824,"open_files":256}')
ALLOW=$(plan '{"allow":["pypi.org:443"]}' '{}')

# bubblewrap, comparable: new session, network namespace, read-only system trees, writable
# workspace with .git read-only and .env hidden, /dev minimal. (No Landlock or seccomp filter:
# bwrap confines by mount namespace.)
BWRAP="bwrap --unshare-net --new-session --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/sbin /sbin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --ro-bind /etc/ld.so.cache /etc/ld.so.cache --dev /dev --bind $WS $WS --ro-bind $WS/.git $WS/.git --ro-bind /dev/null $WS/.env --chdir $WS /bin/true"

cd "$WS"
hyperfine -N --warmup 20 --runs "$RUNS" --export-json "$OUT/spawn.json" --export-markdown "$OUT/spawn.md" \
  -n bare "/bin/true" \
  -n "sandbox host network" "$LAUNCHER '$HOST' -- /bin/true" \
  -n "sandbox network none (default)" "$LAUNCHER '$NONE' -- /bin/true" \
  -n "sandbox none + limits (cgroup pids)" "$LAUNCHER '$LIMITS' -- /bin/true" \
  -n "sandbox allowlist (netns + forwarder)" "$LAUNCHER '$ALLOW' -- /bin/true" \
  -n "bwrap comparable" "$BWRAP"

# The launcher cannot remove its own pids cgroup (Warrant does, after the command); clean up.
for d in /sys/fs/cgroup/pids/warrant/* /sys/fs/cgroup/warrant/*; do
  [ -d "$d" ] && rmdir "$d" 2>/dev/null || true
done
cat "$OUT/spawn.md"
