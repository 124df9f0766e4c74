//! toolhost-sandbox: the only crate of toolhost that touches wasmtime.
//!
//! [`Sandbox`] owns one engine (pooling allocator, copy-on-write heap images,
//! fuel, epoch interruption), one linker with WASI preview 2 plus
//! `wasi:http` (outgoing requests go through the host's checks in [`http`])
//! and a [`CompileCache`]. [`Sandbox::load`] turns component bytes into a
//! [`Plugin`]: compiled once (or read from the cache), type-checked against
//! the `toolhost:plugin` world and pre-linked.
//!
//! [`Plugin::call`] runs one call in a fresh store and instance that holds
//! only what [`CallRequest`] grants (the instance usually made ahead of the
//! call on a background thread, and the store dropped there after it; see
//! `spare`). Deny by default:
//!
//! | resource            | default                                        |
//! |---------------------|------------------------------------------------|
//! | filesystem          | none; only the request's mounts, each an open  |
//! |                     | directory ([`Mount`]; the pipeline opens grants|
//! |                     | beneath the workspace root, following no link) |
//! | FIFOs, sockets,     | never opened: `open-at` of one fails with      |
//! | devices             | `not-permitted` before it is opened (`fsguard`)|
//! | symbolic links      | a guest cannot create any (`symlink-at` →      |
//! |                     | `not-permitted`); existing ones resolve only   |
//! |                     | inside their mount                             |
//! | environment, args   | empty                                          |
//! | network             | `wasi:http` requests to the call's granted     |
//! |                     | origins only, checked by the host ([`http`])   |
//! | sockets, DNS        | denied (no raw TCP/UDP, no `ip-name-lookup`)   |
//! | native programs     | `toolhost:plugin/exec` runs only the call's    |
//! |                     | programs, in an OS sandbox from the same grant |
//! |                     | ([`CallRequest::exec`], `exec_link`); none for |
//! |                     | a call without them, a dry-run or a probe      |
//! | file indexes        | `toolhost:plugin/files` indexes only files the |
//! |                     | guest could open through the call's mounts     |
//! |                     | (`files_link`), cached host-wide               |
//! | inner tool calls    | `toolhost:plugin/script` reaches the host's    |
//! |                     | call path only through the request's           |
//! |                     | [`ScriptLink`] (`script_link`); none for any   |
//! |                     | call but the host's script runner              |
//! | stdin               | closed                                         |
//! | stdout, stderr      | captured, first [`Limits::max_log_bytes`] kept |
//! | CPU                 | [`Limits::fuel`] and a wall-clock deadline     |
//! | wall clock          | the deadline holds inside host calls too:      |
//! |                     | sleeps and polls end at it, blocked system     |
//! |                     | calls are interrupted (`deadline`)             |
//! | memory              | [`Limits::memory_bytes`] across all memories   |
//! | output              | [`Limits::max_output_bytes`]                   |
//! | dry-run, probe      | every mount read-only, no network, whatever    |
//! |                     | the request says ([`Plugin::dry_run`])         |
//!
//! A component must be built against [`CONTRACT`] (`toolhost:plugin@0.2.0`)
//! or the previous contract, [`PREVIOUS_CONTRACT`] (`toolhost:plugin@0.1.0`),
//! which `compat` adapts to the same call path; one that imports or exports
//! a `toolhost:plugin` interface of another version is refused at load with
//! [`SandboxError::ContractVersion`] (or `ContractTooNew`), which names the
//! supported versions and tells its author what to do. A call's answer is a
//! [`ToolOutput`]: the JSON and, optionally, the plugin's model-facing text.
//!
//! `describe()` at load time runs under the same rules with its own
//! deadline, [`DESCRIBE_TIMEOUT`]; so does the optional `describe-words()`
//! (task words, `words`), in the same instance right after it.
//!
//! Every way a call can end is a [`CallOutcome`]: the guest's result or
//! tool error, or a [`Failure`] naming the limit or fault. The host never
//! panics because of what a guest does.

mod ask_link;
mod bindings;
mod cache;
mod capture;
mod compat;
mod deadline;
mod effects;
pub mod embedded;
mod engine;
mod exec_link;
mod files_link;
mod fsguard;
pub mod http;
mod limits;
mod script_link;
mod spare;
mod words;

pub use cache::{CacheError, Checked, CompileCache, Miss};
pub use compat::{Contract, PREVIOUS_CONTRACT, PREVIOUS_CONTRACT_VERSION, SUPPORTED_CONTRACTS};
pub use effects::ProbeOutcome;
pub use http::{net_grant, normalize_origin, ANY_ORIGIN};
pub use script_link::ScriptLink;
pub use spare::SpareStats;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, InstancePre, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreContextMut,
    Trap,
};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use capture::Capture;
use http::{NetHooks, NetPolicy};
use limits::MemoryLimiter;
use toolhost_base::descriptor::{parse_schema_texts, Described, Needs, SideEffect, ToolDescriptor};
use toolhost_base::file_index::{CacheStats, IndexCache};
use toolhost_base::opendir::OpenDir;

use bindings::plugin::toolhost::plugin::types as wit;

/// The `toolhost:plugin` contract (package and version, `wit/toolhost.wit`)
/// this host implements.
pub const CONTRACT: &str = "toolhost:plugin@0.2.0";

/// The package of the contract, without the version.
pub(crate) const CONTRACT_PACKAGE: &str = "toolhost:plugin";

/// The version part of [`CONTRACT`].
pub const CONTRACT_VERSION: &str = "0.2.0";

/// The wasmtime release this host is built against.
pub const WASMTIME_VERSION: &str = "48.0.8";

/// Fuel for instantiating a spare (see `spare`): about 10 ms of code.
const SPARE_FUEL: u64 = 10_000_000;

/// Largest describe() answer accepted from a plugin, in bytes.
pub const MAX_DESCRIPTOR_BYTES: usize = 4 * 1024 * 1024;

