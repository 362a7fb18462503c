#!/usr/bin/env bash
# Whole-process cost of one governed command, in one hyperfine run: `warrant run` of a scripted
# transcript with no tool call (the fixed cost of a run), the same with one
# `run_command ["/bin/true"]` call (default profile: the command's own view, contained, so with
# the copy-on-write layer and the changeset judged), `bwrap` building the same view around
# /bin/true, and bare /bin/true. The governed call's cost is the difference of the two runs.
# Needs: hyperfine, bwrap, root (or unprivileged user namespaces) and a release build:
#   CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target} cargo build --release -p warrant-cli
# Usage: scripts/bench-governed.sh [runs]   (JSON + markdown in $OUT, default /tmp/warrant-bench-governed)
#   WARRANT=path    the binary to measure (default $CARGO_TARGET_DIR/release/warrant)
#   BASELINE=path   a second binary (e.g. an older build) measured in the same hyperfine run, in
#                   the same workspace; its runs carry the task `baseline` so the journal part
#                   tells them apart
set -euo pipefail
RUNS=${1:-60}
TARGET=${CARGO_TARGET_DIR:-target}
WARRANT=$(realpath "${WARRANT:-$TARGET/release/warrant}")
BASELINE=${BASELINE:+$(realpath "$BASELINE")}
OUT=${OUT:-/tmp/warrant-bench-governed}
REPO=$(realpath "$(dirname "$0")/..")
mkdir -p "$OUT"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
WS="$TMP/ws"
mkdir -p "$WS" "$TMP/home" "$TMP/managed"
# A project: this repository's tracked files, a .git, a .env and a key, so the launcher walks a
# real tree for denied names.
git -C "$REPO" ls-files -z | (cd "$REPO" && xargs -0 cp --parents -t "$WS")
mkdir -p "$WS/.git/hooks"
echo "ref: refs/heads/main" > "$WS/.git/HEAD"
echo "TOKEN=x" > "$WS/.env"
echo "key" > "$WS/crates/id_ed25519"
WS=$(realpath "$WS")

# Warrant's environment: its own home, managed layer and principal; no toolchain variables, so
# the plan's read roots are the defaults that exist on this machine.
unset RUSTUP_HOME CARGO_HOME PYENV_ROOT NVM_DIR GOPATH GOROOT XDG_CONFIG_HOME XDG_STATE_HOME
for v in $(env | grep -oE '^(WARRANT|OPENAI|ANTHROPIC)_[A-Z_]*'); do unset "$v"; done
export HOME="$TMP/home" WARRANT_MANAGED_DIR="$TMP/managed" WARRANT_ACTOR=bench WARRANT_TENANT=bench
cd "$WS"
"$WARRANT" init --yes > /dev/null

printf 'version: 1\nturns:\n  - say: done\n' > "$TMP/none.yaml"
printf 'version: 1\nturns:\n  - calls:\n      - tool: run_command\n        args: { argv: ["/bin/true"] }\n  - say: done\n' > "$TMP/call.yaml"
RUN_NONE="$WARRANT run --prompt never --model scripted:$TMP/none.yaml work"
RUN_CALL="$WARRANT run --prompt never --model scripted:$TMP/call.yaml work"
BASE=()
if [ -n "$BASELINE" ]; then
  BASE=(-n "baseline: warrant run, no call" "$BASELINE run --prompt never --model scripted:$TMP/none.yaml baseline"
    -n "baseline: warrant run, one run_command /bin/true" "$BASELINE run --prompt never --model scripted:$TMP/call.yaml baseline")
fi

# The call must run, contained, without anyone asked, and end with exit code 0.
$RUN_CALL --json > "$TMP/check.jsonl"
python3 - "$TMP/check.jsonl" <<'EOF'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
kinds = [e.get("kind") for e in events]
assert "approval_requested" not in kinds, kinds
done = [e for e in events if e.get("kind") == "effect_completed"]
assert len(done) == 1, kinds
result = done[0]["payload"]["result"]
text = json.dumps(result)
assert '"exit_code": 0' in text, text
assert '"view"' in text and '"changes"' in text, text
print("check: one contained run_command, exit 0, view applied, changeset judged")
EOF

# bubblewrap building the same view: the default read roots read-only (merged-/usr links as
# links), the workspace read-write, .git read-only, .warrant and the denied files masked by an
# empty node, a private home and /tmp, its own /proc, a minimal /dev, user + PID + network
# namespaces, a new session, no capability. (No Landlock or seccomp: bwrap confines by namespaces only.)
mkdir -m 000 "$TMP/mask-dir"; : > "$TMP/mask-file"; chmod 000 "$TMP/mask-file"
B=(bwrap --unshare-user --unshare-pid --unshare-net --die-with-parent --new-session --cap-drop ALL
  --tmpfs /tmp --tmpfs "$HOME")
