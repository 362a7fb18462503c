#!/bin/sh
# The client the MCP conformance runner drives: the `warrant` binary itself. The runner calls
#   conformance-client.sh WARRANT TRANSCRIPTS URL
# with MCP_CONFORMANCE_SCENARIO set, from a workspace that `warrant init` made. The scenario's
# server becomes `[mcp.servers.peer]` of that workspace, and a scripted run (the scenario's
# transcript, else a run that only lists the tools) reaches it through the ring: the catalogue
# is built by our client, every call is an `mcp.call` decided by policy, journaled and audited.
set -eu
warrant=$1
transcripts=$2
url=$3
scenario=${MCP_CONFORMANCE_SCENARIO:-initialize}
config=.warrant/config.toml
[ -f "$config.base" ] || cp "$config" "$config.base"
{
  cat "$config.base"
  printf '\n[mcp.servers.peer]\nurl = "%s"\ntimeout_ms = 10000\n' "$url"
} > "$config"
model="$transcripts/$(echo "$scenario" | tr / -).yaml"
[ -f "$model" ] || model="$transcripts/list-only.yaml"
exec "$warrant" run --model "scripted:$model" "conformance scenario $scenario"
