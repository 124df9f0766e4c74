//! Builds the reference tools (`plugins/reference`) and the script engine
//! (`plugins/script`, `run_script`) to `wasm32-wasip2` so the `toolhost`
//! binary can embed them: `cargo build --release` alone yields a host that
//! lists and runs them.
//!
//! The guest workspace is built by a nested `cargo` into `target/guests`
//! (its own target directory, so it never waits on the outer build's lock).
//! If the `wasm32-wasip2` target is missing, `rustup target add` installs it.
//!
//! Each component is then compiled ahead of time by the host's own wasmtime
//! with the host's engine settings (`src/engine.rs`), framed with a
//! digest of those settings, and embedded beside it: a fresh host loads it
//! without compiling when the settings match, and compiles otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;

#[allow(dead_code)]
#[path = "src/engine.rs"]
mod engine;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    let plugins = root.join("plugins");
    for p in [
        "sdk/src",
        "sdk/Cargo.toml",
        "reference/src",
        "reference/build.rs",
        "reference/Cargo.toml",
        "script/src",
        "script/Cargo.toml",
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
        "-p",
        "toolhost-script",
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
        panic!("building the guest plugins for wasm32-wasip2 failed (see the output above)");
    }
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    for stem in ["toolhost_reference", "toolhost_script"] {
        let wasm = target_dir.join(format!("wasm32-wasip2/release/{stem}.wasm"));
        let out = out_dir.join(format!("{stem}.wasm"));
        std::fs::copy(&wasm, &out).unwrap_or_else(|e| panic!("copying {}: {e}", wasm.display()));
        let cwasm = out_dir.join(format!("{stem}.cwasm"));
        precompile(&out, &cwasm);
        digests(&out, &out_dir.join(stem));
        compress(&out);
        compress(&cwasm);
    }
}

/// `FILE.zst`, the file compressed: what the binary embeds (a component
/// and its artifact shrink to about a quarter).
fn compress(file: &Path) {
    let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    let packed = zstd::bulk::compress(&bytes, 19)
        .unwrap_or_else(|e| panic!("compressing {}: {e}", file.display()));
    let mut out = file.as_os_str().to_owned();
    out.push(".zst");
    std::fs::write(&out, packed).unwrap_or_else(|e| panic!("writing {out:?}: {e}"));
}

/// The component's digests, so a start does not hash the embedded bytes
/// (1.6 MB): `STEM.sha256`, its `sha256:` digest as the catalog reports it
/// (~1.5 ms per process), and `STEM.blake3`, the 32 bytes of its BLAKE3
/// digest, which keys its compile-cache entry (~0.6 ms).
fn digests(wasm: &Path, stem: &Path) {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(wasm).unwrap_or_else(|e| panic!("reading {}: {e}", wasm.display()));
    let hex: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let write = |ext: &str, data: &[u8]| {
        let out = stem.with_extension(ext);
        std::fs::write(&out, data).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
    };
    write("sha256", format!("sha256:{hex}").as_bytes());
    write("blake3", blake3::hash(&bytes).as_bytes());
}

/// Compiles an embedded component ahead of time with the host's engine
/// settings (`src/engine.rs`) into a framed artifact the host loads
/// without compiling. If this engine cannot compile here, the artifact is
/// empty and the host compiles the component at start, as it would anyway.
fn precompile(wasm: &Path, out: &Path) {
    println!(
        "cargo:rerun-if-changed={}",
        Path::new("src/engine.rs").display()
    );
    let bytes = std::fs::read(wasm).unwrap_or_else(|e| panic!("reading {}: {e}", wasm.display()));
    let mut config = wasmtime::Config::new();
    engine::compile_settings(&mut config);
    let framed = wasmtime::Engine::new(&config)
        .and_then(|e| {
            let artifact = e.precompile_component(&bytes)?;
            Ok(engine::frame(&e, &artifact))
        })
        .unwrap_or_else(|e| {
            println!("cargo:warning=not precompiling {}: {e:#}", wasm.display());
            Vec::new()
        });
    std::fs::write(out, framed).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
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
