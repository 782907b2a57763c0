"""A real MCP server for the tests, written with the official SDK (``mcp.server.mcpserver``).

``python mcp_server.py stdio`` or ``python mcp_server.py http PORT``. Tools: text,
an image, an error, a resource link, one that hangs (it writes ``$MCP_TEST_MARKS/hang-cancelled``
when the client cancels it), one that crashes the process, one that adds a tool and sends
``notifications/tools/list_changed``, one that reports its environment and process group, and
one that reads a file.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ResourceLink, TextContent

# A 1x1 PNG.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
MARKS = Path(os.environ.get("MCP_TEST_MARKS", "/tmp"))

server = MCPServer("neta-test-server", version="1.0")


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="A tiny picture.")
def picture() -> Image:
    return Image(data=PNG, format="png")


@server.tool(description="Always fails.")
def fail(message: str = "it went wrong") -> str:
    raise ToolError(message)


@server.tool(description="Text and a link to a resource.")
def link() -> list:
    return [TextContent(type="text", text="see the report"), ResourceLink(type="resource_link", uri="file:///reports/q3.pdf", name="q3 report", mime_type="application/pdf")]


@server.tool(description="Never answers until cancelled.")
async def hang() -> str:
    (MARKS / "hang-started").write_text("1")
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        (MARKS / "hang-cancelled").write_text("1")
        raise
    return "woke up"


@server.tool(description="Kills the server process.")
def crash() -> str:
    os._exit(3)


@server.tool(description="Much text.")
def flood(lines: int = 5000) -> str:
    return "\n".join(f"line {i}" for i in range(lines))


@server.tool(description="Adds the tool 'extra' and tells the client.")
async def grow(ctx: Context) -> str:
    server.add_tool(lambda: "extra!", name="extra", description="Added at run time.")
    # Protocol 2026-07-28: an event on the client's subscriptions/listen stream; older
    # protocols: the notifications/tools/list_changed notification.
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool(description="The environment and process facts.")
def whoami() -> dict:
    return {
        "env": sorted(os.environ),
        "secret": os.environ.get("NETA_SECRET_KEY", ""),
        "named": os.environ.get("MCP_TEST_TOKEN", ""),
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "sid": os.getsid(0),
        "hostname": os.uname().nodename,
    }


@server.tool(description="A file's text, or why it cannot be read.")
def read_file(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=int(sys.argv[2])))