for r in /usr /etc/ld.so.cache /etc/passwd /etc/group /etc/nsswitch.conf /etc/alternatives \
  /etc/hosts /etc/host.conf /etc/resolv.conf /etc/gai.conf; do
  [ -e "$r" ] && B+=(--ro-bind "$r" "$r")
done
for l in /bin /sbin /lib /lib64 /etc/localtime; do
  [ -L "$l" ] && B+=(--symlink "$(readlink -f "$l")" "$l")
done
B+=(--bind "$WS" "$WS" --ro-bind "$WS/.git" "$WS/.git")
while IFS= read -r -d '' f; do
  if [ -d "$f" ]; then B+=(--ro-bind "$TMP/mask-dir" "$f"); else B+=(--ro-bind "$TMP/mask-file" "$f"); fi
done < <(find "$WS" \( -name .env -o -name '.env.*' -o -name '*.pem' -o -name '*.key' -o -name 'id_rsa*' \
  -o -name 'id_ecdsa*' -o -name 'id_ed25519*' -o -name .warrant \) -prune -print0)
B+=(--dev /dev --proc /proc --remount-ro / --chdir "$WS")
"${B[@]}" sh -c 'test -f Cargo.toml || echo "no workspace"; touch .git/x 2>/dev/null && echo ".git writable"
  cat .env 2>/dev/null && echo ".env readable"; ls .warrant 2>/dev/null && echo ".warrant readable"
  [ $(wc -l < /proc/net/dev) -eq 3 ] || echo "network visible"' > "$TMP/probe.txt" 2>&1
[ ! -s "$TMP/probe.txt" ] || { echo "the bwrap command does not build the view:" >&2; cat "$TMP/probe.txt" >&2; exit 1; }
BWRAP=$(printf '%q ' "${B[@]}")
echo "bwrap: $BWRAP/bin/true" | tee "$OUT/bwrap-command.txt"

hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$OUT/governed.json" --export-markdown "$OUT/governed.md" \
  -n "bare /bin/true" "/bin/true" \
  -n "bwrap view /bin/true" "$BWRAP/bin/true" \
  -n "warrant run, no call" "$RUN_NONE" \
  -n "warrant run, one run_command /bin/true" "$RUN_CALL" "${BASE[@]}"
cat "$OUT/governed.md"
python3 - "$OUT/governed.json" <<'EOF'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
med = lambda n: r[n]["median"] * 1e3
mn = lambda n: r[n]["min"] * 1e3
bw = "bwrap view /bin/true"
for n in r: print(f"{n}: median {med(n):.2f} ms, min {mn(n):.2f} ms")
for tag in ("", "baseline: "):
    none, call = f"{tag}warrant run, no call", f"{tag}warrant run, one run_command /bin/true"
    if none not in r:
        continue
    print(f"{tag}governed call (median difference): {med(call) - med(none):.2f} ms = {(med(call) - med(none)) / med(bw):.2f}x bwrap")
    print(f"{tag}governed call (min difference): {mn(call) - mn(none):.2f} ms = {(mn(call) - mn(none)) / mn(bw):.2f}x bwrap")
    print(f"{tag}whole run with the call / bwrap (median): {med(call) / med(bw):.1f}x")
EOF

# With a baseline, hyperfine's one-command-after-another order lets the machine's load drift
# between the two binaries; this loop runs every command once per round, in an order rotated
# each round, and reports per-round (paired) differences against the bwrap spawn of that round.
rm -f "$OUT/interleaved.start"
if [ -n "$BASELINE" ]; then
  date -u +%Y-%m-%dT%H:%M:%S.%3NZ > "$OUT/interleaved.start"
  python3 - "$RUNS" "$OUT" "$BWRAP/bin/true" "$RUN_NONE" "$RUN_CALL" \
    "$BASELINE run --prompt never --model scripted:$TMP/none.yaml baseline" \
    "$BASELINE run --prompt never --model scripted:$TMP/call.yaml baseline" <<'EOF'
import json, os, shlex, statistics, subprocess, sys, time
rounds, out = int(sys.argv[1]), sys.argv[2]
names = ["bwrap view /bin/true", "warrant run, no call", "warrant run, one call",
         "baseline: warrant run, no call", "baseline: warrant run, one call"]