/// Wall-clock limit of a plugin's `describe()` at load time (whatever it
/// waits on): a plugin that does not answer by then is a load problem.
pub const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything that can go wrong while loading a plugin.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("engine setup failed: {0}")]
    Engine(String),
    #[error("not a valid component: {0}")]
    Compile(String),
    /// The component names a supported contract but does not implement it.
    #[error("the component does not implement {contract}: {reason}")]
    Link {
        contract: &'static str,
        reason: String,
    },
    /// The component was built against a version of the contract older
    /// than the previous one (or one without a version).
    #[error(
        "the component was built against toolhost:plugin@{found}, which this host does not \
         support: it supports {SUPPORTED_CONTRACTS}; rebuild the plugin against {CONTRACT} \
         (update toolhost-sdk, the Python or JavaScript kit, or the WIT file it was built from)"
    )]
    ContractVersion { found: String },
    /// The component was built against a later contract than this host's.
    #[error(
        "the component was built against toolhost:plugin@{found}, a newer contract than this \
         host's: it supports {SUPPORTED_CONTRACTS}; update toolhost, or rebuild the plugin \
         against {CONTRACT}"
    )]
    ContractTooNew { found: String },
    /// The component's interfaces name more than one contract version.
    #[error(
        "the component names several versions of toolhost:plugin ({versions}): build it \
         against one of {SUPPORTED_CONTRACTS}"
    )]
    MixedContracts { versions: String },
    #[error("describe() failed: {0}")]
    Describe(String),
    #[error("describe() did not answer within {} s", .0.as_secs())]
    DescribeTimeout(Duration),
    #[error("describe() returned {bytes} bytes of descriptors; the limit is {limit}")]
    DescriptorTooLarge { bytes: usize, limit: usize },
    /// The optional `discovery` export answered words the host refuses.
    #[error("describe-words() {0}")]
    Words(String),
}

/// Settings shared by every call.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Where compiled code is cached; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// The secret that authenticates cache entries; `None` means
    /// [`CompileCache::default_key_file`].
    pub cache_key_file: Option<PathBuf>,
    /// The workspace, if known: a cache directory inside it is refused.
    pub workspace: Option<PathBuf>,
    /// Instances that may run at once (pooling allocator slots).
    pub max_concurrent_instances: u32,
    /// Upper bound for any call's memory limit, in bytes.
    pub max_memory_bytes: usize,
    /// How instances get their memories and tables (default
    /// [`InstanceAllocation::Pooling`]).
    pub allocation: InstanceAllocation,
}

/// How the engine allocates instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InstanceAllocation {
    /// Slots reserved once at start for every instance that may exist at
    /// a time (calls, stores waiting to be dropped, spares) and reused:
    /// a fresh instance per call costs little. Reserves terabytes of
    /// address space (each memory slot carries its guard region), which
    /// only touches memory that is used.
    #[default]
    Pooling,
    /// Each instance maps its memories when it is made and unmaps them
    /// when dropped: slower per call, but the address space reserved is
    /// only that of the instances alive. For processes whose virtual
    /// address space is bounded (`ulimit -v`, some containers) and for
    /// tools that run the host under an emulator such as valgrind.
    OnDemand,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            cache_dir: CompileCache::default_dir(),
            cache_key_file: None,
            workspace: None,
            max_concurrent_instances: 64,
            max_memory_bytes: 1 << 30,
            allocation: InstanceAllocation::Pooling,
        }
    }
}

/// Per-call limits. Each has a default and its own failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wasm fuel (roughly instructions); exhaustion → `fuel_exhausted`.
    pub fuel: u64,
    /// Wall-clock budget; expiry → `timeout`.
    pub timeout: Duration,
    /// Linear memory across all memories; refusal → `memory_exhausted`.
    pub memory_bytes: usize,
    /// Largest output JSON handed back as the call's output.
    pub max_output_bytes: usize,
    /// Largest output JSON handed back at all: an output between
    /// `max_output_bytes` and this is returned for the host to spill to an
    /// artifact (`toolhost::tools::artifact`); beyond both → `output_too_large`.
    /// 0 (the default): no spill.
    pub spill_output_bytes: usize,
    /// Bytes of stdout and of stderr kept (the rest is counted).
    pub max_log_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: 2_000_000_000,
            timeout: Duration::from_secs(10),
            memory_bytes: 256 << 20,
            max_output_bytes: 1 << 20,
            spill_output_bytes: 0,
            max_log_bytes: 16 * 1024,
        }
    }
}

/// One directory the guest may see: an open directory, mounted as it is
/// (through `/proc/self/fd/N`), so nothing renamed or swapped in on the host
/// after it was opened can change what the guest sees.
#[derive(Debug, Clone)]
pub struct Mount {
    pub dir: OpenDir,
    pub guest: String,
    pub writable: bool,
}

impl Mount {
    /// A mount of the host directory at `path`, opened now (following
    /// symbolic links in `path`: for directories the embedder chooses; the
    /// pipeline opens grants beneath the workspace root instead, see
    /// [`toolhost_base::paths::Workspace::open_grant`]).
    pub fn open(path: &Path, guest: &str, writable: bool) -> std::io::Result<Mount> {
        Ok(Mount {
            dir: OpenDir::open(path)?,
            guest: guest.to_owned(),
            writable,
        })
    }
}

/// Everything one call needs.
#[derive(Debug, Clone)]
pub struct CallRequest<'a> {
    pub tool: &'a str,
    pub args_json: &'a str,
    pub call_id: &'a str,
    pub workspace_root: &'a str,
    pub idempotency_key: Option<&'a str>,
    pub mounts: &'a [Mount],
    /// Network origins the guest may reach through `wasi:http`, normalized
    /// `scheme://host:port` (see [`normalize_origin`] and [`net_grant`]).
    /// Empty: every request is refused, without a DNS lookup.
    pub net_origins: &'a [String],
    /// The native programs the call may run through the `exec` import, and
    /// where ([`toolhost_base::exec_call`]). `None`: every `run` is `denied`.
    pub exec: Option<Arc<toolhost_base::exec_call::CallExec>>,
    pub limits: Limits,
    /// The caller holds the `secrets` right: the `files` import's
    /// `redacted-text` answers files as they are.
    pub reveal_secrets: bool,
    /// Who the `client` import's questions go to ([`toolhost_base::ask`]); `None`:
    /// every question is `unavailable`. Only calls use it, never a dry-run
    /// or a probe.
    pub asker: Option<Arc<dyn toolhost_base::ask::Asker>>,
    /// Where the `script` import's inner calls go: only the host's script
    /// runner gets one. `None`: every `call-tool` is `denied`.
    pub script: Option<ScriptLink>,
}

