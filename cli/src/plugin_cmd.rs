//! `toolhost plugin …`: pinning, fetching and publishing third-party
//! plugins (part of the `toolhost` binary, not of the library).
//!
//! ```text
//! toolhost --plugins-dir DIR plugin lock            pin every *.wasm in DIR (writes DIR/toolhost.lock)
//! toolhost --plugins-dir DIR plugin verify          check DIR against the lock, load nothing
//! toolhost --plugins-dir DIR plugin list [--json]   plugins, tools, digest, signer, lock state, contract
//! toolhost --plugins-dir DIR plugin add SOURCE      oci://HOST/REPO[:TAG|@sha256:…] or a file; pinned
//! toolhost --plugins-dir DIR plugin remove NAME     delete NAME.wasm (+ .sig) and its lock entry
//! toolhost plugin push FILE oci://HOST/REPO:TAG     publish FILE (+ FILE.sig) as a Wasm OCI artifact
//! ```
//!
//! Registry credentials, when the registry wants them, come from
//! `TOOLHOST_REGISTRY_USERNAME` and `TOOLHOST_REGISTRY_PASSWORD` (never
//! from a flag, which would land in the shell history).
//!
//! Every command that writes the lock first checks what it pins the way a
//! load would: the component must describe itself, a signature that is
//! present must hold (and, under `--require-signature`, must be there and
//! be by a trusted key), and suspicious descriptions are shown (refused
//! under `--strict-descriptions`). Replacing a locked plugin prints what
//! changed, old → new, before the new entry is written.

/// A line on stdout. A closed stdout (`toolhost plugin verify | head -c 100`)
/// is not an error and never a panic, as for every other command's output.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Subcommand;

use toolhost::descriptor::ToolDescriptor;
use toolhost::plugin::catalog;
use toolhost::plugin::trust::lock::{Lock, PluginEntry, Signer, LOCK_FILE_NAME};
use toolhost::plugin::trust::oci::{self, Credentials, OciOptions, OciReference};
use toolhost::plugin::trust::policy::plugin_name;
use toolhost::plugin::trust::signature::{self, AllowedSigners, Verification};
use toolhost::plugin::trust::{poison, sha256_digest};
use toolhost::toolname::PluginSpec;
use toolhost::{Catalog, Sandbox, Source, TrustPolicy};

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Pin every plugin of the plugins directory in the lock (after you
    /// reviewed them): writes or updates toolhost.lock.
    Lock,
    /// Check the plugins against the lock, signatures and description
    /// rules without serving anything; exit 1 when one would be refused.
    Verify,
    /// Each plugin: its tools, digest, signer, lock state and the
    /// contract it was built against.
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Fetch a plugin (oci://HOST[:PORT]/REPO[:TAG|@sha256:…], or a local
    /// .wasm file), verify it, store it as NAME.wasm (+ .sig) in the
    /// plugins directory and pin it in the lock.
    Add {
        source: String,
        /// The plugin's name in the directory and the lock (default: the
        /// last part of the repository, or the file's stem).
        #[arg(long)]
        name: Option<String>,
        /// Plain HTTP, for a registry on loopback only.
        #[arg(long)]
        insecure: bool,
    },
    /// Delete NAME.wasm (and NAME.wasm.sig) and its lock entry.
    Remove { name: String },
    /// Publish a component (and FILE.sig, if present) as a Wasm OCI artifact.
    Push {
        file: PathBuf,
        /// oci://HOST[:PORT]/REPO[:TAG]
        target: String,
        /// Plain HTTP, for a registry on loopback only.
        #[arg(long)]
        insecure: bool,
    },
}

/// What the global flags say.
pub struct Ctx<'a> {
    pub sandbox: &'a Sandbox,
    pub builtin: bool,
    pub dir: Option<PathBuf>,
    /// `--plugin` files, each maybe under a namespace.
    pub files: Vec<PluginSpec>,
    pub policy: TrustPolicy,
}

