"""A client of `warrant mcp serve` on the official MCP Python SDK (`pip install mcp`).

Usage:
  mcp_client.py stdio CALLS_JSON -- WARRANT ARGS...
  mcp_client.py http  CALLS_JSON URL TOKEN

CALLS_JSON is a list of [tool, arguments]. Prints one JSON document: the server's name, the
tool names it lists, and for each call its isError flag, text and structured content.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def exercise(read, write, calls):
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        out = {
            "server": init.server_info.name,
            "tools": sorted(t.name for t in listed.tools),
            "calls": [],
        }
        for tool, args in calls:
            result = await session.call_tool(tool, args)
            out["calls"].append(
                {
                    "tool": tool,
                    "is_error": bool(result.is_error),
                    "text": "".join(c.text for c in result.content if c.type == "text"),
                    "structured": result.structured_content,
                }
            )
        return out


async def main():
    mode, calls = sys.argv[1], json.loads(sys.argv[2])
    if mode == "stdio":
        argv = sys.argv[sys.argv.index("--") + 1 :]
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ), cwd=os.getcwd())
        async with stdio_client(params) as (read, write):
            out = await exercise(read, write, calls)
    else:
        url, token = sys.argv[3], sys.argv[4]
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http:
            async with streamable_http_client(url, http_client=http) as streams:
                out = await exercise(streams[0], streams[1], calls)
    print(json.dumps(out))


asyncio.run(main())