/// A failure the plugin reported itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    pub code: String,
    pub message: String,
    pub field: Option<String>,
    pub correctable: bool,
    pub details: Option<String>,
}

/// A call that did not produce a result or a tool error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The wall-clock deadline passed.
    Timeout,
    /// The fuel ran out.
    FuelExhausted,
    /// A memory growth beyond the limit was refused and the guest died.
    MemoryExhausted,
    /// The output exceeded the limit.
    OutputTooLarge { bytes: usize },
    /// The guest trapped (panic, stack overflow, unreachable, …).
    Crashed { reason: String },
    /// The host could not start the instance (e.g. a mount vanished).
    Unavailable { reason: String },
    /// The call was cancelled by the host.
    Cancelled,
    /// The tool asked a question whose answer comes only with a later
    /// request (a stateless MCP request): the call stopped there.
    InputRequired {
        question: toolhost_base::ask::Question,
    },
}

/// Resource use of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub fuel_consumed: u64,
    pub wall_time: Duration,
    pub peak_memory_bytes: u64,
    pub output_bytes: u64,
}

/// Captured guest output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Logs {
    pub stdout: Vec<u8>,
    pub stdout_omitted: u64,
    pub stderr: Vec<u8>,
    pub stderr_omitted: u64,
}

/// How one run in a fresh instance ended (a call, a dry-run or a probe):
/// the guest's answer, or a [`Failure`] naming the limit or fault.
#[derive(Debug, Clone)]
pub struct RunOutcome<T> {
    pub result: Result<T, Failure>,
    pub usage: Usage,
    /// Captured output. The host's own lines about refused network requests
    /// (`toolhost: GET http://… refused: …`) come first in `stderr`.
    pub logs: Logs,
    /// The network requests the host refused, one line each (the first 16;
    /// `net_denied_omitted` counts the rest).
    pub net_denied: Vec<String>,
    pub net_denied_omitted: usize,
    /// The URLs of the requests the host let through to a granted origin,
    /// in order, without duplicates: the run's network provenance.
    pub net_requested: Vec<String>,
    /// The questions the tool asked the person and got an answer to, in
    /// order: the key and the SHA-256 (hex) of the answer as the tool got
    /// it (see `ask_link`).
    pub questions: Vec<(String, String)>,
}

/// A call's answer as the plugin gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The output JSON text (within the request's output limit).
    pub json: String,
    /// The plugin's model-facing rendering, raw: the host still has to
    /// strip control characters and clip it.
    pub text: Option<String>,
}

/// How a call ended: the tool's output or its tool error.
pub type CallOutcome = RunOutcome<Result<ToolOutput, ToolError>>;

impl<T> RunOutcome<T> {
    /// An outcome without a run: the host answers itself, or could not
    /// start one.
    fn without_run(result: Result<T, Failure>) -> Self {
        RunOutcome {
            result,
            usage: Usage::default(),
            logs: Logs::default(),
            net_denied: Vec::new(),
            net_denied_omitted: 0,
            net_requested: Vec::new(),
            questions: Vec::new(),
        }
    }

    /// Turns the guest's answer into `U`; `f` may record in the usage.
    fn map<U>(mut self, f: impl FnOnce(T, &mut Usage) -> Result<U, Failure>) -> RunOutcome<U> {
        let usage = &mut self.usage;
        RunOutcome {
            result: self.result.and_then(|r| f(r, usage)),
            usage: self.usage,
            logs: self.logs,
            net_denied: self.net_denied,
            net_denied_omitted: self.net_denied_omitted,
            net_requested: self.net_requested,
            questions: self.questions,
        }
    }
}

/// Per-store state: the WASI and `wasi:http` contexts, the limiter, and
/// the run's deadline and cancel token (for waits inside host calls, see
/// `deadline`).
struct State {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    net: NetHooks,
    table: ResourceTable,
    memory: MemoryLimiter,
    stdout: Capture,
    stderr: Capture,
    deadline: Instant,
    cancel: Option<CancelToken>,
    /// The call's programs (`exec_link`).
    exec: Option<Arc<toolhost_base::exec_call::CallExec>>,
    /// A program was ended by the call's deadline: the run is a timeout.
    deadline_reached: bool,
    /// The call's mounts (open directory, guest path), for `files_link`.
    mounts: Vec<(OpenDir, String)>,
    /// The sandbox's file index cache (`files_link`).
    files: Arc<IndexCache>,
    /// The file `files_link` opened last, by its guest path (see there).
    opened: Option<(String, std::fs::File)>,
    /// Being instantiated as a spare: a call into the host fails it.
    making_spare: bool,
    /// The caller may see secrets (`files_link`'s `redacted-text`).
    reveal_secrets: bool,
    /// Where the call's questions go (`ask_link`).
    asker: Option<Arc<dyn toolhost_base::ask::Asker>>,
    /// Questions asked so far.
    questions: usize,
    /// The question that stopped the call, waiting for a later request.
    pending: Option<toolhost_base::ask::Question>,
    /// The questions answered so far: key, SHA-256 of the answer.
    answered: Vec<(String, String)>,
    /// Where the guest's inner tool calls go (`script_link`); `None`:
    /// every one is `denied`.
    script: Option<ScriptLink>,
}

impl WasiHttpView for State {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.net,
        }
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The engine, linker and cache shared by all plugins.
#[derive(Clone)]
pub struct Sandbox {
    engine: Engine,
    linker: Arc<Linker<State>>,
    cache: Option<CompileCache>,
    /// File indexes, shared by every plugin and call (`files_link`).
    files: Arc<IndexCache>,
    /// Instances made ahead and stores dropped after calls (`spare`).
    spares: spare::Spares,
}

