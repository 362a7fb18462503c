#!/usr/bin/env bash
# The quickstart: build Warrant, set up a fresh copy of the example workspace, and run one
# governed agent run on the embedded default (SQLite in .warrant/, the bundled scripted model).
# Along the way the run parks on an approval; this script denies it from another process, as a
# reviewer would, resumes the run, and verifies the audit trail.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

echo "== building warrant"
cargo build --manifest-path "$root/Cargo.toml" --bin warrant
warrant="${CARGO_TARGET_DIR:-$root/target}/debug/warrant"

ws="$(mktemp -d "${TMPDIR:-/tmp}/warrant-quickstart.XXXXXX")"
cp -R "$here/workspace/." "$ws/"
cd "$ws"
# Identity for the demo; a managed /etc/warrant/config.toml would lock this down.
export WARRANT_TENANT="${WARRANT_TENANT:-harbour}"

echo
echo "== warrant init --yes   (in $ws)"
"$warrant" init --yes

echo
echo "== warrant whoami"
"$warrant" whoami

echo
echo "== warrant policy explain --action fs.read --target .env"
"$warrant" policy explain --action fs.read --target .env

echo
echo "== warrant run --model scripted:transcript.yaml"
set +e
"$warrant" run --prompt never --model "scripted:$here/transcript.yaml" \
  "Summarize the meeting notes into SUMMARY.md and tidy up the workspace" 2>"$ws.err"
code=$?
set -e
echo "(exit code $code: 10 means the run is parked, waiting for a person)"
if [ "$code" -ne 10 ]; then cat "$ws.err" >&2; exit 1; fi
request="$(sed -n 's/^parked: //p' "$ws.err")"
run="$("$warrant" runs list | tail -n 1 | cut -d' ' -f1)"

echo
echo "== warrant approvals list"
"$warrant" approvals list

echo
echo "== warrant deny $request --reason ...   (a reviewer, from another process)"
"$warrant" deny "$request" --reason "keep build/ until the new pipeline is green"

echo
echo "== warrant resume $run"
"$warrant" resume "$run"

echo
echo "== what happened on disk"
echo "build/ still there:  $(ls build | tr '\n' ' ')"
echo "SUMMARY.md written:  $(head -1 SUMMARY.md)"

echo
echo "== warrant audit verify"
"$warrant" audit verify

echo
echo "== warrant audit tail -n 8"
"$warrant" audit tail -n 8
echo
echo "workspace kept at $ws"
