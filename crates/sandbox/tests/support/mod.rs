//! Helpers of the sandbox's tests: the test guests of `tests/plugins`,
//! built as the integration tests build them.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds `tests/plugins` (once per run, as the integration tests do) and
/// returns the path of one component.
pub fn test_plugin(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let root = repo_root();
        let target = root.join("target").join("guests");
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "--release",
                "--locked",
                "--target",
                "wasm32-wasip2",
            ])
            .arg("--manifest-path")
            .arg(root.join("tests/plugins/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .status()
            .expect("running cargo for tests/plugins");
        assert!(status.success(), "building tests/plugins failed");
        target.join("wasm32-wasip2/release")
    });
    let path = dir.join(format!("{name}.wasm"));
    assert!(path.exists(), "{} was not built", path.display());
    path
}