/// Progress of a load, for a caller that wants to show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadEvent {
    /// Found verified compiled code in the cache.
    CacheHit,
    /// Used the code compiled into this binary at build time (the
    /// reference tools).
    Precompiled,
    /// Compiling; `bytes` is the component size.
    Compiling { bytes: usize },
    /// A cache entry failed verification and was discarded.
    CacheCorrupt,
    /// Finished compiling.
    Compiled { elapsed: Duration },
}

impl Sandbox {
    /// Builds the engine and linker. Starts the deadline watchdog.
    pub fn new(config: &SandboxConfig) -> Result<Self, SandboxError> {
        let mut c = Config::new();
        engine::compile_settings(&mut c);
        let mut pool = PoolingAllocationConfig::default();
        let calls = config.max_concurrent_instances.max(1);
        // Room for as many stores waiting to be dropped and for the spares
        // (see `spare`) beside the calls themselves.
        let n = calls * 2 + spare::MAX_SPARES as u32;
        pool.total_component_instances(n)
            .total_core_instances(n * 8)
            .total_memories(n * 4)
            .total_tables(n * 8)
            // Fiber stacks (wasmtime's async support, compiled in for WASI)
            // are allocated and guarded at start, one per slot: 1,000 by
            // default cost ~3 ms of every start; calls run synchronously.
            .total_stacks(calls)
            .max_memories_per_component(8)
            .max_memory_size(config.max_memory_bytes)
            // Reset a reused slot's first pages in place instead of
            // unmapping them: a fresh instance per call stays cheap.
            .linear_memory_keep_resident(64 << 20)
            .table_keep_resident(1 << 20)
            .pagemap_scan(wasmtime::Enabled::Auto);
        c.allocation_strategy(match config.allocation {
            InstanceAllocation::Pooling => InstanceAllocationStrategy::Pooling(pool),
            InstanceAllocation::OnDemand => InstanceAllocationStrategy::OnDemand,
        });
        let engine = Engine::new(&c).map_err(|e| SandboxError::Engine(format!("{e:#}")))?;

        let mut linker = Linker::<State>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| SandboxError::Engine(format!("{e:#}")))?;
        // `wasi:http` is always linked; each request meets `NetHooks`. A
        // component that does not import it never sees it.
        wasmtime_wasi_http::p2::add_only_http_to_linker_sync(&mut linker)
            .map_err(|e| SandboxError::Engine(format!("{e:#}")))?;
        // Our versions of the host functions a guest waits in, and of the
        // file-system ones we restrict further.
        deadline::add_to_linker(&mut linker)?;
        fsguard::add_to_linker(&mut linker)?;
        exec_link::add_to_linker(&mut linker)?;
        ask_link::add_to_linker(&mut linker)?;
        files_link::add_to_linker(&mut linker)?;
        script_link::add_to_linker(&mut linker)?;
        deadline::start();
        let cache = config.cache_dir.as_ref().and_then(|dir| {
            let opened = match config
                .cache_key_file
                .clone()
                .or_else(CompileCache::default_key_file)
            {
                Some(key) => CompileCache::open_with(dir, &key, config.workspace.as_deref()),
                None => Err(cache::CacheError::NoKeyFile),
            };
            opened
                .inspect_err(|e| tracing::warn!("{e}; compiling without a cache"))
                .ok()
        });
        Ok(Sandbox {
            engine,
            linker: Arc::new(linker),
            cache,
            files: Arc::new(IndexCache::new()),
            spares: spare::Spares::new(calls as usize),
        })
    }

    /// Compiles (or reads from the cache) and pre-links a component.
    pub fn load(&self, bytes: &[u8], progress: &dyn Fn(LoadEvent)) -> Result<Plugin, SandboxError> {
        let digest = blake3::hash(bytes);
        let component = self.compile_cached(bytes, &digest, progress)?;
        self.link(component, digest)
    }

    /// [`Sandbox::load`] for a component built into this binary
    /// ([`embedded`]): its compile-cache entry when there is one (checked
    /// by its MAC like every entry, and mapped: only the pages used are
    /// read); else its precompiled artifact, when that fits this engine,
    /// written to the cache and mapped from there (or, without a cache,
    /// copied); else the component compiled. Neither the artifact nor the
    /// component is unpacked when the cache holds the entry.
    pub fn load_embedded(
        &self,
        component: &embedded::Embedded,
        progress: &dyn Fn(LoadEvent),
    ) -> Result<Plugin, SandboxError> {
        let digest = component.blake3;
        let path = self
            .cache
            .as_ref()
            .map(|cache| cache.entry_path(&self.engine, &digest));
        if let (Some(cache), Some(path)) = (&self.cache, &path) {
            match cache.load(&self.engine, path) {
                Ok(compiled) => {
                    progress(LoadEvent::CacheHit);
                    return self.link(compiled, digest);
                }
                Err(Miss::Corrupt) => cache.evict(path),
                Err(Miss::Absent) => {}
            }
        }
        let framed = component.precompiled();
        if let Some(artifact) = engine::unframe(&self.engine, &framed) {
            if let (Some(cache), Some(path)) = (&self.cache, &path) {
                let mapped = cache
                    .put(path, artifact)
                    .ok()
                    .and_then(|()| cache.load(&self.engine, path).ok());
                if let Some(compiled) = mapped {
                    progress(LoadEvent::Precompiled);
                    return self.link(compiled, digest);
                }
            }
            // SAFETY: the artifact is part of this binary: the build script
            // compiled it from the component with this wasmtime and these
            // engine settings (checked by `unframe`), and wasmtime checks
            // its header again. It is as trusted as the host's own code.
            if let Ok(compiled) = unsafe { Component::deserialize(&self.engine, artifact) } {
                progress(LoadEvent::Precompiled);
                return self.link(compiled, digest);
            }
        }
        let wasm = component.wasm();
        debug_assert_eq!(digest, blake3::hash(&wasm), "the build's digest");
        let compiled = self.compile_cached(&wasm, &digest, progress)?;
        self.link(compiled, digest)
    }

    /// Checks the contract version of a compiled component and pre-links it.
    fn link(&self, component: Component, digest: blake3::Hash) -> Result<Plugin, SandboxError> {
        let contract = self.check_contract_version(&component)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| SandboxError::Link {
                contract: contract.name(),
                reason: format!("{e:#}"),
            })?;
        let exports = compat::Exports::new(&pre, contract)?;
        let ty = component.component_type();
        let asks = ty
            .imports(&self.engine)
            .any(|(name, _)| name.starts_with("toolhost:plugin/client@"));
        Ok(Plugin {
            asks,
            engine: self.engine.clone(),
            files: self.files.clone(),
            pre,
            exports,
            contract,
            digest: digest.to_hex().to_string(),
            slot: Arc::default(),
            spares: self.spares.clone(),
        })
    }

    fn compile_cached(
        &self,
        bytes: &[u8],
        digest: &blake3::Hash,
        progress: &dyn Fn(LoadEvent),
    ) -> Result<Component, SandboxError> {
        let entry = self
            .cache
            .as_ref()
            .map(|c| (c, c.entry_path(&self.engine, digest)));
        if let Some((cache, path)) = &entry {
            match cache.load(&self.engine, path) {
                Ok(c) => {
                    progress(LoadEvent::CacheHit);
                    return Ok(c);
                }
                Err(Miss::Corrupt) => {
                    tracing::warn!(
                        entry = %path.display(),
                        "compiled-code cache entry refused (bad MAC, length, owner, mode or a link); recompiling"
                    );
                    cache.evict(path);
                    progress(LoadEvent::CacheCorrupt);
                }
                Err(Miss::Absent) => {}
            }
        }
        progress(LoadEvent::Compiling { bytes: bytes.len() });
        let start = Instant::now();
        let component = Component::new(&self.engine, bytes)
            .map_err(|e| SandboxError::Compile(format!("{e:#}")))?;
        progress(LoadEvent::Compiled {
            elapsed: start.elapsed(),
        });
        if let Some((cache, path)) = &entry {
            if let Ok(artifact) = component.serialize() {
                let _ = cache.put(path, &artifact);
            }
        }
        Ok(component)
    }

    /// The contract the component's `toolhost:plugin` imports and exports
    /// name. Any version but the current and the previous one is refused,
    /// naming it and the supported ones, so the author is told what to do
    /// rather than shown a missing export (see `compat`).
    fn check_contract_version(&self, component: &Component) -> Result<Contract, SandboxError> {
        let ty = component.component_type();
        let names = ty
            .imports(&self.engine)
            .map(|(name, _)| name)
            .chain(ty.exports(&self.engine).map(|(name, _)| name));
        compat::contract_of(names)
    }

    /// The compile cache, if enabled.
    pub fn cache(&self) -> Option<&CompileCache> {
        self.cache.as_ref()
    }

    /// Counters of the file index cache the `files` import answers from.
    pub fn file_index_stats(&self) -> CacheStats {
        self.files.stats()
    }

    /// The file index cache the `files` import answers from.
    pub fn file_indexes(&self) -> &IndexCache {
        &self.files
    }

    /// How many instances were made ahead of calls and how many calls ran
    /// in one (see `spare`).
    pub fn spare_stats(&self) -> SpareStats {
        self.spares.stats()
    }

    /// Promises that this thread runs [`Sandbox::idle_work`] between its
    /// calls (see `spare`): from now on, the calls it runs in this sandbox
    /// leave their stores to be dropped there and ask for the plugin's next
    /// instance to be made there. Calls on other threads (and this
    /// thread's calls in another sandbox) instantiate and drop inline. A
    /// thread runs the idle work of one sandbox at a time: the last one it
    /// called this on.
    pub fn defer_to_idle(&self) {
        self.spares.defer();
    }

    /// Drops the stores of finished calls and makes the instances asked
    /// for, on this thread: what a thread that called
    /// [`Sandbox::defer_to_idle`] does while it waits for its next call.
    pub fn idle_work(&self) {
        self.spares.run_idle();
    }
}

