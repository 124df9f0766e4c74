//! The components built into the binary: the reference tools and the
//! script engine, built from `plugins/` by this crate's build script, each
//! with its code compiled ahead of time by this crate's wasmtime and engine
//! settings, and its digests.

/// The reference tools, built from `plugins/reference` by the build script.
pub static REFERENCE_PLUGIN: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_reference.wasm"));

/// [`REFERENCE_PLUGIN`] compiled by the build script with this host's
/// wasmtime and engine settings (empty if it could not be): a fresh host
/// runs the reference tools without compiling them.
pub static REFERENCE_PRECOMPILED: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_reference.cwasm"));

/// The `sha256:` digest of [`REFERENCE_PLUGIN`], computed by the build
/// script.
pub static REFERENCE_DIGEST: &str =
    include_str!(concat!(env!("OUT_DIR"), "/toolhost_reference.sha256"));

/// The BLAKE3 digest of [`REFERENCE_PLUGIN`] (the key of its compile-cache
/// entry), computed by the build script.
pub static REFERENCE_BLAKE3: blake3::Hash = blake3::Hash::from_bytes(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/toolhost_reference.blake3"
)));

/// The script engine (`run_script`), built from `plugins/script` by the
/// build script: a JavaScript interpreter whose inner tool calls go through
/// the host (`toolhost::tools::script`).
pub static SCRIPT_PLUGIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_script.wasm"));

/// [`SCRIPT_PLUGIN`] compiled by the build script, as
/// [`REFERENCE_PRECOMPILED`].
pub static SCRIPT_PRECOMPILED: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_script.cwasm"));

/// The `sha256:` digest of [`SCRIPT_PLUGIN`].
pub static SCRIPT_DIGEST: &str = include_str!(concat!(env!("OUT_DIR"), "/toolhost_script.sha256"));

/// The BLAKE3 digest of [`SCRIPT_PLUGIN`].
pub static SCRIPT_BLAKE3: blake3::Hash = blake3::Hash::from_bytes(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/toolhost_script.blake3"
)));
