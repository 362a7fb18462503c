#!/usr/bin/env bash
# The fixed cost of starting a run: `warrant run` of a scripted transcript that makes no tool
# call, in a fresh `warrant init --yes` workspace, against `warrant --version` (the process
# start alone), measured in the same loop. Each round runs every command once, in turn, so
# both sides see the same load; the figures to read are the differences against `--version`.
# No hyperfine needed: python3 times each child (wall clock, and user + system CPU from
# wait4's rusage).
#
#   CARGO_TARGET_DIR=... cargo build --release -p warrant-cli
#   scripts/bench-startup.sh [ROUNDS]          (default 40)
#
#   WARRANT=path      the binary to measure (default $CARGO_TARGET_DIR/release/warrant)
#   BASELINE=path     a second binary (e.g. an older build) measured in the same rounds
#   PERF=1            also `perf record` ROUNDS runs of the measured binary's `warrant run` and
#                     print where their CPU time goes (needs perf; OUT/perf.txt)
#   OUT=dir           where the raw figures go (default /tmp/warrant-bench-startup)
set -euo pipefail
ROUNDS=${1:-40}
REPO=$(realpath "$(dirname "$0")/..")
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
WARRANT=$(realpath "${WARRANT:-$TARGET/release/warrant}")
OUT=${OUT:-/tmp/warrant-bench-startup}
mkdir -p "$OUT"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/home" "$TMP/managed"

# Warrant's own environment: its own home, managed layer and principal; no provider keys.
unset XDG_CONFIG_HOME XDG_STATE_HOME
for v in $(env | grep -oE '^(WARRANT|OPENAI|ANTHROPIC)_[A-Z_]*'); do unset "$v"; done
export HOME="$TMP/home" WARRANT_MANAGED_DIR="$TMP/managed" WARRANT_ACTOR=bench WARRANT_TENANT=bench
printf 'version: 1\nturns:\n  - say: done\n' > "$TMP/none.yaml"

# Each binary runs in a workspace of its own, made by its own `init` (a newer build may move
# the store's schema on, which an older one then refuses to open), and its run must start,
# make no call and end completed.
n=0
for bin in "$WARRANT" ${BASELINE:+"$(realpath "$BASELINE")"}; do
  ws="$TMP/ws-$n"
  mkdir -p "$ws/.git"
  echo "ref: refs/heads/main" > "$ws/.git/HEAD"
  echo "# a project" > "$ws/README.md"
  (cd "$ws" && "$bin" init --yes > /dev/null)
  (cd "$ws" && "$bin" run --prompt never --model "scripted:$TMP/none.yaml" work --json) > "$TMP/check.jsonl"
  python3 - "$TMP/check.jsonl" "$bin" <<'EOF'
import json, sys
kinds = [json.loads(l).get("kind") for l in open(sys.argv[1]) if l.strip().startswith("{")]
assert "run_started" in kinds and "run_ended" in kinds, kinds
assert not any(k in kinds for k in ("action_proposed", "call_refused")), kinds
print(f"check: {sys.argv[2]}: a run with no call, {len(kinds)} events")
EOF
  n=$((n + 1))
done
cd "$TMP/ws-0"

python3 - "$ROUNDS" "$OUT" "$WARRANT" "${BASELINE:+$(realpath "$BASELINE")}" "$TMP/none.yaml" "$TMP" <<'EOF'
import json, os, statistics, subprocess, sys, time

rounds, out, warrant, baseline, transcript, tmp = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
bins = [("", warrant)] + ([("baseline ", baseline)] if baseline else [])
cmds = []
for i, (tag, b) in enumerate(bins):
    ws = f"{tmp}/ws-{i}"
    cmds.append((f"{tag}warrant --version", [b, "--version"], ws))
    cmds.append((f"{tag}warrant run, no call", [b, "run", "--prompt", "never", "--model", f"scripted:{transcript}", "work"], ws))

def once(argv, cwd):
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{argv} exited {p.returncode}")
    return wall * 1e3, (ru.ru_utime + ru.ru_stime) * 1e3

for _ in range(3):  # warm-up: page cache, the store's first runs
    for _, argv, cwd in cmds:
        once(argv, cwd)
samples = {name: [] for name, _, _ in cmds}
for r in range(rounds):
    order = cmds[r % len(cmds):] + cmds[:r % len(cmds)]  # rotate who goes first
    for name, argv, cwd in order:
        samples[name].append(once(argv, cwd))