/// A compiled, pre-linked component, ready for fresh instances.
#[derive(Clone)]
pub struct Plugin {
    engine: Engine,
    files: Arc<IndexCache>,
    pre: InstancePre<State>,
    /// The `plugin` world's exports, of the component's contract version.
    exports: compat::Exports,
    /// The contract the component was built against.
    contract: Contract,
    /// The component imports `toolhost:plugin/client`: its tools may ask
    /// the person (`ask_link`).
    asks: bool,
    digest: String,
    /// The next call's instance, when one was made ahead (`spare`).
    slot: Arc<spare::Slot>,
    spares: spare::Spares,
}

/// A handle that stops a running call: cancelling advances the epoch of
/// the engine it runs on (see `deadline`).
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
        deadline::cancel(self);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Whether `other` is this token (a clone of it).
    fn same(&self, other: &CancelToken) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Plugin {
    /// Whether an instance made ahead waits for this plugin's next call
    /// (see `spare`).
    pub fn spare_ready(&self) -> bool {
        !self.slot.is_empty()
    }

    /// The contract the component was built against: the current one, or
    /// the previous one run through the adapter (see `compat`).
    pub fn contract(&self) -> Contract {
        self.contract
    }

    /// Whether the component imports `toolhost:plugin/client`: its tools
    /// may ask the person behind the client ([`toolhost_base::ask`]).
    pub fn asks(&self) -> bool {
        self.asks
    }

    /// BLAKE3 of the component bytes (hex), the component's identity in
    /// the compile cache.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Reads the plugin's descriptors, under fixed limits. A tool whose
    /// schema text is not JSON is an `Err` of its own; the other tools are
    /// still read.
    pub fn describe(&self) -> Result<Vec<Described>, SandboxError> {
        let limits = Limits {
            fuel: 5_000_000_000,
            timeout: DESCRIBE_TIMEOUT,
            memory_bytes: 256 << 20,
            max_output_bytes: MAX_DESCRIPTOR_BYTES,
            spill_output_bytes: 0,
            max_log_bytes: 4096,
        };
        let deadline = Instant::now() + limits.timeout;
        let mut store = self
            .state(&[], NetPolicy::none(), &limits, deadline, None, None)
            .and_then(|state| self.new_store(state, &limits))
            .map_err(|e| SandboxError::Describe(format!("{e:#}")))?;
        let failed = |e: wasmtime::Error, store: &Store<State>| match e.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => SandboxError::DescribeTimeout(limits.timeout),
            _ => SandboxError::Describe(describe_trap(&e, store)),
        };
        let _watch = deadline::watch(deadline, &self.engine, None);
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| failed(e, &store))?;
        // Looking the exports up checks their types (the names alone were
        // checked at link): a component whose functions do not have its
        // contract's types does not implement it, whatever it names.
        let plugin = self
            .exports
            .load(&mut store, &instance)
            .map_err(|e| SandboxError::Link {
                contract: self.contract.name(),
                reason: format!("{e:#}"),
            })?;
        let list = plugin.describe(&mut store).map_err(|e| failed(e, &store))?;
        let mut bytes: usize = list.iter().map(|(_, bytes)| bytes).sum();
        // The optional task words, asked in the same instance (`words`).
        let task_words = match words::Discovery::new(&self.pre, self.contract) {
            Some(discovery) if bytes <= MAX_DESCRIPTOR_BYTES => discovery
                .describe_words(&mut store, &instance)
                .map_err(|e| failed(e, &store))?,
            _ => Vec::new(),
        };
        bytes += words::bytes_of(&task_words);
        if bytes > MAX_DESCRIPTOR_BYTES {
            return Err(SandboxError::DescriptorTooLarge {
                bytes,
                limit: MAX_DESCRIPTOR_BYTES,
            });
        }
        let mut descs: Vec<Described> = list.into_iter().map(|(d, _)| d).collect();
        words::attach(&mut descs, task_words)?;
        Ok(descs)
    }

    /// The state of a store for a run with these grants and limits.
    fn state(
        &self,
        mounts: &[Mount],
        net: Arc<NetPolicy>,
        limits: &Limits,
        deadline: Instant,
        cancel: Option<&CancelToken>,
        exec: Option<Arc<toolhost_base::exec_call::CallExec>>,
    ) -> std::io::Result<State> {
        let mut b = WasiCtxBuilder::new();
        b.allow_blocking_current_thread(true);
        // Raw sockets and DNS stay closed whatever the grant: the only way
        // out is `wasi:http`, through `NetHooks`.
        b.allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        let stdout = Capture::new(limits.max_log_bytes);
        let stderr = Capture::new(limits.max_log_bytes);
        b.stdout(stdout.clone()).stderr(stderr.clone());
        for m in mounts {
            let perms = if m.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            // The open directory itself, by its `/proc/self/fd` name: `m`
            // keeps the descriptor alive until the context is built.
            b.preopened_dir(m.dir.fd_path(), &m.guest, perms)
                .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        }
        let state = State {
            wasi: b.build(),
            http: WasiHttpCtx::new(),
            net: NetHooks::new(net),
            table: ResourceTable::new(),
            memory: MemoryLimiter::new(limits.memory_bytes),
            stdout,
            stderr,
            deadline,
            cancel: cancel.cloned(),
            exec,
            deadline_reached: false,
            mounts: mounts
                .iter()
                .map(|m| (m.dir.clone(), m.guest.clone()))
                .collect(),
            files: self.files.clone(),
            opened: None,
            making_spare: false,
            reveal_secrets: false,
            asker: None,
            questions: 0,
            pending: None,
            answered: Vec::new(),
            script: None,
        };
        Ok(state)
    }

    /// A new store holding `state`, armed with `limits`' fuel and deadline.
    fn new_store(&self, state: State, limits: &Limits) -> std::io::Result<Store<State>> {
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.memory);
        store.epoch_deadline_callback(on_epoch);
        arm(&mut store, limits)?;
        Ok(store)
    }

    /// A store and an instance in it under a neutral state, made ahead of
    /// the call that will use them (see `spare`), and the fuel that
    /// instantiating took: `None` when instantiating failed or called into
    /// the host (code that could see the neutral state).
    fn make_spare(&self) -> Option<(Store<State>, spare::Fresh, u64)> {
        // Start functions that need more than this get no spares.
        let limits = Limits {
            fuel: SPARE_FUEL,
            timeout: Duration::from_secs(1),
            ..Limits::default()
        };
        let deadline = Instant::now() + limits.timeout;
        let state = self
            .state(&[], NetPolicy::none(), &limits, deadline, None, None)
            .ok()?;
        let mut store = self.new_store(state, &limits).ok()?;
        store.data_mut().making_spare = true;
        store.call_hook(|store, hook| match hook {
            wasmtime::CallHook::CallingHost if store.data().making_spare => Err(
                wasmtime::Error::msg("instantiating a spare called the host"),
            ),
            _ => Ok(()),
        });
        let watch = deadline::watch(deadline, &self.engine, None);
        let fresh = self.instantiate(&mut store).ok()?;
        drop(watch);
        let spent = limits.fuel.saturating_sub(store.get_fuel().ok()?);
        Some((store, fresh, spent))
    }

    /// Runs one call in a fresh instance.
    pub fn call(&self, req: &CallRequest<'_>) -> CallOutcome {
        self.call_cancellable(req, None)
    }

    /// Runs one call; `cancel` stops it (at once in wasm code, see
    /// `deadline`).
    pub fn call_cancellable(
        &self,
        req: &CallRequest<'_>,
        cancel: Option<&CancelToken>,
    ) -> CallOutcome {
        let ctx = context(req, req.idempotency_key);
        self.run_fresh(req, cancel, |store, fresh| {
            store.data_mut().asker = req.asker.clone();
            fresh.plugin.call(store, req.tool, req.args_json, &ctx)
        })
        .map(|answer, usage| match answer {
            Ok(out) => output_within_limit(out, req, usage),
            Err(e) => Ok(Err(e)),
        })
    }

    /// A fresh instance of this plugin in `store`.
    fn instantiate(&self, store: &mut Store<State>) -> wasmtime::Result<spare::Fresh> {
        let instance = self.pre.instantiate(&mut *store)?;
        let plugin = self.exports.load(&mut *store, &instance)?;
        Ok(spare::Fresh { instance, plugin })
    }

    /// Runs `run` on a fresh instance in a store built for `req` (its
    /// mounts, network origins, fuel, deadline and memory; `cancel` stops
    /// it) and measures it: the one path of calls,
    /// dry-runs and probes. The instance is the plugin's spare when it has
    /// one (see `spare`), else instantiated here; either way the next
    /// spare is asked for, and the store is left to idle work to drop.
    fn run_fresh<T>(
        &self,
        req: &CallRequest<'_>,
        cancel: Option<&CancelToken>,
        run: impl FnOnce(&mut Store<State>, &spare::Fresh) -> wasmtime::Result<T>,
    ) -> RunOutcome<T> {
        let start = Instant::now();
        let deadline = start + req.limits.timeout;
        let net = NetPolicy::new(req.net_origins, deadline);
        let unavailable = |e: std::io::Error| {
            RunOutcome::without_run(Err(Failure::Unavailable {
                reason: format!("could not prepare the sandbox: {e}"),
            }))
        };
        let mut state = match self.state(
            req.mounts,
            net.clone(),
            &req.limits,
            deadline,
            cancel,
            req.exec.clone(),
        ) {
            Ok(s) => s,
            Err(e) => return unavailable(e),
        };
        state.reveal_secrets = req.reveal_secrets;
        state.script = req.script.clone();
        let (mut store, ready) = match self.slot.take() {
            // A spare that already holds more memory than this call may
            // have is no use to it: instantiating under the call's own
            // limit fails as it should.
            Some(spare) if spare.store.data().memory.total_bytes() <= req.limits.memory_bytes => {
                let mut store = spare.store;
                state.memory.carry(&store.data().memory);
                *store.data_mut() = state;
                // The fuel its instantiation took is the call's, as it is
                // on the other path.
                let limits = Limits {
                    fuel: req.limits.fuel.saturating_sub(spare.spent_fuel),
                    ..req.limits
                };
                if let Err(e) = arm(&mut store, &limits) {
                    return unavailable(e);
                }
                self.spares.taken();
                (store, Some(spare.fresh))
            }
            _ => match self.new_store(state, &req.limits) {
                Ok(s) => (s, None),
                Err(e) => return unavailable(e),
            },
        };
        self.spares.request(self);
        let watch = deadline::watch(deadline, &self.engine, cancel);
        let fresh = match ready {
            Some(fresh) => Ok(fresh),
            None => self.instantiate(&mut store),
        };
        let ran = match fresh.and_then(|fresh| run(&mut store, &fresh)) {
            Ok(_) if store.data().deadline_reached => Err(Trap::Interrupt.into()),
            ran => ran,
        };
        drop(watch);
        let fuel_left = store.get_fuel().unwrap_or(0);
        let usage = Usage {
            fuel_consumed: req.limits.fuel.saturating_sub(fuel_left),
            wall_time: start.elapsed(),
            peak_memory_bytes: store.data().memory.peak_bytes() as u64,
            output_bytes: 0,
        };
        let result = match store.data_mut().pending.take() {
            Some(question) if ran.is_err() => Err(Failure::InputRequired { question }),
            _ => ran.map_err(|e| classify_trap(&e, &store)),
        };
        let (net_denied, net_denied_omitted) = net.denials();
        let logs = collect_logs(&store, &net);
        let questions = std::mem::take(&mut store.data_mut().answered);
        self.spares.retire(store);
        RunOutcome {
            result,
            usage,
            logs,
            net_denied,
            net_denied_omitted,
            net_requested: net.requested(),
            questions,
        }
    }
}

