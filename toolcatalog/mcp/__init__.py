"""MCP tools: servers staff configured (``McpServer`` rows), their tools in the catalog.

* ``specs``: a server's configuration as plain, comparable data (what a connection needs).
* ``connections``: the per-process connection manager (the official ``mcp`` SDK as client).
* ``content``: an MCP ``CallToolResult`` as a Pi tool result.
* ``catalog``: the ``McpTool`` class and this process's registry entries, rebuilt from the
  rows at the catalog's version.

Writes (save, refresh, record a discovery) are in ``toolcatalog.services``. docs/tools.md,
"MCP tools", explains the model.
"""
