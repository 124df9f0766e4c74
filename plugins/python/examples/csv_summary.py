"""csv_summary: a toolhost tool written in Python with toolhost_kit.

Build it into a component and call it (see docs/python.md):

    python -m toolhost_kit build csv_summary.py -o csv_summary.wasm
    toolhost --plugin csv_summary.wasm call csv_summary '{"path":"data/sales.csv"}' --allow-read data
"""

import csv
import io
import math
import os
from typing import Annotated, Literal, Optional, TypedDict

from toolhost_kit import Context, MaxLen, MinLen, Path, Range, ToolError, tool

#: Largest file the tool reads.
MAX_FILE_BYTES = 32 * 1024 * 1024
#: Longest column name reported (characters).
MAX_NAME_CHARS = 100


class Column(TypedDict):
    """One column."""

    name: str
    kind: Literal["numeric", "text", "empty"]
    non_empty: int
    min: Optional[float]
    max: Optional[float]
    mean: Optional[float]


class Summary(TypedDict):
    """Result of csv_summary."""

    path: str
    rows: int
    columns: int
    column_stats: list[Column]
    columns_omitted: int


def render(summary: Summary) -> str:
    """What the model reads: one header line, then one line per column."""
    lines = [f"{summary['path']}: {summary['rows']} rows, {summary['columns']} columns"]
    for c in summary["column_stats"]:
        if c["kind"] == "numeric":
            lines.append(
                f"  {c['name']}: numeric, {c['non_empty']} filled, "
                f"min {c['min']:g}, max {c['max']:g}, mean {c['mean']:g}"
            )
        else:
            lines.append(f"  {c['name']}: {c['kind']}, {c['non_empty']} filled")
    if summary["columns_omitted"]:
        lines.append(f"  ({summary['columns_omitted']} more columns; raise max_columns)")
    return "\n".join(lines)


@tool(
    title="Summarize a CSV file",
    side_effect="read-only",
    keywords=["summarize", "csv", "spreadsheet", "columns", "statistics", "table"],
    examples=[
        "summarize the columns of sales.csv",
        "what are the min and max of each column in the spreadsheet",
        "give me an overview of the table in data/export.csv",
    ],
    errors=["not_text", "not_csv", "too_large"],
    timeout_ms=10_000,
    max_output_bytes=64 * 1024,
    text=render,
)
def csv_summary(
    ctx: Context,
    path: Annotated[str, Path(read=True), MinLen(1), MaxLen(1024)],
    delimiter: Literal[",", ";", "\t", "|"] = ",",
    has_header: bool = True,
    max_columns: Annotated[int, Range(1, 100)] = 50,
) -> Summary:
    """Summarizes one CSV file: its row and column counts and, per column,
    how many cells are filled and, for numeric columns (every filled cell a
    finite number), the minimum, maximum and mean. Use it to get the shape of
    a data file before reading it; do not use it to read cell values (use
    file_view). Reads at most 32 MiB of UTF-8 text. Output: {path, rows
    (data rows, header excluded), columns, column_stats (at most max_columns
    entries, names clipped to 100 characters), columns_omitted}, under
    64 KiB. Errors: not_found, not_text (not UTF-8), not_csv (malformed),
    too_large. Read-only.

    Args:
        path: CSV file, relative to the workspace root.
        delimiter: Field separator.
        has_header: Whether the first row holds the column names (else they
            are named column_1, column_2, ...).
        max_columns: Most columns to report; the rest are counted in
            columns_omitted.
    """
    guest = ctx.path(path, field="/path")
    size = os.stat(guest).st_size
    if size > MAX_FILE_BYTES:
        raise ToolError(
            "too_large",
            f"{path} is {size} bytes; the limit is {MAX_FILE_BYTES}",
            field="/path",
            details={"bytes": size, "limit": MAX_FILE_BYTES},
        )
    with open(guest, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ToolError(
            "not_text", f"{path} is not UTF-8 text (byte {e.start})", field="/path", correctable=True
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]

    names: list[str] = []
    count: list[int] = []
    lo: list[float] = []
    hi: list[float] = []
    total: list[float] = []
    numeric: list[bool] = []
    rows = 0
    try:
        for i, row in enumerate(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)):
            if i == 0 and has_header:
                names = [n.strip() for n in row]
                continue
            if not row:
                continue
            rows += 1
            while len(count) < len(row):
                count.append(0)
                lo.append(math.inf)
                hi.append(-math.inf)
                total.append(0.0)
                numeric.append(True)
            for c, cell in enumerate(row):
                cell = cell.strip()
                if not cell:
                    continue
                count[c] += 1
                if not numeric[c]:
                    continue
                try:
                    x = float(cell)
                except ValueError:
                    numeric[c] = False
                    continue
                if not math.isfinite(x):
                    numeric[c] = False
                    continue
                lo[c] = min(lo[c], x)
                hi[c] = max(hi[c], x)
                total[c] += x
    except csv.Error as e:
        raise ToolError("not_csv", f"{path} is not valid CSV: {e}", field="/path", correctable=True) from None

    width = max(len(names), len(count))
    stats: list[Column] = []
    for c in range(min(width, max_columns)):
        name = names[c] if c < len(names) and names[c] else f"column_{c + 1}"
        filled = count[c] if c < len(count) else 0
        is_num = filled > 0 and numeric[c]
        stats.append(
            {
                "name": name[:MAX_NAME_CHARS],
                "kind": "numeric" if is_num else ("text" if filled else "empty"),
                "non_empty": filled,
                "min": lo[c] if is_num else None,
                "max": hi[c] if is_num else None,
                "mean": total[c] / filled if is_num else None,
            }
        )
    return {
        "path": path,
        "rows": rows,
        "columns": width,
        "column_stats": stats,
        "columns_omitted": width - len(stats),
    }
