//! How the `toolhost` executable is linked, where the machine it is built
//! on allows.
//!
//! **Packed relative relocations** (`DT_RELR`). A position-independent
//! executable of this size carries about 1.8 MB of relative relocations
//! (`.rela.dyn`, 24 bytes each) that the dynamic loader reads at every
//! start; packed, they take a few kilobytes, on disk and in memory. The
//! loader must understand them: glibc 2.36 or newer. The flag is added
//! only when the C library this build links against is at least that (a
//! `cargo install` runs the binary where it was built) and the linker
//! accepts it, and never when cross-compiling. `TOOLHOST_NO_PACKED_RELOCS=1`
//! turns it off.
//!
//! **The functions a server runs, placed together** (release builds).
//! Linux maps the code pages a process runs and, with each, the pages
//! around it (fault-around); the few thousand functions a serving
//! `toolhost` runs lie spread over its 33 MiB of machine code, so most of
//! that became resident. `link-order.txt` names them (written by
//! `cli/benches/cost/link_order.py`), and the linker that ships with the
//! Rust toolchain (`rust-lld`, which reads such a list; the system's GNU ld
//! does not) puts them first. Used only when that linker is in the
//! toolchain; a name the build does not have is skipped, so a stale list
//! costs locality, never correctness. `TOOLHOST_NO_LINK_ORDER=1` links
//! with the system linker as usual; `TOOLHOST_LINK_MAP=FILE` writes the
//! linker's map there (what `link_order.py` reads).

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=link-order.txt");
    for var in [
        "TOOLHOST_NO_PACKED_RELOCS",
        "TOOLHOST_NO_LINK_ORDER",
        "TOOLHOST_LINK_MAP",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target != host || !target.ends_with("-linux-gnu") {
        return;
    }
    let lld = ordered_link(&target);
    let packed = std::env::var_os("TOOLHOST_NO_PACKED_RELOCS").is_none_or(|v| v != "1");
    if packed && glibc_version().is_some_and(|v| v >= (2, 36)) && linker_accepts(lld.as_deref()) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// In a release build with `rust-lld` in the toolchain and the list at
/// hand: links with it, in the list's order (see the module docs); the
/// linker driver's arguments that pick it.
fn ordered_link(target: &str) -> Option<Vec<String>> {
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let off = std::env::var_os("TOOLHOST_NO_LINK_ORDER").is_some_and(|v| v == "1");
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").ok()?);
    let order = dir.join("link-order.txt");
    if !release || off || !order.is_file() {
        return None;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .args(["--print", "sysroot"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let sysroot = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    let gcc_ld = sysroot.join(format!("lib/rustlib/{target}/bin/gcc-ld"));
    if !gcc_ld.join("ld.lld").is_file() {
        return None;
    }
    let driver = vec![
        "-fuse-ld=lld".to_string(),
        format!("-B{}", gcc_ld.display()),
    ];
    for arg in &driver {
        println!("cargo:rustc-link-arg-bins={arg}");
    }
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    if let Some(map) = std::env::var_os("TOOLHOST_LINK_MAP") {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,-Map={}",
            PathBuf::from(map).display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-demangle");
    }
    Some(driver)
}

/// The version of the C library on this machine (`getconf
/// GNU_LIBC_VERSION`: "glibc 2.36").
fn glibc_version() -> Option<(u32, u32)> {
    let out = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.trim().strip_prefix("glibc ")?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Whether `cc`, the linker driver rustc uses here, links a program with
/// the flag (with `driver`'s arguments, which pick the linker, if any).
fn linker_accepts(driver: Option<&[String]>) -> bool {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let source = out_dir.join("relr-check.c");
    if std::fs::write(&source, "int main(void) { return 0; }\n").is_err() {
        return false;
    }
    Command::new(std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".into()))
        .arg(&source)
        .arg("-pie")
        .arg("-fPIE")
        .arg("-Wl,-z,pack-relative-relocs")
        .args(driver.unwrap_or_default())
        .arg("-o")
        .arg(out_dir.join("relr-check"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