impl Ctx<'_> {
    fn dir(&self) -> Result<&Path> {
        self.dir
            .as_deref()
            .context("give the plugins directory: --plugins-dir DIR (or TOOLHOST_PLUGINS_DIR)")
    }

    /// The lock written by lock/add/remove: `--lock`, else DIR/toolhost.lock.
    fn lock_path(&self) -> Result<PathBuf> {
        match &self.policy.lock {
            Some(p) => Ok(p.clone()),
            None => Ok(self.dir()?.join(LOCK_FILE_NAME)),
        }
    }

    fn signers(&self) -> Result<Option<AllowedSigners>> {
        if self.policy.require_signature && self.policy.trusted_signers.is_none() {
            bail!("--require-signature needs --trusted-signers (an ssh allowed_signers file)");
        }
        self.policy
            .trusted_signers
            .as_ref()
            .map(|p| AllowedSigners::read(p).with_context(|| format!("reading {}", p.display())))
            .transpose()
    }

    fn sources(&self) -> Result<Vec<Source>> {
        let mut sources = Vec::new();
        if self.builtin {
            sources.push(Source::reference());
            sources.push(Source::script());
        }
        if let Some(dir) = &self.dir {
            sources.extend(Source::dir(dir).with_context(|| format!("reading {}", dir.display()))?);
        }
        sources.extend(self.files.iter().cloned().map(Source::from));
        Ok(sources)
    }
}

pub fn run(cmd: PluginCommand, ctx: &Ctx<'_>) -> Result<ExitCode> {
    match cmd {
        PluginCommand::Lock => lock(ctx),
        PluginCommand::Verify => verify(ctx),
        PluginCommand::List { json } => list(ctx, json),
        PluginCommand::Add {
            source,
            name,
            insecure,
        } => add(ctx, &source, name, insecure),
        PluginCommand::Remove { name } => remove(ctx, &name),
        PluginCommand::Push {
            file,
            target,
            insecure,
        } => push(&file, &target, insecure),
    }
}

/// A component checked as a load would check it, ready to pin.
struct Checked {
    descriptors: Vec<ToolDescriptor>,
    signer: Option<Signer>,
}

/// Describes `bytes` in the sandbox and applies the signature and
/// description rules. `what` names it in messages.
fn check(
    ctx: &Ctx<'_>,
    signers: Option<&AllowedSigners>,
    what: &str,
    bytes: &[u8],
    sig: Option<&str>,
) -> Result<Checked> {
    let inspected = catalog::inspect_bytes(ctx.sandbox, bytes, &|_| {})
        .map_err(|e| anyhow::anyhow!("{what}: not loadable: {e}"))?;
    let mut descriptors = Vec::new();
    for d in inspected.descriptors {
        match d {
            Ok(d) => descriptors.push(d),
            Err((tool, e)) => bail!("{what}: tool `{tool}`: {e}"),
        }
    }
    let mut signer = None;
    if let Some(signers) = signers {
        let v = signature::verify(bytes, sig, signers);
        match (&v, ctx.policy.require_signature) {
            (Verification::Verified(s), _) => {
                eprintln!("toolhost: {what}: {v}");
                signer = Some(Signer::from(s));
            }
            (Verification::BadSignature(_), _) | (_, true) => {
                bail!(
                    "{what}: {}: {v}",
                    v.refusal_code().unwrap_or("bad_signature")
                )
            }
            (_, false) => eprintln!("toolhost: warning: {what}: {v}"),
        }
    } else if sig.is_some() {
        eprintln!(
            "toolhost: warning: {what}: signed, but no --trusted-signers to check the signature against"
        );
    }
    let findings = poison::scan_tools(&descriptors);
    for f in &findings {
        eprintln!("toolhost: warning: {what}: {f}");
    }
    if !findings.is_empty() && ctx.policy.strict_descriptions {
        bail!(
            "{what}: {}: {} suspicious text(s) (--strict-descriptions)",
            poison::CODE,
            findings.len()
        );
    }
    Ok(Checked {
        descriptors,
        signer,
    })
}

/// Prints what changed when an entry replaces another.
fn report_update(old: Option<&PluginEntry>, new: &PluginEntry) {
    match old {
        None => eprintln!("toolhost: pinned {} ({})", new.name, new.digest),
        Some(old) => match old.diff(new) {
            None => eprintln!("toolhost: {} unchanged", new.name),
            Some(diff) => eprintln!("toolhost: updating the lock: {diff}"),
        },
    }
}

fn read_lock(path: &Path) -> Result<Lock> {
    Ok(Lock::read_if_exists(path)
        .with_context(|| format!("reading the lock {}", path.display()))?
        .unwrap_or_default())
}

