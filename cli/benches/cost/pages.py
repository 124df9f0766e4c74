#!/usr/bin/env python3
"""Instructions to read a 1 MiB file whole through `file_view`'s pages.

Writes a 1 MiB file of 97-byte lines, starts one `toolhost serve --stdio`
under callgrind as `cost.py` does, reads the file once to warm up, then
counts (1) reading it from the first page to the last by following each
page's `next` with the default page size, and (2) 20 reads of a 3-byte file,
the cost every call has whatever it reads. Prints both and the ratio of
(1) to (1) less that fixed cost on every page but one: what paging costs
over a single call returning the same lines.

    python3 cli/benches/cost/pages.py --binary target/release/toolhost \\
        --guests target/guests/wasm32-wasip2/release [--keep-dir DIR]
"""
import argparse
import glob
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cost  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--guests", required=True)
    ap.add_argument("--keep-dir", default=None,
                    help="compiled-code cache and root key kept between runs (see cost.py)")
    a = ap.parse_args()
    a.binary = os.path.abspath(a.binary)
    a.trivial = os.path.join(os.path.abspath(a.guests), "tp_trivial.wasm")
    if a.keep_dir:
        a.keep_dir = os.path.abspath(a.keep_dir)
        os.makedirs(a.keep_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="toolhost-pages-")
    e = cost.Env(a, work)
    with open(os.path.join(e.ws, "big.txt"), "w") as f:
        i = written = 0
        while written < (1 << 20):
            line = (f"line {i:06d} " + "lorem ipsum dolor sit amet, " * 3)[:96] + "\n"
            f.write(line)
            written += len(line)
            i += 1
    out = os.path.join(work, "callgrind.pages")
    under = ["taskset", "-c", "0", "valgrind", "--tool=callgrind",
             "--instr-atstart=no", f"--callgrind-out-file={out}"]
    cost.SHAPES["pages"] = ("stdio", None, [], {}, False)
    client = cost.launch(e, "pages", under)

    def view(args):
        r = client.rpc("tools/call", {"name": "file_view", "arguments": args})
        if r is None or "error" in r or r["result"].get("isError"):
            raise RuntimeError(f"file_view failed: {json.dumps(r)[:500]}")
        return r["result"]["structuredContent"]

    def whole():
        offset, column, pages, lines = 1, 0, 0, 0
        while True:
            page = view({"path": "big.txt", "offset": offset, "column": column})
            pages += 1
            lines += len(page["lines"])
            if not page["has_more"]:
                return pages, lines
            offset, column = page["next"]["offset"], page["next"]["column"]

    def small(n):
        for _ in range(n):
            view({"path": "three.txt"})

    try:
        whole()
        small(3)
        cost.control(client.p.pid, "-i", "on")
        cost.control(client.p.pid, "-z")
        pages, lines = whole()
        cost.control(client.p.pid, "-d")
        cost.control(client.p.pid, "-z")
        small(20)
        cost.control(client.p.pid, "-d")
    finally:
        client.close()
        cost.finish(client.p)
    dumps = sorted(glob.glob(out + ".*"), key=lambda p: int(p.rsplit(".", 1)[1]))
    paged, _ = cost.parse_dump(dumps[-2])
    fixed = cost.parse_dump(dumps[-1])[0] / 20
    rest = paged - (pages - 1) * fixed
    print(f"1 MiB in {pages} pages ({lines} lines): {paged:,} instructions, "
          f"{paged / pages:,.0f} a page; a 3-byte read {fixed:,.0f}; "
          f"over one call for the same lines: {paged / rest:.2f}x (target <= 1.5)")


if __name__ == "__main__":
    main()
