#!/usr/bin/env python3
"""Which workspace crate may depend on which outside crate.

Reads `cargo metadata` (declared dependencies, build and normal, not dev)
and fails when a crate depends on a library reserved for another one, or
when a crate with a fixed dependency list (`ONLY`) depends on anything
else, so the boundaries between the crates are kept by the build, not by
review.
"""
import json
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
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