fn lock(ctx: &Ctx<'_>) -> Result<ExitCode> {
    let dir = ctx.dir()?;
    let lock_path = ctx.lock_path()?;
    let signers = ctx.signers()?;
    let old = read_lock(&lock_path)?;
    let mut lock = Lock::new();
    let mut files: Vec<PathBuf> = Source::dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .into_iter()
        .filter_map(|s| s.path().map(Path::to_path_buf))
        .collect();
    // The lock pins the file, whatever namespace it is loaded under.
    files.extend(ctx.files.iter().map(|f| f.path.clone()));
    for path in files {
        let name = plugin_name(&path);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let sig = signature::read_signature(&path)?;
        let checked = check(ctx, signers.as_ref(), &name, &bytes, sig.as_deref())?;
        let previous = old.get(&name);
        let mut entry = PluginEntry::compute(
            &name,
            &path.display().to_string(),
            &bytes,
            &checked.descriptors,
        )?;
        // Provenance of an unchanged component is kept (an oci:// source).
        if let Some(prev) = previous.filter(|p| p.digest == entry.digest) {
            entry.source = prev.source.clone();
            entry.manifest_digest = prev.manifest_digest.clone();
        }
        entry.signer = checked.signer;
        report_update(previous, &entry);
        if lock.insert(entry).is_some() {
            bail!("two plugins are named `{name}`");
        }
    }
    for gone in old.plugins().iter().filter(|p| lock.get(&p.name).is_none()) {
        eprintln!("toolhost: {} is gone; dropped from the lock", gone.name);
    }
    lock.write(&lock_path)?;
    eprintln!(
        "toolhost: wrote {} ({} plugins)",
        lock_path.display(),
        lock.plugins().len()
    );
    Ok(ExitCode::SUCCESS)
}

/// Loads the catalog the way `serve` would and returns it.
fn judged(ctx: &Ctx<'_>, policy: &TrustPolicy) -> Result<Catalog> {
    let trust = policy.prepare()?;
    Ok(Catalog::load_trusted(
        ctx.sandbox,
        &ctx.sources()?,
        Some(&trust),
        &|_, _| {},
    ))
}

