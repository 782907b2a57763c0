"""Builtin tools, with Pi's names and arguments. Importing this package registers them
(``ToolcatalogConfig.ready`` does, so every Django process has them).

``read`` ``write`` ``edit`` ``bash`` ``ls`` ``find`` ``grep`` — all confined to
the context's workspace roots (see :mod:`toolcatalog.paths`), all truncating
their output like Pi (see :mod:`toolcatalog.truncation`) — and two that touch no
file: ``todo`` (the model's plan) and ``ask_user`` (a question the run waits on); and
``web_search`` / ``web_fetch`` (the network, through :mod:`toolcatalog.web_guard`).
"""

from toolcatalog.builtins.ask_user import AskUserTool
from toolcatalog.builtins.bash import BashTool
from toolcatalog.builtins.edit import EditTool
from toolcatalog.builtins.grep import GrepTool
from toolcatalog.builtins.listing import FindTool, LsTool
from toolcatalog.builtins.read import ReadTool
from toolcatalog.builtins.todo import TodoTool
from toolcatalog.builtins.web import WebFetchTool, WebSearchTool
from toolcatalog.builtins.write import WriteTool
from toolcatalog.protocol import register_tool

BUILTIN_TOOLS = (ReadTool(), BashTool(), EditTool(), WriteTool(), GrepTool(), FindTool(), LsTool(), TodoTool(), AskUserTool(), WebSearchTool(), WebFetchTool())

for _tool in BUILTIN_TOOLS:
    register_tool(_tool)