/// The call context of `req` with idempotency key `key`, for either
/// contract version.
fn context(req: &CallRequest<'_>, key: Option<&str>) -> compat::Context {
    compat::Context {
        call_id: req.call_id.to_string(),
        workspace_root: req.workspace_root.to_string(),
        idempotency_key: key.map(str::to_string),
    }
}

/// Sets `limits`' fuel on `store`, and its epoch deadline to the next
/// epoch: the store's [`on_epoch`] then holds it to its state's deadline
/// and cancel token (see `deadline`).
fn arm(store: &mut Store<State>, limits: &Limits) -> std::io::Result<()> {
    store
        .set_fuel(limits.fuel)
        .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
    store.set_epoch_deadline(1);
    Ok(())
}

/// Every store's epoch callback: the epoch advanced (for this call's
/// deadline, its cancellation, or another call's), so the guest stops
/// here if its call is cancelled or past its deadline, else runs on to
/// the next epoch.
fn on_epoch(store: StoreContextMut<'_, State>) -> wasmtime::Result<wasmtime::UpdateDeadline> {
    let state = store.data();
    if state.cancel.as_ref().is_some_and(CancelToken::is_cancelled) {
        return Err(wasmtime::Error::msg(CANCELLED));
    }
    if Instant::now() >= state.deadline {
        return Err(Trap::Interrupt.into());
    }
    Ok(wasmtime::UpdateDeadline::Continue(1))
}

