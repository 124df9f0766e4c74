//! Builds the reference tools (`plugins/reference`) to `wasm32-wasip2` so the
//! `toolhost` binary can embed them: `cargo build --release` alone yields a
//! host that lists and runs them.
//!
//! The guest workspace is built by a nested `cargo` into `target/guests`
//! (its own target directory, so it never waits on the outer build's lock).
//! If the `wasm32-wasip2` target is missing, `rustup target add` installs it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    let plugins = root.join("plugins");
    for p in [
        "sdk/src",
        "sdk/Cargo.toml",
        "reference/src",
        "reference/Cargo.toml",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", plugins.join(p).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("wit").display());

    ensure_wasm_target();
    let target_dir = root.join("target").join("guests");
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args([
        "build",
        "--release",
        "--locked",
        "--target",
        "wasm32-wasip2",
        "-p",
        "toolhost-reference",
    ])
    .arg("--manifest-path")
    .arg(plugins.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(&target_dir);
    scrub_env(&mut cmd);
    let status = cmd
        .status()
        .expect("running cargo for the reference plugin");
    if !status.success() {
        panic!("building plugins/reference for wasm32-wasip2 failed (see the output above)");
    }
    let wasm = target_dir.join("wasm32-wasip2/release/toolhost_reference.wasm");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("toolhost_reference.wasm");
    std::fs::copy(&wasm, &out).unwrap_or_else(|e| panic!("copying {}: {e}", wasm.display()));
}

/// The outer build's settings must not leak into the guest build.
fn scrub_env(cmd: &mut Command) {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("CARGO_") && k != "CARGO_HOME"
            || k == "RUSTFLAGS"
            || k.starts_with("RUSTC")
        {
            cmd.env_remove(&k);
        }
    }
}

fn ensure_wasm_target() {
    let sysroot = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let installed = sysroot
        .map(|s| Path::new(&s).join("lib/rustlib/wasm32-wasip2").exists())
        .unwrap_or(false);
    if installed {
        return;
    }
    println!("cargo:warning=installing the wasm32-wasip2 target with rustup");
    let ok = Command::new("rustup")
        .args(["target", "add", "wasm32-wasip2"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        panic!("the wasm32-wasip2 target is missing; run `rustup target add wasm32-wasip2`");
    }
}
