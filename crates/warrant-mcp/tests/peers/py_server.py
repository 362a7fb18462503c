"""A server written with the official Python SDK (`mcp`), for the client's interop test."""
from mcp.server import MCPServer

server = MCPServer("py-peer")


@server.tool()
def add(a: int, b: int) -> str:
    """Adds two integers."""
    return f"{a} + {b} = {a + b}"


if __name__ == "__main__":
    server.run()
