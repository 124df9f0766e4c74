//! The engine's compilation settings, in one place, and the frame of the
//! reference component's precompiled artifact.
//!
//! The sandbox builds its engine from [`compile_settings`]; the build script
//! (`build.rs`, which compiles this file too, by path) precompiles the
//! embedded reference component with the same settings and the same
//! wasmtime, so a fresh host runs it without compiling (a cold start without
//! a compile cache). The artifact is framed as
//! `MAGIC ‖ compatibility (u64, little-endian) ‖ Engine::precompile_component`.
//! The host uses it only when the frame's compatibility equals its own
//! engine's ([`compatibility`]) and wasmtime recognises the bytes as a
//! component; otherwise it compiles the component as before.
//!
//! This file uses nothing but `std` and `wasmtime`.

use std::hash::{Hash, Hasher};

use wasmtime::{Config, Engine, OptLevel, Precompiled};

/// The first bytes of a framed precompiled artifact.
pub const MAGIC: &[u8; 8] = b"THPRE001";

/// Sets everything on `c` that decides what compiled code looks like (the
/// allocator's settings are the sandbox's own).
pub fn compile_settings(c: &mut Config) {
    c.wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .cranelift_opt_level(OptLevel::Speed)
        .max_wasm_stack(1 << 20);
}

/// A digest of the settings `engine`'s compiled code depends on
/// (`Engine::precompile_compatibility_hash`, which covers the wasmtime
/// version, target, compiler flags and tunables).
pub fn compatibility(engine: &Engine) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    h.finish()
}

/// `artifact` (from `engine.precompile_component`) in its frame.
#[cfg_attr(not(test), allow(dead_code))] // the build script's
pub fn frame(engine: &Engine, artifact: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 8 + artifact.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&compatibility(engine).to_le_bytes());
    out.extend_from_slice(artifact);
    out
}

/// The artifact inside `framed` when it was compiled for an engine like
/// `engine` and is a compiled component; `None` otherwise (an empty or
/// foreign frame, other settings, another wasmtime).
pub fn unframe<'a>(engine: &Engine, framed: &'a [u8]) -> Option<&'a [u8]> {
    let rest = framed.strip_prefix(MAGIC.as_slice())?;
    let (hash, artifact) = rest.split_first_chunk::<8>()?;
    if u64::from_le_bytes(*hash) != compatibility(engine) {
        return None;
    }
    matches!(
        Engine::detect_precompiled(artifact),
        Some(Precompiled::Component)
    )
    .then_some(artifact)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: no imports, no exports.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    fn engine(fuel: bool) -> Engine {
        let mut c = Config::new();
        compile_settings(&mut c);
        c.consume_fuel(fuel);
        Engine::new(&c).unwrap()
    }

    #[test]
    fn a_frame_opens_only_for_an_engine_with_the_same_settings() {
        let e = engine(true);
        let artifact = e.precompile_component(EMPTY_COMPONENT).unwrap();
        let framed = frame(&e, &artifact);
        assert_eq!(unframe(&e, &framed), Some(&artifact[..]));
        assert_eq!(unframe(&engine(true), &framed), Some(&artifact[..]));
        // Other compilation settings, a damaged frame, no frame.
        assert_eq!(unframe(&engine(false), &framed), None);
        let mut bad = framed.clone();
        bad[MAGIC.len()] ^= 1;
        assert_eq!(unframe(&e, &bad), None);
        assert_eq!(unframe(&e, &framed[..MAGIC.len() + 4]), None);
        assert_eq!(unframe(&e, &artifact), None);
        assert_eq!(unframe(&e, &[]), None);
        // A framed module is not a component.
        let module = e.precompile_module(b"\0asm\x01\0\0\0").unwrap();
        assert_eq!(unframe(&e, &frame(&e, &module)), None);
    }
}
