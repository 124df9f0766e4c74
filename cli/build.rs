//! Links the `toolhost` executable with packed relative relocations
//! (`DT_RELR`) where the machine it is built on can run them.
//!
//! A position-independent executable of this size carries about 1.8 MB of
//! relative relocations (`.rela.dyn`, 24 bytes each) that the dynamic
//! loader reads at every start; packed, they take a few kilobytes, on disk
//! and in memory. The loader must understand them: glibc 2.36 or newer.
//! The flag is added only when the C library this build links against is
//! at least that (a `cargo install` runs the binary where it was built)
//! and the linker accepts it, and never when cross-compiling; otherwise
//! the executable is linked as usual. `TOOLHOST_NO_PACKED_RELOCS=1` turns
//! it off.

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TOOLHOST_NO_PACKED_RELOCS");
    if std::env::var_os("TOOLHOST_NO_PACKED_RELOCS").is_some_and(|v| v == "1") {
        return;
    }
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target != host || !target.ends_with("-linux-gnu") {
        return;
    }
    if glibc_version().is_some_and(|v| v >= (2, 36)) && linker_accepts() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
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
/// the flag.
fn linker_accepts() -> bool {
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
        .arg("-o")
        .arg(out_dir.join("relr-check"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
