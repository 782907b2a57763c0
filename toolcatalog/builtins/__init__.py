"""Builtin tools, with Pi's names and arguments. Importing this package registers them
(``ToolcatalogConfig.ready`` does, so every Django process has them).

``read`` ``write`` ``edit`` ``bash`` ``ls`` ``find`` ``grep`` — all confined to
the context's workspace roots (see :mod:`toolcatalog.paths`), all truncating
their output like Pi (see :mod:`toolcatalog.truncation`).
"""

from toolcatalog.builtins.bash import BashTool
from toolcatalog.builtins.edit import EditTool
from toolcatalog.builtins.grep import GrepTool
from toolcatalog.builtins.listing import FindTool, LsTool
from toolcatalog.builtins.read import ReadTool
from toolcatalog.builtins.write import WriteTool
from toolcatalog.protocol import register_tool

BUILTIN_TOOLS = (ReadTool(), BashTool(), EditTool(), WriteTool(), GrepTool(), FindTool(), LsTool())

for _tool in BUILTIN_TOOLS:
    register_tool(_tool)
