//! The components built into the binary: the reference tools and the
//! script engine, built from `plugins/` by this crate's build script, each
//! with its code compiled ahead of time by this crate's wasmtime and engine
//! settings, and its digests.
//!
//! Both the component and its compiled artifact are kept compressed
//! (zstd), which makes them about a quarter of their size in the binary.
//! They are unpacked only when needed: the artifact to fill a compile-cache
//! entry (or, without a cache, to load it), the component to compile it
//! when the artifact does not fit this engine. A start whose cache holds
//! the entry unpacks neither ([`Sandbox::load_embedded`](crate::Sandbox::load_embedded)).

/// One component built into the binary, with its precompiled artifact and
/// the digests the build script computed.
#[derive(Debug, Clone, Copy)]
pub struct Embedded {
    wasm: Packed,
    precompiled: Packed,
    /// The `sha256:` digest of the component, as the catalog reports it.
    pub sha256: &'static str,
    /// The BLAKE3 digest of the component: the key of its compile-cache
    /// entry.
    pub blake3: blake3::Hash,
}

/// Bytes as the binary holds them.
#[derive(Debug, Clone, Copy)]
enum Packed {
    Zstd(&'static [u8]),
    Plain(&'static [u8]),
}

impl Packed {
    /// The bytes unpacked; a stream that does not decode gives none (the
    /// caller then finds no component, or no artifact that fits).
    fn unpack(self) -> Vec<u8> {
        match self {
            Packed::Zstd(z) => zstd::stream::decode_all(z).unwrap_or_default(),
            Packed::Plain(p) => p.to_vec(),
        }
    }
}

impl Embedded {
    /// The component's bytes.
    pub fn wasm(&self) -> Vec<u8> {
        self.wasm.unpack()
    }

    /// The precompiled artifact in its frame (see `engine.rs`); empty when
    /// the build could not precompile the component.
    pub fn precompiled(&self) -> Vec<u8> {
        self.precompiled.unpack()
    }

    /// This component with `framed` as its precompiled artifact, as it is:
    /// to see how a load treats an artifact that is damaged or built for
    /// another engine.
    pub fn with_precompiled(&self, framed: &'static [u8]) -> Embedded {
        Embedded {
            precompiled: Packed::Plain(framed),
            ..*self
        }
    }
}

/// The reference tools, built from `plugins/reference`.
pub static REFERENCE: Embedded = Embedded {
    wasm: Packed::Zstd(include_bytes!(concat!(
        env!("OUT_DIR"),
        "/toolhost_reference.wasm.zst"
    ))),
    precompiled: Packed::Zstd(include_bytes!(concat!(
        env!("OUT_DIR"),
        "/toolhost_reference.cwasm.zst"
    ))),
    sha256: include_str!(concat!(env!("OUT_DIR"), "/toolhost_reference.sha256")),
    blake3: blake3::Hash::from_bytes(*include_bytes!(concat!(
        env!("OUT_DIR"),
        "/toolhost_reference.blake3"
    ))),
};

/// The script engine (`run_script`), built from `plugins/script`: a
/// JavaScript interpreter whose inner tool calls go through the host
/// (`toolhost::script`).
pub static SCRIPT: Embedded = Embedded {
    wasm: Packed::Zstd(include_bytes!(concat!(
        env!("OUT_DIR"),
        "/toolhost_script.wasm.zst"
    ))),
    precompiled: Packed::Zstd(include_bytes!(concat!(
        env!("OUT_DIR"),
        "/toolhost_script.cwasm.zst"
    ))),
    sha256: include_str!(concat!(env!("OUT_DIR"), "/toolhost_script.sha256")),
    blake3: blake3::Hash::from_bytes(*include_bytes!(concat!(
        env!("OUT_DIR"),
        "/toolhost_script.blake3"
    ))),
};
