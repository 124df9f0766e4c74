//! Builds the test guests of `tests/plugins` for the tests of any crate in
//! the workspace (included with `#[path]` by each test tree's support
//! module, so the build command lives in one place).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository root: the nearest ancestor of the crate being tested
/// that holds `tests/plugins`.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("tests/plugins/Cargo.toml").is_file())
        .expect("the crate lies inside the toolhost repository")
        .to_path_buf()
}

/// Builds `tests/plugins` (once per test binary) and returns the path of
/// one component, e.g. `test_plugin("tp_hostile")`.
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
