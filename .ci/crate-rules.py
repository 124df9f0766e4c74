#!/usr/bin/env python3
"""Which workspace crate may depend on which outside crate, and which
`toolhost` names the host library's users may reach.

Reads `cargo metadata` (declared dependencies, build and normal, not dev)
and fails when a crate depends on a library reserved for another one, or
when a crate with a fixed dependency list (`ONLY`) depends on anything
else, so the boundaries between the crates are kept by the build, not by
review.

Then the facade rule: the integration tests (`tests/integration`) and the
MCP server (`crates/mcp/src`) use the host library only through the names
at its root (`toolhost::Host`, `toolhost::ErrorCode`, ...) and its
documented facade modules (`FACADE_MODULES`). A path into any other module
(`toolhost::policy::delegation::...`, `toolhost::sandbox::...`), in code or
in a doc link, fails the check, except in `FACADE_EXEMPT` files and for
the hooks in `HIDDEN_HOOKS`. The MCP server names no lower crate either.

Usage: crate-rules.py [--self-test]
"""
import json
import pathlib
import re
import subprocess
import sys

# outside crate -> the workspace crates allowed to depend on it
RULES = {
    "clap": {"toolhost-cli"},
    "clap_complete": {"toolhost-cli"},
    "tracing-subscriber": {"toolhost-cli"},
    "mimalloc": {"toolhost-cli"},
    "tiktoken-rs": {"toolhost-cli"},
    "rmcp": {"toolhost-mcp"},
    "hyper-util": {"toolhost-mcp"},
    "notify": {"toolhost-mcp"},
    "wasmtime": {"toolhost-sandbox"},
    "wasmtime-wasi": {"toolhost-sandbox"},
    "wasmtime-wasi-http": {"toolhost-sandbox"},
    "wasmtime-wasi-io": {"toolhost-sandbox"},
    "rusqlite": {"toolhost-store"},
    "postgres": {"toolhost-store"},
}

# workspace crate -> every crate it may depend on, nothing else. The exec
# sandbox is Linux system calls and the bwrap binary: no async runtime, no
# engine, no store, nothing of the host.
ONLY = {
    "toolhost-exec": {
        "rustix",
        "libc",
        "thiserror",
        "serde_json",
        "toolhost-compact-json",
    },
    # The operator's console: pages, sessions and server-sent events over
    # the host library's store; no protocol SDK, no engine, no database
    # driver of its own, no front-end framework.
    "toolhost-console": {
        "toolhost",
        "http",
        "http-body",
        "http-body-util",
        "bytes",
        "tokio",
        "thiserror",
        "serde_json",
        "getrandom",
        "hex",
        "tracing",
    },
}


# The modules at the root of `toolhost` that are part of its facade: each
# is documented in host/src/lib.rs with why it is a module and not root
# names.
FACADE_MODULES = {
    "discovery",  # ranking tools for a task: Index, Doc, Hit, index_of, words
    "journal",  # reading the journal back: Entry, Filter, stats
    "trust",  # lock, signatures, OCI, poisoning scan
    "messages",  # the host's own texts
}

# `#[doc(hidden)]` test and bench hooks the checked code may name, as
# full paths. Keep it short: a hook that a user needs is a facade item.
HIDDEN_HOOKS: set = set()

# Files the facade rule skips, with why.
FACADE_EXEMPT: set = set()

# Where the facade rule applies, and which lower crates each may name.
FACADE_USERS = {
    "tests/integration": set(),
    "crates/mcp/src": {"toolhost_base", "toolhost_sandbox"},
}

USE_RE = re.compile(r"\buse\s+(toolhost::[^;]+);", re.S)
PATH_RE = re.compile(r"(?<![\w:])toolhost::((?:[a-z_][a-z0-9_]*::)+)[A-Za-z_0-9{*]")


def expand_use(tree: str) -> list:
    """The paths one `use` tree names: `a::{b, c::{d, e as f}}` -> a::b,
    a::c::d, a::c::e."""
    tree = re.sub(r"\s*(::|\{|\}|,)\s*", r"\1", re.sub(r"\s+", " ", tree.strip()))
    m = re.match(r"^([^{]*)\{(.*)\}$", tree)
    if not m:
        return [tree.split(" as ")[0]]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p:
            out += expand_use(prefix + p)
    return out


