"""Hidden tools for toolhost's own tests of the sandbox (not for users).

The build command adds them only when ``TOOLHOST_KIT_TEST_TOOLS=1`` is set.
"""

from typing import Annotated, TypedDict

from .runtime import tool
from .schema import MaxLen, Range


class _Spun(TypedDict):
    iterations: int


@tool(side_effect="read-only", max_output_bytes=256, timeout_ms=60_000)
def kit_py_spin() -> _Spun:
    """Test only: loops forever, to show that fuel and the deadline stop a
    runaway guest. Never returns."""
    n = 0
    while True:
        n += 1


class _Opened(TypedDict):
    bytes: int


@tool(side_effect="read-only", fs_read=True, max_output_bytes=256)
def kit_py_open(guest_path: Annotated[str, MaxLen(4096), "Absolute guest path to read"]) -> _Opened:
    """Test only: reads any guest path the sandbox may hold, to show that
    only granted directories are visible. Returns the size read."""
    with open(guest_path, "rb") as f:
        return {"bytes": len(f.read())}


class _Echo(TypedDict):
    value: int


@tool(side_effect="read-only", max_output_bytes=64, timeout_ms=1_000)
def kit_py_echo(value: Annotated[int, Range(0, 1_000_000), "The number to echo back"]) -> _Echo:
    """Test only: returns the number it is given, to measure call overhead."""
    return {"value": value}