/// A call's answer, unless its JSON is over the request's output limit.
/// The text is not limited here: the host clips it to the call's text
/// budget when it renders the observation.
fn output_within_limit(
    out: ToolOutput,
    req: &CallRequest<'_>,
    usage: &mut Usage,
) -> Result<Result<ToolOutput, ToolError>, Failure> {
    let text = out.text;
    Ok(within_limit(out.json, req, usage)?.map(|json| ToolOutput { json, text }))
}

/// The guest's JSON answer, unless it is over the request's output limit.
/// Records its size in `usage`.
fn within_limit(
    json: String,
    req: &CallRequest<'_>,
    usage: &mut Usage,
) -> Result<Result<String, ToolError>, Failure> {
    usage.output_bytes = json.len() as u64;
    if json.len()
        > req
            .limits
            .max_output_bytes
            .max(req.limits.spill_output_bytes)
    {
        Err(Failure::OutputTooLarge { bytes: json.len() })
    } else {
        Ok(Ok(json))
    }
}

/// The captured output of a finished store: the host's network refusals
/// first, then the guest's stderr.
fn collect_logs(store: &Store<State>, net: &NetPolicy) -> Logs {
    let (net_denied, net_denied_omitted) = net.denials();
    let state = store.data();
    let (stdout, stdout_omitted) = state.stdout.take();
    let (guest_stderr, stderr_omitted) = state.stderr.take();
    let mut stderr = Vec::new();
    for line in &net_denied {
        stderr.extend_from_slice(format!("toolhost: {line}\n").as_bytes());
    }
    if net_denied_omitted > 0 {
        stderr.extend_from_slice(
            format!("toolhost: {net_denied_omitted} more requests refused\n").as_bytes(),
        );
    }
    stderr.extend_from_slice(&guest_stderr);
    Logs {
        stdout,
        stdout_omitted,
        stderr,
        stderr_omitted,
    }
}

