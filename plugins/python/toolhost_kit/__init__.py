"""toolhost_kit: write toolhost tools in Python.

A tool is a function with type hints; ``@tool`` turns it into a descriptor
(closed JSON Schema with bounds, description from the docstring, side
effect, needs, error codes) and ``python -m toolhost_kit build app.py -o
app.wasm`` turns the module into a Wasm component with componentize-py::

    from typing import Annotated
    from toolhost_kit import Context, MaxLen, Path, Range, ToolError, tool

    @tool(side_effect="read-only", errors=["empty_file"])
    def line_count(
        ctx: Context,
        path: Annotated[str, Path(read=True), MaxLen(1024), "File, relative to the workspace"],
    ) -> dict:
        \"\"\"Counts the lines of one UTF-8 text file. ...\"\"\"
        with open(ctx.path(path), encoding="utf-8") as f:
            return {"lines": sum(1 for _ in f)}

See docs/python.md in the toolhost repository.
"""

from .runtime import Context, ToolError, tool, tools, workspace_path
from .schema import Doc, KitError, MaxItems, MaxLen, MinItems, MinLen, Path, Pattern, Range

__all__ = [
    "Context",
    "Doc",
    "KitError",
    "MaxItems",
    "MaxLen",
    "MinItems",
    "MinLen",
    "Path",
    "Pattern",
    "Range",
    "ToolError",
    "tool",
    "tools",
    "workspace_path",
]

#: The componentize-py release the kit is built and tested with.
COMPONENTIZE_PY_VERSION = "0.25.1"
