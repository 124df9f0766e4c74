"""``python -m toolhost_kit``: build a tool module into a component.

    python -m toolhost_kit build app.py -o app.wasm [--wit DIR]
    python -m toolhost_kit describe app.py

``build`` first imports the module natively (so a schema problem fails in
a second, with a message naming the parameter), then runs componentize-py
against the toolhost WIT (world ``plugin-with-discovery``: the tools and
their task words) with a small entry module that
imports the tool module and the kit's export. ``describe`` prints the
descriptors the component will report, as JSON, without building.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import shutil
import tempfile
import time
from pathlib import Path
from typing import NoReturn

from . import COMPONENTIZE_PY_VERSION, runtime
from .schema import KitError

ENTRY = "toolhost_entry"
RESERVED = {"toolhost_kit", "wit_world", ENTRY, "plugin", "componentize_py_types"}
KIT_PARENT = Path(__file__).resolve().parent.parent


def _die(message: str) -> NoReturn:
    print(f"toolhost_kit: {message}", file=sys.stderr)
    sys.exit(2)


def _load(apps: list[Path]) -> list[str]:
    """Imports the tool modules natively; returns their module names."""
    names = []
    for app in apps:
        if not app.is_file():
            _die(f"{app}: no such file")
        name = app.stem
        if not name.isidentifier() or name in RESERVED or name.startswith("componentize_py"):
            _die(f"{app}: the module name {name!r} is not usable; rename the file")
        sys.path.insert(0, str(app.parent))
        try:
            spec = importlib.util.spec_from_file_location(name, app)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except KitError as e:
            _die(f"{app}: {e}")
        finally:
            sys.path.pop(0)
        names.append(name)
    return names


def _wit_dir(given: str | None) -> Path:
    for candidate in (given, os.environ.get("TOOLHOST_WIT"), KIT_PARENT.parent.parent / "wit"):
        if candidate and (Path(candidate) / "toolhost.wit").is_file():
            return Path(candidate).resolve()
    _die(
        "cannot find the toolhost WIT (wit/toolhost.wit of the toolhost repository); "
        "pass --wit DIR or set TOOLHOST_WIT"
    )


def _componentize_py_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("componentize-py")
    except Exception:  # noqa: BLE001
        return None


def build(args: argparse.Namespace) -> int:
    apps = [Path(a).resolve() for a in args.app]
    test_tools = os.environ.get("TOOLHOST_KIT_TEST_TOOLS") == "1"
    names = _load(apps)
    if test_tools:
        from . import testing  # noqa: F401  (registers the hidden test tools)
    if not runtime.tools():
        _die("the module registers no tool; decorate a function with @tool")
    wit = _wit_dir(args.wit)
    found = _componentize_py_version()
    if found is None:
        _die(f"componentize-py is not installed: pip install componentize-py=={COMPONENTIZE_PY_VERSION}")
    if found != COMPONENTIZE_PY_VERSION:
        print(
            f"toolhost_kit: warning: componentize-py {found} is installed; the kit is tested "
            f"with {COMPONENTIZE_PY_VERSION}",
            file=sys.stderr,
        )
    out = Path(args.output).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = tempfile.mkdtemp(prefix="toolhost-kit-")
    try:
        lines = [f"import {n}  # noqa: F401" for n in names]
        if test_tools:
            lines.append("import toolhost_kit.testing  # noqa: F401")
        guest = "Tools, Discovery" if args.world.endswith("discovery") else "Tools"
        lines.append(f"from toolhost_kit.guest import {guest}  # noqa: F401")
        (Path(stage) / f"{ENTRY}.py").write_text("\n".join(lines) + "\n")
        path_dirs = [str(stage)] + sorted({str(a.parent) for a in apps}) + [str(KIT_PARENT)]
        cmd = [
            sys.executable,
            "-c",
            "import componentize_py; componentize_py.script()",
            "-q",
            "-d",
            str(wit),
            "-w",
            args.world,
            "componentize",
            ENTRY,
            "-o",
            str(out),
        ]
        for d in path_dirs:
            cmd += ["-p", d]
        start = time.monotonic()
        print(
            f"toolhost_kit: building {args.output} with componentize-py "
            "(the Python interpreter and your modules; usually 15 to 60 s)",
            file=sys.stderr,
        )
        ran = _run_with_progress(cmd, start)
        if ran.returncode != 0:
            _die(f"componentize-py failed (exit status {ran.returncode})")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    size = out.stat().st_size
    names_ = ", ".join(t.name for t in runtime.tools())
    print(
        f"toolhost_kit: built {args.output} ({size / 1e6:.1f} MB, {time.monotonic() - start:.0f} s): {names_}",
        file=sys.stderr,
    )
    return 0


def _run_with_progress(cmd: list[str], start: float) -> subprocess.CompletedProcess:
    """Runs the build, saying every 10 s that it is still going."""
    proc = subprocess.Popen(cmd)
    while True:
        try:
            proc.wait(timeout=10)
            break
        except subprocess.TimeoutExpired:
            print(
                f"toolhost_kit: still building ({time.monotonic() - start:.0f} s)",
                file=sys.stderr,
            )
    return subprocess.CompletedProcess(cmd, proc.returncode)


def describe(args: argparse.Namespace) -> int:
    _load([Path(a).resolve() for a in args.app])
    out = []
    for t in runtime.tools():
        d = t.descriptor()
        # The descriptor carries its schemas as JSON text (as the WIT does);
        # a person reads them as JSON.
        for key in ("input_schema", "output_schema"):
            if d[key] is not None:
                d[key] = json.loads(d[key])
        out.append(d)
    print(json.dumps(out, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m toolhost_kit", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build tool module(s) into a Wasm component")
    b.add_argument("app", nargs="+", help="Python file(s) whose @tool functions to export")
    b.add_argument("-o", "--output", required=True, help="component to write (.wasm)")
    b.add_argument("--wit", help="WIT directory (default: the toolhost repository's wit/)")
    b.add_argument(
        "--world",
        default="plugin-with-discovery",
        help="WIT world (default: plugin-with-discovery; plugin: without task words)",
    )
    b.set_defaults(run=build)
    d = sub.add_parser("describe", help="print the descriptors as JSON, without building")
    d.add_argument("app", nargs="+")
    d.set_defaults(run=describe)
    args = p.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
