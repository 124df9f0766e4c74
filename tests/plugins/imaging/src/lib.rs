//! `tp-imaging`: two image tools that do nothing, loaded by the discovery
//! eval under the namespace `image` (`image.resize`, `image.convert`).
use toolhost_sdk::{Context, Deserialize, JsonSchema, Serialize, SideEffect, Tool, ToolError};

/// What every tool of this catalog returns: it only stands in for a tool
/// with that contract, so that the discovery eval searches real
/// descriptors loaded from a real component.
#[derive(Serialize, JsonSchema)]
struct Stub {
    /// Always false: nothing was done.
    done: bool,
}

/// Answers every call the same way.
fn stub<A>(_: &Context, _: A) -> Result<Stub, ToolError> {
    Ok(Stub { done: false })
}

/// Arguments of `resize`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ImageResizeArgs {
    /// Picture to scale.
    path: Option<String>,
    /// Target width in pixels.
    width: Option<String>,
    /// Target height in pixels.
    height: Option<String>,
}

/// Arguments of `convert`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ImageConvertArgs {
    /// Source picture.
    path: Option<String>,
    /// Png, jpeg or webp.
    format: Option<String>,
    /// Compression quality 1-100.
    quality: Option<String>,
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("resize", stub::<ImageResizeArgs>)
            .title("Resize an image")
            .description("Scale a PNG or JPEG picture to a new width and height, keeping the aspect ratio unless told otherwise; writes the result next to the original.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("convert", stub::<ImageConvertArgs>)
            .title("Convert image format")
            .description("Re-encode a picture as PNG, JPEG or WebP with a chosen quality.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
    ]
}

toolhost_sdk::plugin!(tools);