def deep_paths(text: str) -> list:
    """(line, path) of every `toolhost::module::...` path in `text`."""
    found = []
    for m in USE_RE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        for path in expand_use(m.group(1)):
            parts = path.split("::")
            if len(parts) > 2 and parts[1] not in ("self", "*"):
                found.append((line, path))
    rest = USE_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for m in PATH_RE.finditer(rest):
        line = rest.count("\n", 0, m.start()) + 1
        found.append((line, "toolhost::" + m.group(1).rstrip(":")))
    return found


def allowed_path(path: str) -> bool:
    module = path.split("::")[1]
    if module in FACADE_MODULES:
        return True
    return any(path == h or path.startswith(h + "::") for h in HIDDEN_HOOKS)


def facade_broken(root: pathlib.Path) -> list:
    broken = []
    for folder, lower_ok in FACADE_USERS.items():
        for f in sorted((root / folder).rglob("*.rs")):
            rel = f.relative_to(root).as_posix()
            if rel in FACADE_EXEMPT:
                continue
            text = f.read_text()
            for line, path in deep_paths(text):
                if not allowed_path(path):
                    broken.append(
                        f"{rel}:{line}: `{path}` is below the toolhost facade; "
                        "use a root item (host/src/lib.rs) or add one"
                    )
            if folder.startswith("crates/mcp"):
                for crate in sorted(lower_ok):
                    for m in re.finditer(rf"\b{crate}::", text):
                        line = text.count("\n", 0, m.start()) + 1
                        broken.append(
                            f"{rel}:{line}: the MCP server names {crate}; "
                            "it uses the host only through toolhost's facade"
                        )
    return broken


def self_test() -> int:
    text = """
use toolhost::{Host, journal::Filter, policy::{session::Verifier, Right}};
use toolhost::sandbox::Limits as L;
use toolhost::trust::{self, Lock};
fn f() { toolhost::tools::artifact::uri("x"); toolhost::ErrorCode::Denied; }
/// See [`toolhost::record::journal`].
"""
    got = [p for _, p in deep_paths(text)]
    want = [
        "toolhost::journal::Filter",
        "toolhost::policy::session::Verifier",
        "toolhost::policy::Right",
        "toolhost::sandbox::Limits",
        "toolhost::trust::self",
        "toolhost::trust::Lock",
        "toolhost::tools::artifact",
        "toolhost::record",
    ]
    assert got == want, got
    assert [p for p in got if not allowed_path(p)] == [
        "toolhost::policy::session::Verifier",
        "toolhost::policy::Right",
        "toolhost::sandbox::Limits",
        "toolhost::tools::artifact",
        "toolhost::record",
    ]
    print("crate-rules self-test passed")
    return 0


def main() -> int:
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--locked"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    broken = []
    for pkg in meta["packages"]:
        for dep in pkg["dependencies"]:
            if dep.get("kind") == "dev":
                continue
            allowed = RULES.get(dep["name"])
            if allowed is not None and pkg["name"] not in allowed:
                broken.append(
                    f"{pkg['name']} depends on {dep['name']}, which only "
                    f"{', '.join(sorted(allowed))} may use"
                )
            only = ONLY.get(pkg["name"])
            if only is not None and dep["name"] not in only:
                broken.append(
                    f"{pkg['name']} depends on {dep['name']}; it may depend "
                    f"only on {', '.join(sorted(only))}"
                )
    for line in broken:
        print(f"crate rule broken: {line}", file=sys.stderr)
    if not broken:
        names = sorted(p["name"] for p in meta["packages"])
        print(f"crate rules hold for {', '.join(names)}")
    facade = facade_broken(pathlib.Path(__file__).resolve().parent.parent)
    for line in facade:
        print(f"facade rule broken: {line}", file=sys.stderr)
    if not facade:
        print(f"facade rule holds for {', '.join(FACADE_USERS)}")
    return 1 if broken or facade else 0


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