const CANCELLED: &str = "toolhost: call cancelled";

fn classify_trap(e: &wasmtime::Error, store: &Store<State>) -> Failure {
    if let Some(trap) = e.downcast_ref::<Trap>() {
        match trap {
            Trap::OutOfFuel => return Failure::FuelExhausted,
            Trap::Interrupt => return Failure::Timeout,
            _ => {}
        }
    }
    if e.to_string() == CANCELLED || format!("{e:#}").contains(CANCELLED) {
        return Failure::Cancelled;
    }
    if store.data().memory.refused() {
        return Failure::MemoryExhausted;
    }
    Failure::Crashed {
        reason: describe_trap(e, store),
    }
}

fn describe_trap(e: &wasmtime::Error, _store: &Store<State>) -> String {
    let mut s = match e.downcast_ref::<Trap>() {
        Some(t) => format!("{t}"),
        None => format!("{e}"),
    };
    if s.len() > 500 {
        let mut cut = 500;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// Reads one descriptor as the plugin sent it: `d` with placeholder
/// schemas, and the schema texts. Returns the descriptor with its schemas
/// parsed (or the tool's name and why one is not JSON) and the bytes of
/// text the plugin sent for it, which [`MAX_DESCRIPTOR_BYTES`] bounds.
fn read_descriptor(
    mut d: ToolDescriptor,
    input_schema: String,
    output_schema: Option<String>,
) -> (Described, usize) {
    let bytes = d.name.len()
        + d.description.len()
        + input_schema.len()
        + output_schema.as_ref().map_or(0, |s| s.len())
        + d.title.as_ref().map_or(0, |s| s.len())
        + d.error_codes.iter().map(|c| c.len()).sum::<usize>()
        + d.needs.network_hosts.iter().map(|c| c.len()).sum::<usize>()
        + d.needs.exec.iter().map(|c| c.len()).sum::<usize>();
    match parse_schema_texts(&input_schema, output_schema.as_deref()) {
        Ok((input, output)) => {
            d.input_schema = input;
            d.output_schema = output;
            (Ok(d), bytes)
        }
        Err(reason) => (Err((d.name, reason)), bytes),
    }
}

/// Reads a descriptor of the current contract ([`read_descriptor`]).
fn read_wit_descriptor(d: wit::ToolDescriptor) -> (Described, usize) {
    let desc = ToolDescriptor {
        name: d.name,
        title: d.title,
        description: d.description,
        input_schema: serde_json::Value::Null,
        output_schema: None,
        side_effect: match d.side_effect {
            wit::SideEffect::ReadOnly => SideEffect::ReadOnly,
            wit::SideEffect::Idempotent => SideEffect::Idempotent,
            wit::SideEffect::Reversible => SideEffect::Reversible,
            wit::SideEffect::Irreversible => SideEffect::Irreversible,
        },
        needs: Needs {
            fs_read: d.needs.fs_read,
            fs_write: d.needs.fs_write,
            network_hosts: d.needs.network_hosts,
            exec: d.needs.exec,
        },
        error_codes: d.error_codes,
        default_timeout_ms: d.default_timeout_ms,
        max_output_bytes: d.max_output_bytes,
        supports_dry_run: d.supports_dry_run,
        supports_probe: d.supports_probe,
        keywords: Vec::new(),
        examples: Vec::new(),
    };
    read_descriptor(desc, d.input_schema, d.output_schema)
}

impl Plugin {
    /// The baseline the benchmark compares against: a fresh store with a
    /// default WASI context, instantiate from the pre-linked component and
    /// call, with none of toolhost's checks, mounts, capture or limits.
    /// Panics on failure; for benchmarks only.
    #[doc(hidden)]
    pub fn bare_call(&self, tool: &str, args_json: &str) -> String {
        let state = State {
            wasi: WasiCtx::builder().build(),
            http: WasiHttpCtx::new(),
            net: NetHooks::new(NetPolicy::none()),
            table: ResourceTable::new(),
            memory: MemoryLimiter::new(usize::MAX),
            stdout: Capture::new(0),
            stderr: Capture::new(0),
            deadline: Instant::now() + Duration::from_secs(3600),
            cancel: None,
            exec: None,
            deadline_reached: false,
            mounts: Vec::new(),
            files: self.files.clone(),
            opened: None,
            making_spare: false,
            reveal_secrets: false,
            asker: None,
            questions: 0,
            pending: None,
            answered: Vec::new(),
            script: None,
        };
        let mut store = Store::new(&self.engine, state);
        store.set_fuel(u64::MAX).unwrap();
        store.set_epoch_deadline(u64::MAX / 2);
        let ctx = compat::Context {
            call_id: String::new(),
            workspace_root: String::new(),
            idempotency_key: None,
        };
        let fresh = self.instantiate(&mut store).unwrap();
        fresh
            .plugin
            .call(&mut store, tool, args_json, &ctx)
            .unwrap()
            .unwrap()
            .json
    }
}