rows, res = [], {}
for name, s in samples.items():
    wall = [w for w, _ in s]; cpu = [c for _, c in s]
    res[name] = {"wall_mean": statistics.mean(wall), "wall_median": statistics.median(wall),
                 "cpu_mean": statistics.mean(cpu), "cpu_median": statistics.median(cpu),
                 "wall": wall, "cpu": cpu}
json.dump({"rounds": rounds, "results": res}, open(f"{out}/startup.json", "w"), indent=1)

def paired(a, b, key):
    # per-round differences: each round ran both, so their difference cancels that round's load
    return statistics.mean(x - y for x, y in zip(res[a][key], res[b][key]))

lines = [f"{rounds} rounds, load average {os.getloadavg()[0]:.2f} at the end", "",
         "| command | wall mean | wall median | CPU (user+sys) mean | CPU median | run − `--version`, wall (mean of per-round differences) | run − `--version`, CPU |",
         "|---|---|---|---|---|---|---|"]
for tag, _ in bins:
    v, r = f"{tag}warrant --version", f"{tag}warrant run, no call"
    for name in (v, r):
        x = res[name]
        diff = ("", "")
        if name == r:
            diff = (f"**{paired(r, v, 'wall'):.1f} ms**", f"**{paired(r, v, 'cpu'):.1f} ms**")
        lines.append(f"| {name} | {x['wall_mean']:.1f} ms | {x['wall_median']:.1f} ms | {x['cpu_mean']:.1f} ms | {x['cpu_median']:.1f} ms | {diff[0]} | {diff[1]} |")
text = "\n".join(lines)
print(text)
open(f"{out}/startup.md", "w").write(text + "\n")
EOF

if [[ "${PERF:-}" == 1 ]]; then
  if ! command -v perf > /dev/null; then echo "PERF=1: no perf on PATH" >&2; exit 1; fi
  # Call stacks by DWARF unwinding (a release build has unwind tables but no frame pointers);
  # each sample of the measured binary is put under the first of these parts found in its stack.
  rm -f "$OUT/perf.data"
  perf record -q -F 1999 --call-graph dwarf,16384 -o "$OUT/perf.data" -- bash -c \
    "for i in \$(seq $ROUNDS); do '$WARRANT' run --prompt never --model 'scripted:$TMP/none.yaml' work > /dev/null; done" 2> /dev/null
  perf script -i "$OUT/perf.data" --comm "$(basename "$WARRANT" | cut -c1-15)" 2> /dev/null > "$OUT/perf.stacks"
  python3 - "$OUT/perf.stacks" "$ROUNDS" <<'EOF' | tee "$OUT/perf.txt"
import collections, re, sys
parts = [  # (name, pattern in a frame); the first part whose pattern is in the stack wins
    ("secret scanner: parse + translate the default rules", r"warrant_secrets::rules::default_set"),
    ("secret scanner: compile rules, scan", r"warrant_secrets::"),
    ("tool input schemas (jsonschema)", r"warrant_tools::registry|jsonschema::"),
    ("Cedar schema parse", r"warrant_policy::schema::CedarNames::new"),
    ("policy: parse + validate the pack", r"warrant_policy::engine::PolicyEngine::load"),
    ("policy: decisions", r"warrant_policy::"),
    ("audit: signing, sealing", r"ed25519|curve25519|warrant_audit::"),
    ("store (SQLite)", r"sqlite3|warrant_store::"),
    ("configuration", r"warrant_core::config"),
    ("the rest of the run (host, kernel, agent)", r"warrant_(host|kernel|agent|llm)::"),
    ("command line, other warrant code", r"warrant::|warrant_"),
    ("dynamic loader, exec, process exit", r"_dl_|execve|do_exit|exit_mmap|load_elf_binary"),
]
counts, total = collections.Counter(), 0
for sample in open(sys.argv[1]).read().split("\n\n"):
    frames = sample.strip().split("\n")[1:]
    if not frames:
        continue
    total += 1
    stack = "\n".join(frames)
    counts[next((n for n, p in parts if re.search(p, stack)), "other (libc, kernel, runtime)")] += 1
rounds = int(sys.argv[2])
print(f"perf: {total} samples of {rounds} runs with no call (1999 Hz, so {1000/1999:.2f} ms CPU each):")
for name, n in counts.most_common():
    print(f"  {100 * n / total:5.1f}%  {n / rounds / 1.999:5.1f} ms/run  {name}")
EOF
fi
