//! The host side of `wit/toolhost.wit`, generated once for the worlds a
//! plugin can target.
//!
//! - [`plugin`]: `describe` and `call` (every plugin); the sandbox
//!   pre-links this world for calls.
//! - [`with_effects`]: `plugin` plus the optional `planner` (dry-run) and
//!   `prober` exports; used only for dry-runs and probes, and only when the
//!   component exports them.
//! - [`with_discovery`]: `plugin` plus the optional `discovery` export
//!   (task words); used only for its `discovery` interface, once at load,
//!   and only when the component exports it.
//!
//! Each world gets its own copy of the shared `types` interface, so the
//! call context and tool errors are built and read per world.

pub(super) mod plugin {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "plugin",
        // A question whose answer comes only with a later request stops
        // the call (`ask_link`).
        imports: { "toolhost:plugin/client.ask": trappable },
    });
}

pub(super) mod with_effects {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "plugin-with-effects",
        imports: { "toolhost:plugin/client.ask": trappable },
    });
}

pub(super) mod with_discovery {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "plugin-with-discovery",
        imports: { "toolhost:plugin/client.ask": trappable },
    });
}