fn verify(ctx: &Ctx<'_>) -> Result<ExitCode> {
    // Verifying means checking against a lock: without one, everything is
    // reported unpinned.
    let policy = TrustPolicy {
        require_lock: true,
        ..ctx.policy.clone()
    };
    let catalog = judged(ctx, &policy)?;
    for w in catalog.warnings() {
        eprintln!("toolhost: warning: {w}");
    }
    for p in catalog.plugins() {
        match &p.refused {
            None => out!(
                "ok       {} ({}; {}{})",
                p.name,
                p.lock,
                p.digest.as_deref().unwrap_or("-"),
                p.signer
                    .as_deref()
                    .map(|s| format!("; signed by {s}"))
                    .unwrap_or_default()
            ),
            Some(code) => out!("refused  {} ({code})", p.name),
        }
    }
    for problem in catalog.problems() {
        out!("{problem}");
    }
    Ok(if catalog.problems().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn list(ctx: &Ctx<'_>, json: bool) -> Result<ExitCode> {
    let catalog = judged(ctx, &ctx.policy)?;
    if json {
        let out = serde_json::json!({
            "plugins": catalog.plugins(),
            "problems": catalog.problems(),
            "warnings": catalog.warnings(),
        });
        out!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    for p in catalog.plugins() {
        out!(
            "{}  {}  {}  signer: {}{}{}{}",
            p.name,
            p.lock,
            p.digest.as_deref().unwrap_or("-"),
            p.signer.as_deref().unwrap_or("-"),
            // Every plugin that loaded says its contract; one of the
            // previous contract says it is still supported.
            p.contract.map(|c| format!("  {c}")).unwrap_or_default(),
            if p.asks { "  asks the person" } else { "" },
            p.refused
                .as_deref()
                .map(|c| format!("  REFUSED: {c}"))
                .unwrap_or_default()
        );
        for t in &p.tools {
            out!("    {t}");
        }
    }
    for problem in catalog.problems() {
        eprintln!("toolhost: {problem}");
    }
    for w in catalog.warnings() {
        eprintln!("toolhost: warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A plugin name that is a plain file name.
fn valid_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        || name.starts_with('.')
    {
        bail!("`{name}` is not a usable plugin name (letters, digits, - _ . ; give --name)");
    }
    Ok(())
}

/// Writes `bytes` to `path` through a temporary file in the same
/// directory, synced, then renamed over it.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp_name);
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    Ok(())
}

fn add(ctx: &Ctx<'_>, source: &str, name: Option<String>, insecure: bool) -> Result<ExitCode> {
    let dir = ctx.dir()?.to_path_buf();
    let lock_path = ctx.lock_path()?;
    let signers = ctx.signers()?;
    if let Some(n) = &name {
        valid_name(n)?;
    }
    let (bytes, sig, source_text, manifest_digest, default_name) =
        if source.starts_with(oci::SCHEME) {
            let reference: OciReference = source.parse()?;
            let options = oci_options(insecure)?;
            let pulled = oci::pull_blocking(&reference, None, &options)
                .with_context(|| format!("pulling {reference}"))?;
            eprintln!(
                "toolhost: pulled {} ({} bytes)",
                pulled.pinned,
                pulled.bytes.len()
            );
            let default = reference
                .repository
                .rsplit('/')
                .next()
                .unwrap_or("plugin")
                .to_string();
            (
                pulled.bytes,
                pulled.signature,
                pulled.pinned.to_string(),
                Some(pulled.manifest_digest),
                default,
            )
        } else {
            let path = PathBuf::from(source);
            let bytes = std::fs::read(&path).with_context(|| format!("reading {source}"))?;
            let sig = signature::read_signature(&path)?;
            let text = std::fs::canonicalize(&path)
                .unwrap_or(path.clone())
                .display()
                .to_string();
            (bytes, sig, text, None, plugin_name(&path))
        };
    let name = name.unwrap_or(default_name);
    valid_name(&name)?;
    let checked = check(ctx, signers.as_ref(), &name, &bytes, sig.as_deref())?;
    let mut entry = PluginEntry::compute(&name, &source_text, &bytes, &checked.descriptors)?;
    entry.manifest_digest = manifest_digest;
    entry.signer = checked.signer;
    let mut lock = read_lock(&lock_path)?;
    report_update(lock.get(&name), &entry);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let target = dir.join(format!("{name}.wasm"));
    let sig_path = signature::signature_path(&target);
    // The signature first: a watcher that sees the new component then
    // finds its signature already there.
    match &sig {
        Some(text) => write_atomic(&sig_path, text.as_bytes())?,
        None => match std::fs::remove_file(&sig_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", sig_path.display()))
            }
            _ => {}
        },
    }
    lock.insert(entry);
    lock.write(&lock_path)?;
    write_atomic(&target, &bytes)?;
    eprintln!(
        "toolhost: added {} as {} ({}), pinned in {}",
        source_text,
        target.display(),
        sha256_digest(&bytes),
        lock_path.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn remove(ctx: &Ctx<'_>, name: &str) -> Result<ExitCode> {
    valid_name(name)?;
    let dir = ctx.dir()?;
    let lock_path = ctx.lock_path()?;
    let mut lock = read_lock(&lock_path)?;
    let target = dir.join(format!("{name}.wasm"));
    let mut did = false;
    for path in [signature::signature_path(&target), target.clone()] {
        match std::fs::remove_file(&path) {
            Ok(()) => did = true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
        }
    }
    if lock.remove(name).is_some() {
        lock.write(&lock_path)?;
        did = true;
    }
    if !did {
        bail!("no plugin named `{name}` in {} or its lock", dir.display());
    }
    eprintln!("toolhost: removed {name}");
    Ok(ExitCode::SUCCESS)
}

/// The registry options: `--insecure` and the credentials in the
/// environment.
fn oci_options(insecure: bool) -> Result<OciOptions> {
    let user = std::env::var("TOOLHOST_REGISTRY_USERNAME").ok();
    let password = std::env::var("TOOLHOST_REGISTRY_PASSWORD").ok();
    let credentials = match (user, password) {
        (None, None) => Credentials::Anonymous,
        (Some(username), Some(password)) => Credentials::Basic { username, password },
        _ => {
            bail!("set both TOOLHOST_REGISTRY_USERNAME and TOOLHOST_REGISTRY_PASSWORD, or neither")
        }
    };
    Ok(OciOptions {
        insecure,
        credentials,
        ..OciOptions::default()
    })
}

fn push(file: &Path, target: &str, insecure: bool) -> Result<ExitCode> {
    let reference: OciReference = target.parse()?;
    if reference.digest.is_some() {
        bail!("push to a tag (oci://HOST/REPO:TAG), not a digest");
    }
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let sig = signature::read_signature(file)?;
    let options = oci_options(insecure)?;
    let pushed = oci::push_blocking(&reference, &bytes, sig.as_deref(), &options)
        .with_context(|| format!("pushing to {reference}"))?;
    eprintln!(
        "toolhost: pushed {} ({}{})",
        file.display(),
        pushed.layer_digest,
        if sig.is_some() {
            ", with its signature"
        } else {
            ""
        }
    );
    out!("{}", pushed.pinned);
    Ok(ExitCode::SUCCESS)
}