cmds = list(zip(names, [shlex.split(c) for c in sys.argv[3:8]]))
def once(argv):
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t0) * 1e3
for _ in range(3):
    for _, argv in cmds:
        once(argv)
samples = {n: [] for n in names}
for r in range(rounds):
    for name, argv in cmds[r % len(cmds):] + cmds[:r % len(cmds)]:
        samples[name].append(once(argv))
json.dump(samples, open(f"{out}/interleaved.json", "w"))
med = statistics.median
print(f"interleaved: {rounds} rounds, load average {os.getloadavg()[0]:.2f} at the end")
for n in names:
    print(f"interleaved: {n}: median {med(samples[n]):.2f} ms")
for tag in ("", "baseline: "):
    call = [c - n for c, n in zip(samples[f"{tag}warrant run, one call"], samples[f"{tag}warrant run, no call"])]
    ratio = [x / b for x, b in zip(call, samples["bwrap view /bin/true"])]
    print(f"interleaved: {tag}governed call (median of per-round differences) {med(call):.2f} ms; "
          f"median per-round ratio to that round's bwrap spawn {med(ratio):.2f}x")
EOF
fi

# Inside the process: every `warrant run` waits, at its end, for the lease heartbeat thread's
# current 50 ms sleep (crates/warrant-cli/src/drive.rs), so whole-process times move in 50 ms
# steps and hide a shorter call. The journal's own timestamps (ms) give the call's cost: the
# run from run_started to run_ended, with and without the call, and the call from
# action_proposed to effect_completed, over every run hyperfine made.
"$WARRANT" runs list --json > "$OUT/runs.json"
python3 - "$WARRANT" "$OUT/runs.json" "$OUT/governed.json" <<'EOF'
import json, statistics, subprocess, sys
from datetime import datetime
warrant, runs, hf = sys.argv[1], json.load(open(sys.argv[2]))["runs"], json.load(open(sys.argv[3]))
# With a baseline, only the interleaved rounds' runs: both binaries under the same load.
try:
    since = open(sys.argv[2].rsplit("/", 1)[0] + "/interleaved.start").read().strip()
    runs = [r for r in runs if r["created_at"] >= since]
    print(f"journal: the runs of the interleaved rounds only (created from {since})")
    hf = {"results": [{"command": "bwrap view /bin/true", "median": statistics.median(json.load(open(sys.argv[2].rsplit("/", 1)[0] + "/interleaved.json"))["bwrap view /bin/true"]) / 1e3}]}
except FileNotFoundError:
    pass
t = lambda e: datetime.fromisoformat(e["recorded_at"].replace("Z", "+00:00")).timestamp() * 1e3
spans = {}
calls = {}
for r in runs:
    events = json.loads(subprocess.run([warrant, "runs", "show", r["run"], "--json"], check=True, capture_output=True).stdout)["events"]
    at = {}
    for e in events:
        at.setdefault(e["kind"], t(e))
    tag = "baseline: " if r.get("task") == "baseline" else ""
    kind = "call" if "effect_completed" in at else "none"
    spans.setdefault(tag, {"none": [], "call": []})[kind].append(at["run_ended"] - at["run_started"])
    if kind == "call":
        calls.setdefault(tag, []).append(at["effect_completed"] - at["action_proposed"])
med = lambda xs: sorted(xs)[len(xs) // 2]
bw = {x["command"]: x for x in hf["results"]}["bwrap view /bin/true"]["median"] * 1e3
for tag in sorted(spans):
    n, c = med(spans[tag]["none"]), med(spans[tag]["call"])
    print(f"{tag}journal: {len(spans[tag]['none'])} runs without a call, {len(spans[tag]['call'])} with one")
    print(f"{tag}journal: run_started -> run_ended median {n:.1f} ms without the call, {c:.1f} ms with it")
    print(f"{tag}journal: the governed call (difference of medians) {c - n:.1f} ms = {(c - n) / bw:.2f}x the bwrap spawn ({bw:.2f} ms)")
    print(f"{tag}journal: action_proposed -> effect_completed median {med(calls[tag]):.1f} ms = {med(calls[tag]) / bw:.2f}x the bwrap spawn")
EOF

# After the journal part (traced runs are slower and would count there).
if [ -n "${SEGMENTS:-}" ]; then
  python3 "$REPO/scripts/governed-segments.py" "$SEGMENTS" "$OUT" "warrant=$RUN_CALL" \
    ${BASELINE:+"baseline=$BASELINE run --prompt never --model scripted:$TMP/call.yaml baseline"}
fi
