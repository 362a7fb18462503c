#!/bin/sh
# The client the MCP conformance runner drives: the `warrant` binary itself. The runner calls
#   conformance-client.sh WARRANT TRANSCRIPTS URL
# with MCP_CONFORMANCE_SCENARIO set, from a workspace that `warrant init` made. The scenario's
# server becomes `[mcp.servers.peer]` of that workspace, and a scripted run (the scenario's
# transcript, else a run that only lists the tools) reaches it through the ring: the catalogue
# is built by our client, every call is an `mcp.call` decided by policy, journaled and audited.
# An elicitation scenario's server may ask the person (`elicitation = true`): the person is
# played by a second process that answers the open request with `warrant requests answer`
# (`{}`: every field takes the schema's default), as a person at another terminal would.
set -eu
warrant=$1
transcripts=$2
url=$3
scenario=${MCP_CONFORMANCE_SCENARIO:-initialize}
config=.warrant/config.toml
[ -f "$config.base" ] || cp "$config" "$config.base"
case "$scenario" in
  elicitation-*) elicitation=true ;;
  *) elicitation=false ;;
esac
{
  cat "$config.base"
  printf '\n[mcp.servers.peer]\nurl = "%s"\ntimeout_ms = 10000\nelicitation = %s\nelicitation_timeout_ms = 30000\n' "$url" "$elicitation"
} > "$config"
model="$transcripts/$(echo "$scenario" | tr / -).yaml"
[ -f "$model" ] || model="$transcripts/list-only.yaml"
if [ "$elicitation" = false ]; then
  exec "$warrant" run --model "scripted:$model" "conformance scenario $scenario"
fi
"$warrant" run --model "scripted:$model" "conformance scenario $scenario" &
run=$!
i=0
while [ $i -lt 300 ] && kill -0 "$run" 2>/dev/null; do
  req=$("$warrant" requests list --json 2>/dev/null | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("requests", []):
    if r.get("kind") == "elicitation" and r.get("status") == "open":
        print(r["id"])
        break
' || true)
  if [ -n "$req" ]; then
    "$warrant" requests answer "$req" --text '{}'
    break
  fi
  i=$((i + 1))
  sleep 0.1
done
wait "$run"
