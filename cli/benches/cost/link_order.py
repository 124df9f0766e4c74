#!/usr/bin/env python3
"""Writes cli/link-order.txt: the functions a serving `toolhost` runs, for
the linker to place together (see cli/build.rs).

Linux maps the pages of an executable's code that a process runs, and
with them the pages around each (fault-around, 64 KiB). A server runs a
few thousand functions spread over some 33 MiB of machine code, so most of
that became resident. Placed next to each other, the functions it runs fill
a few MiB, and the pages mapped around them are mostly pages it runs too.

This starts `toolhost serve` under callgrind (instrumented from the first
instruction, with instruction addresses) for every call shape of cost.py,
over stdio and HTTP in both eras, makes a few calls of each, and maps every
instruction it ran in the executable to the function that holds it, using
the linker's map of the same binary (`TOOLHOST_LINK_MAP`, see
cli/build.rs; an environment variable, not `cargo rustc` arguments, which
would change the names of the binary's own functions):

    TOOLHOST_LINK_MAP=$PWD/target/toolhost.map cargo build --release -p toolhost-cli
    python3 cli/benches/cost/link_order.py --binary target/release/toolhost \\
        --map target/toolhost.map --guests target/guests/wasm32-wasip2/release
    cargo build --release -p toolhost-cli

The functions are written in the order of their addresses (callers and
callees the compiler placed near each other stay near). Function names
carry a hash of their crate, its version and the compiler's; a build
whose names changed finds fewer of them, and its code is laid out as
without the file, never wrongly.
"""

import argparse
import bisect
import glob
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cost  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                   "link-order.txt")


def text_symbols(map_path):
    """Sorted (start, end, symbol) of the functions in the map's `.text`.

    The map's columns are VMA, LMA, size and alignment, then a name
    indented by what it is: an output section, an input section
    (`file:(section)`) of the one above, or a symbol of the one above.
    """
    spans = []
    section = None
    column = None
    for line in open(map_path, errors="replace"):
        parts = line.split()
        if len(parts) != 5 or parts[0] == "VMA":
            continue
        at = len(line.rstrip()) - len(parts[4])
        column = at if column is None else min(column, at)
        if at == column:
            section = parts[4]
        elif section == ".text" and at > column + 8 and ":(" not in parts[4]:
            start = int(parts[0], 16)
            size = int(parts[2], 16)
            if size:
                spans.append((start, start + size, parts[4]))
    spans.sort()
    return spans


def executed(dump, binary):
    """Instruction addresses run in `binary`, from a callgrind dump made
    with --dump-instr=yes --compress-pos=no --compress-strings=no (callgrind
    writes them as the file's own addresses, wherever it was loaded)."""
    inside = False
    found = set()
    for line in open(dump, errors="replace"):
        if line.startswith("ob="):
            inside = line[3:].strip() == binary
        elif inside and line.startswith("0x"):
            found.add(int(line.split()[0], 16))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--map", required=True, help="the linker's map of --binary")
    ap.add_argument("--guests", required=True)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--keep-dir", help="as cost.py's")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    a.binary = os.path.realpath(a.binary)
    a.trivial = os.path.abspath(os.path.join(a.guests, "tp_trivial.wasm"))
    a.warmup = 0
    spans = text_symbols(a.map)
    starts = [s for s, _, _ in spans]
    names = set()
    with tempfile.TemporaryDirectory() as work:
        e = cost.Env(a, work)
        for shape in cost.SHAPES:
            out = os.path.join(work, f"callgrind.{shape}")
            under = ["taskset", "-c", "0", "valgrind", "--tool=callgrind",
                     "--dump-instr=yes", "--compress-pos=no",
                     "--compress-strings=no", f"--callgrind-out-file={out}"]
            client = cost.launch(e, shape, under)
            try:
                for i in range(a.calls):
                    cost.call(client, shape, i)
            finally:
                client.close()
                cost.finish(client.p)
            before = len(names)
            for dump in glob.glob(out + "*"):
                for at in executed(dump, a.binary):
                    k = bisect.bisect_right(starts, at) - 1
                    if k >= 0 and at < spans[k][1]:
                        names.add(spans[k])
            print(f"{shape:<20} {len(names) - before:>6} new functions", file=sys.stderr)
    ordered = [name for _, _, name in sorted(names)]
    size = sum(end - start for start, end, _ in names)
    with open(a.out, "w") as f:
        f.write("\n".join(ordered) + "\n")
    print(f"{len(ordered)} functions, {size / 2**20:.1f} MiB of code -> {a.out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
