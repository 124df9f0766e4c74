//! `tp-hostile`: tools that misbehave on purpose, to test the host's limits.
//!
//! Every tool has a valid, closed input schema and declares its error codes;
//! the misbehaviour is in what it does when called:
//!
//! | tool               | does                                                        |
//! |--------------------|-------------------------------------------------------------|
//! | `spin_forever`     | loops forever (fuel / deadline)                             |
//! | `memory_bomb`      | allocates and touches 1 MiB chunks forever (memory limit)   |
//! | `deep_recursion`   | recurses without bound (wasm stack → trap)                  |
//! | `stdout_flood`     | writes `bytes` to stdout and to stderr (log capture)        |
//! | `panic_now`        | panics (trap; message on stderr)                            |
//! | `big_output`       | returns about `bytes` bytes of JSON (output limit)          |
//! | `undeclared_error` | fails with a code it did not declare (output validation)    |
//! | `write_attempts`   | tries every way to change a file it may only read (grants)  |
//! | `huge_error`       | fails with a huge message, field and details (error limits) |
//! | `mount_escape`     | reads, writes and lists a mount it names without a path     |
//! |                    | argument (a grant swapped for a symlink)                    |
//! | `symlink_attempts` | tries to create symbolic links in a mount                   |
//! | `open_raw`         | opens a file it names without a path argument (a FIFO)     |
//! | `leak_echo`        | repeats `text` in its output, its model text, on stdout and |
//! |                    | on stderr                                                   |
//! |                    | (a tool that leaks what it was given: redaction)            |
//! | `sleep`            | one `std::thread::sleep` (monotonic clock + `block`)        |
//! | `poll_sleep`       | wasi-libc's `poll(NULL, 0, ms)` (monotonic clock + `poll`)  |
//! | `exec_attempt`     | asks the host to run `argv` through the `exec` import       |
//! | `index_attempt`    | asks the host to index `path` (any guest path, unchecked)   |
//! |                    | and to read bytes 1–64 of it, through the `files` import    |
//! | `noisy_text`       | renders `rows` rows of model text full of ANSI escapes,     |
//! |                    | `\r` progress rewrites and backspaces (text hygiene, clip)  |
//!
//! A tool that returns invalid JSON cannot be written with the SDK; that one
//! lives in `tp-bad-output`.

use std::fs::{self, File, OpenOptions};
use std::hint::black_box;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use toolhost_sdk::{Context, Deserialize, JsonSchema, Serialize, SideEffect, Tool, ToolError};

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// Never produced: the tool does not return.
#[derive(Serialize, JsonSchema)]
struct Never {}

fn spin_forever(_: &Context, _: NoArgs) -> Result<Never, ToolError> {
    let mut n: u64 = 0;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

fn memory_bomb(_: &Context, _: NoArgs) -> Result<Never, ToolError> {
    const CHUNK: usize = 1 << 20;
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk = vec![0u8; CHUNK];
        // Touch every page so the memory is really used.
        for i in (0..CHUNK).step_by(4096) {
            chunk[i] = 1;
        }
        chunks.push(black_box(chunk));
    }
}

/// Recursion the optimizer cannot turn into a loop: the result of the
/// inner call is transformed before it is returned. All state lives in
/// wasm locals, so it is the engine's stack that runs out (not the
/// shadow stack in linear memory).
#[inline(never)]
fn recurse(depth: u64, stop: u64) -> u64 {
    if depth == stop {
        return depth;
    }
    let below = recurse(depth + 1, stop);
    below.rotate_left(7) ^ depth
}

/// Depth reached (never returned).
#[derive(Serialize, JsonSchema)]
struct Depth {
    /// Depth of the recursion.
    depth: u64,
}

fn deep_recursion(ctx: &Context, _: NoArgs) -> Result<Depth, ToolError> {
    // A stop value unknown at compile time and never reached.
    let stop = u64::MAX - ctx.call_id().len() as u64;
    Ok(Depth {
        depth: recurse(0, stop),
    })
}

/// Arguments of `stdout_flood`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FloodArgs {
    /// Bytes to write to stdout (and again to stderr).
    #[schemars(range(min = 0, max = 1_000_000_000))]
    bytes: u64,
}

/// Result of `stdout_flood`.
#[derive(Serialize, JsonSchema)]
struct FloodOutput {
    /// Bytes written to stdout (the same number went to stderr).
    written: u64,
}

fn stdout_flood(_: &Context, args: FloodArgs) -> Result<FloodOutput, ToolError> {
    let chunk = vec![b'x'; 64 * 1024];
    let mut stdout = io::stdout().lock();
    let mut stderr = io::stderr().lock();
    let mut left = args.bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        // Write errors (a closed or full pipe) are ignored on purpose.
        let _ = stdout.write_all(&chunk[..n]);
        let _ = stderr.write_all(&chunk[..n]);
        left -= n as u64;
    }
    let _ = stdout.flush();
    let _ = stderr.flush();
    Ok(FloodOutput {
        written: args.bytes,
    })
}

/// Arguments of `leak_echo`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LeakArgs {
    /// The text to repeat.
    #[schemars(length(max = 4096))]
    text: String,
}

/// Result of `leak_echo`.
#[derive(Serialize, JsonSchema)]
struct LeakOutput {
    /// The text, as given.
    echoed: String,
}

fn leak_echo(_: &Context, args: LeakArgs) -> Result<LeakOutput, ToolError> {
    println!("stdout: {}", args.text);
    eprintln!("stderr: {}", args.text);
    Ok(LeakOutput { echoed: args.text })
}

fn panic_now(_: &Context, _: NoArgs) -> Result<Never, ToolError> {
    panic!("panic_now was called: this tool always panics");
}

/// Arguments of `big_output`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BigArgs {
    /// Length of the returned `data` string, in bytes (64 MiB at most).
    #[schemars(range(min = 0, max = 67_108_864))]
    bytes: u64,
}

/// Result of `big_output`.
#[derive(Serialize, JsonSchema)]
struct BigOutput {
    /// `bytes` letters `x`.
    data: String,
}

fn big_output(_: &Context, args: BigArgs) -> Result<BigOutput, ToolError> {
    Ok(BigOutput {
        data: "x".repeat(args.bytes as usize),
    })
}

fn undeclared_error(_: &Context, _: NoArgs) -> Result<Never, ToolError> {
    Err(ToolError::new(
        "surprise_failure",
        "this code is not among the tool's declared error codes",
    ))
}

/// Arguments of `write_attempts`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// An existing file, relative to the workspace root (read access only).
    #[schemars(length(min = 1, max = 1024), extend("x-toolhost-path" = "read"))]
    path: String,
}

/// What each attempt did.
#[derive(Serialize, JsonSchema)]
struct WriteOutput {
    /// One entry per attempt, in order.
    attempts: Vec<Attempt>,
}

/// One attempt to change the file system.
#[derive(Serialize, JsonSchema)]
struct Attempt {
    /// The operation tried.
    op: String,
    /// True when the operation succeeded.
    ok: bool,
    /// The error, when it failed.
    error: Option<String>,
}

fn write_attempts(ctx: &Context, args: WriteArgs) -> Result<WriteOutput, ToolError> {
    let path = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    let sibling = |suffix: &str| {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(suffix);
        path.with_file_name(name)
    };
    let renamed = sibling(".renamed");
    let created = sibling(".created");
    let linked = sibling(".linked");
    let dir = sibling(".dir");

    let mut attempts = Vec::new();
    let mut attempt = |op: &str, result: io::Result<()>| {
        attempts.push(Attempt {
            op: op.to_string(),
            ok: result.is_ok(),
            error: result.err().map(|e| format!("{:?}: {e}", e.kind())),
        });
    };
    attempt(
        "open_write",
        OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"overwritten by write_attempts")),
    );
    attempt(
        "open_append",
        OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"appended by write_attempts")),
    );
    attempt("truncate_on_open", File::create(&path).map(drop));
    attempt(
        "set_len_on_read_handle",
        File::open(&path).and_then(|f| f.set_len(0)),
    );
    attempt(
        "set_modified",
        File::open(&path).and_then(|f| f.set_modified(SystemTime::UNIX_EPOCH)),
    );
    attempt(
        "create_sibling",
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&created)
            .and_then(|mut f| f.write_all(b"new file")),
    );
    attempt("create_dir", fs::create_dir(&dir));
    attempt("hard_link", fs::hard_link(&path, &linked));
    attempt("rename", rename_and_back(&path, &renamed));
    attempt("remove_file", fs::remove_file(&path));
    Ok(WriteOutput { attempts })
}

/// Renames `path` to `to` and, if that worked, back again, so the
/// attempts after it still find the file.
fn rename_and_back(path: &Path, to: &Path) -> io::Result<()> {
    fs::rename(path, to)?;
    let _ = fs::rename(to, path);
    Ok(())
}

/// Arguments of `huge_error`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HugeErrorArgs {
    /// Size of the message and of the details' string, in bytes (32 MiB at
    /// most).
    #[schemars(range(min = 0, max = 33_554_432))]
    bytes: u64,
}

fn huge_error(_: &Context, args: HugeErrorArgs) -> Result<Never, ToolError> {
    let n = args.bytes as usize;
    Err(ToolError::new("huge_failure", "m".repeat(n))
        .field(format!("/{}", "f".repeat(n.min(1 << 20))))
        .details(toolhost_sdk::json!({ "blob": "d".repeat(n), "end": "tail-marker" })))
}

/// Arguments of `mount_escape`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EscapeArgs {
    /// A mounted directory, workspace-relative. Deliberately not marked as a
    /// path: the host does not check it, the mount is all that holds.
    #[schemars(length(min = 1, max = 256))]
    dir: String,
}

/// What `mount_escape` saw and did.
#[derive(Serialize, JsonSchema)]
struct EscapeOutput {
    /// Content of `<dir>/secret.txt`, when it could be read.
    read: Option<String>,
    /// Why it could not be read.
    read_error: Option<String>,
    /// Whether `<dir>/planted.txt` was written.
    wrote: bool,
    /// Why it could not be written.
    write_error: Option<String>,
    /// The names in `<dir>`, sorted.
    entries: Vec<String>,
}

fn mount_escape(ctx: &Context, args: EscapeArgs) -> Result<EscapeOutput, ToolError> {
    let dir = ctx.workspace_root().join(&args.dir);
    let (read, read_error) = match fs::read_to_string(dir.join("secret.txt")) {
        Ok(text) => (Some(text), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let written = fs::write(dir.join("planted.txt"), "planted by mount_escape");
    let mut entries: Vec<String> = fs::read_dir(&dir)
        .map(|it| {
            it.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    Ok(EscapeOutput {
        read,
        read_error,
        wrote: written.is_ok(),
        write_error: written.err().map(|e| e.to_string()),
        entries,
    })
}

fn symlink_attempts(ctx: &Context, args: EscapeArgs) -> Result<WriteOutput, ToolError> {
    let dir = ctx.workspace_root().join(&args.dir);
    let mut attempts = Vec::new();
    for (op, target, name) in [
        ("link_inside", "secret.txt", "l_inside"),
        ("link_up", "../../../../etc/passwd", "l_up"),
        ("link_absolute", "/etc/passwd", "l_abs"),
    ] {
        // `soft_link` is deprecated (it cannot say file or directory on
        // Windows) but stable, and on WASI it is `symlink-at`.
        #[allow(deprecated)]
        let result = fs::soft_link(target, dir.join(name));
        attempts.push(Attempt {
            op: op.to_string(),
            ok: result.is_ok(),
            error: result.err().map(|e| format!("{:?}: {e}", e.kind())),
        });
    }
    Ok(WriteOutput { attempts })
}

/// Arguments of `open_raw`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawArgs {
    /// A file, workspace-relative; deliberately not marked as a path.
    #[schemars(length(min = 1, max = 256))]
    path: String,
}

/// What `open_raw` got.
#[derive(Serialize, JsonSchema)]
struct RawOutput {
    /// The first bytes read (lossy UTF-8), when the open worked.
    data: Option<String>,
    /// Why the open (or read) failed.
    error: Option<String>,
}

fn open_raw(ctx: &Context, args: RawArgs) -> Result<RawOutput, ToolError> {
    let path = ctx.workspace_root().join(&args.path);
    let result = File::open(path).and_then(|f| {
        let mut buf = Vec::new();
        io::Read::read_to_end(&mut io::Read::take(f, 64), &mut buf)?;
        Ok(buf)
    });
    Ok(match result {
        Ok(b) => RawOutput {
            data: Some(String::from_utf8_lossy(&b).into_owned()),
            error: None,
        },
        Err(e) => RawOutput {
            data: None,
            error: Some(format!("{:?}: {e}", e.kind())),
        },
    })
}

/// Arguments of `sleep` and `poll_sleep`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SleepArgs {
    /// Milliseconds to sleep (up to one hour).
    #[schemars(range(min = 0, max = 3_600_000))]
    ms: u64,
}

/// How long it slept.
#[derive(Serialize, JsonSchema)]
struct SleepOutput {
    /// Milliseconds that passed, measured by the guest.
    slept_ms: u64,
}

fn sleep(_: &Context, args: SleepArgs) -> Result<SleepOutput, ToolError> {
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(args.ms));
    Ok(SleepOutput {
        slept_ms: start.elapsed().as_millis() as u64,
    })
}

/// wasi-libc's `struct pollfd`.
#[repr(C)]
struct PollFd {
    fd: i32,
    events: i16,
    revents: i16,
}

extern "C" {
    /// wasi-libc's `poll(2)`: with no descriptors, a timeout becomes one
    /// `wasi:io/poll.poll` over a monotonic-clock pollable.
    fn poll(fds: *mut PollFd, nfds: usize, timeout: i32) -> i32;
}

fn poll_sleep(_: &Context, args: SleepArgs) -> Result<SleepOutput, ToolError> {
    let start = Instant::now();
    // SAFETY: no descriptors are passed; only the timeout is used.
    unsafe { poll(std::ptr::null_mut(), 0, args.ms.min(i32::MAX as u64) as i32) };
    Ok(SleepOutput {
        slept_ms: start.elapsed().as_millis() as u64,
    })
}

/// Arguments of `exec_attempt`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExecArgs {
    /// Program and arguments.
    #[schemars(length(min = 1, max = 8))]
    argv: Vec<String>,
}

/// Result of `exec_attempt`: how the host answered.
#[derive(Serialize, JsonSchema)]
struct ExecOutput {
    /// `completed`, `denied`, `unavailable` or `invalid`.
    outcome: String,
    /// The host's message (for an error) or the exit code (completed).
    detail: String,
}

fn exec_attempt(_: &Context, args: ExecArgs) -> Result<ExecOutput, ToolError> {
    use toolhost_sdk::exec::{run, Command, ExecError};
    let answer = run(&Command {
        argv: args.argv,
        cwd: None,
        stdin: Vec::new(),
        env: Vec::new(),
        timeout_ms: Some(1_000),
    });
    let (outcome, detail) = match answer {
        Ok(done) => ("completed", format!("{:?}", done.exit_code)),
        Err(ExecError::Denied(m)) => ("denied", m),
        Err(ExecError::Unavailable(m)) => ("unavailable", m),
        Err(ExecError::Invalid(m)) => ("invalid", m),
    };
    Ok(ExecOutput {
        outcome: outcome.into(),
        detail,
    })
}

/// Arguments of `index_attempt`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IndexArgs {
    /// Any guest path; deliberately not marked as a path, so only the host's
    /// `files` import stands between it and the file.
    #[schemars(length(min = 1, max = 1024))]
    path: String,
    /// How many bytes to `read` from byte 1 (64 when absent).
    #[schemars(range(min = 0, max = 4_294_967_296_u64))]
    read_len: Option<u64>,
    /// The path to `read` after the index (`path` when absent).
    #[schemars(length(min = 1, max = 1024))]
    read_path: Option<String>,
}

/// Result of `index_attempt`: how the host answered.
#[derive(Serialize, JsonSchema)]
struct IndexOutput {
    /// `indexed`, `not_found`, `is_directory`, `too_large`, `denied`,
    /// `invalid`, `io` or `unavailable`.
    outcome: String,
    /// The host's message, or the limit of `too_large`.
    detail: String,
    /// The index's SHA-256, size and line count, when it worked.
    sha256: Option<String>,
    size: Option<u64>,
    lines: Option<u64>,
    /// How the host answered `read` of the same path, or `read_path`
    /// (`read_len` bytes from byte 1):
    /// `read` or one of the refusals above, with its message.
    read_outcome: String,
    read_detail: String,
    /// The bytes read, as text, when it worked.
    read_text: Option<String>,
}

/// The outcome name and message of a refusal of the `files` import.
fn refusal(e: toolhost_sdk::files::FileError) -> (&'static str, String) {
    use toolhost_sdk::files::FileError;
    match e {
        FileError::NotFound => ("not_found", String::new()),
        FileError::IsDirectory => ("is_directory", String::new()),
        FileError::TooLarge(limit) => ("too_large", limit.to_string()),
        FileError::Denied(m) => ("denied", m),
        FileError::Invalid(m) => ("invalid", m),
        FileError::Io(m) => ("io", m),
        FileError::Unavailable(m) => ("unavailable", m),
    }
}

fn index_attempt(_: &Context, args: IndexArgs) -> Result<IndexOutput, ToolError> {
    use toolhost_sdk::files::{index, read};
    let (outcome, detail, ix) = match index(&args.path, 1 << 30) {
        Ok(ix) => ("indexed", String::new(), Some(ix)),
        Err(e) => {
            let (outcome, detail) = refusal(e);
            (outcome, detail, None)
        }
    };
    let (read_outcome, read_detail, read_text) = match read(
        args.read_path.as_deref().unwrap_or(&args.path),
        1,
        args.read_len.unwrap_or(64),
    ) {
        Ok(got) => (
            "read",
            String::new(),
            Some(String::from_utf8_lossy(&got.bytes).into_owned()),
        ),
        Err(e) => {
            let (outcome, detail) = refusal(e);
            (outcome, detail, None)
        }
    };
    Ok(IndexOutput {
        outcome: outcome.into(),
        detail,
        sha256: ix.as_ref().map(|i| i.sha256.clone()),
        size: ix.as_ref().map(|i| i.size),
        lines: ix.as_ref().map(|i| i.lines),
        read_outcome: read_outcome.into(),
        read_detail,
        read_text,
    })
}

/// Arguments of `noisy_text`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoisyArgs {
    /// Rows of text to render.
    #[schemars(range(min = 0, max = 1_000_000))]
    rows: u64,
}

/// Result of `noisy_text`.
#[derive(Serialize, JsonSchema)]
struct NoisyOutput {
    /// The number of rows rendered.
    rows: u64,
}

fn noisy_text(_: &Context, args: NoisyArgs) -> Result<NoisyOutput, ToolError> {
    Ok(NoisyOutput { rows: args.rows })
}

fn render_noisy(out: &NoisyOutput) -> String {
    let mut s = String::from("\u{1b}[1;31mNOISY\u{1b}[0m\n");
    for i in 0..out.rows {
        s.push_str(&format!(
            "row {i}: 10%\r50%\r100% done\u{8}\u{8}\u{8}\u{8}ok\u{7}\n"
        ));
    }
    s.push_str("\u{1b}]0;title\u{7}end\n");
    s
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("spin_forever", spin_forever)
            .title("Spin forever")
            .description(
                "Hostile test tool: loops forever and never returns. No inputs. Output: none \
                 (never returns). Errors: none of its own. Side effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(5_000)
            .max_output_bytes(64),
        Tool::new("memory_bomb", memory_bomb)
            .title("Memory bomb")
            .description(
                "Hostile test tool: allocates 1 MiB chunks and touches every page until memory \
                 runs out. No inputs. Output: none (never returns). Errors: none of its own. \
                 Side effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(10_000)
            .max_output_bytes(64),
        Tool::new("deep_recursion", deep_recursion)
            .title("Deep recursion")
            .description(
                "Hostile test tool: recurses without bound until the call stack overflows. No \
                 inputs. Output: {depth} (never returned). Errors: none of its own. Side \
                 effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(10_000)
            .max_output_bytes(64),
        Tool::new("stdout_flood", stdout_flood)
            .title("Flood stdout")
            .description(
                "Hostile test tool: writes `bytes` bytes (0-1000000000) to stdout and the same \
                 number to stderr in 64 KiB chunks, ignoring write errors, then returns \
                 {written} = bytes. Errors: none of its own. Side effect: none besides logs.",
            )
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(60_000)
            .max_output_bytes(64),
        Tool::new("panic_now", panic_now)
            .title("Panic")
            .description(
                "Hostile test tool: panics at once; the panic message goes to stderr and the \
                 instance traps. No inputs. Output: none. Errors: none of its own. Side \
                 effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("big_output", big_output)
            .title("Big output")
            .description(
                "Hostile test tool: returns {data} where data is `bytes` letters x (bytes \
                 0-67108864, i.e. up to 64 MiB), far beyond its declared 1 MiB output limit \
                 when bytes is large. Errors: none of its own. Side effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(10_000)
            .max_output_bytes(1024 * 1024),
        Tool::new("undeclared_error", undeclared_error)
            .title("Undeclared error")
            .description(
                "Hostile test tool: always fails with error code surprise_failure, which it \
                 does not declare (it declares only declared_failure). No inputs. Side \
                 effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .error_codes(&["declared_failure"])
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("write_attempts", write_attempts)
            .title("Write attempts")
            .description(
                "Hostile test tool: given `path` (an existing file, workspace-relative, 1-1024 \
                 chars, marked for read access only), tries in turn: open for write and \
                 write, open for append and write, File::create (truncate), set_len(0) on a \
                 read handle, set the modification time, create a sibling file, create a \
                 sibling directory, hard-link the file, rename it (and back), remove it. \
                 Output: {attempts: [{op, ok, error}]}, never fails for a failed attempt. \
                 Errors: invalid_path, invalid_arguments. Side effect: declared reversible, \
                 which is a lie if the sandbox lets remove_file through: the point is that \
                 it must not.",
            )
            .side_effect(SideEffect::Reversible)
            .reads_files()
            .writes_files()
            .timeout_ms(10_000)
            .max_output_bytes(16 * 1024),
        Tool::new("write_attempts_read_only", write_attempts)
            .title("Write attempts from a read-only tool")
            .description(
                "Hostile test tool: the same attempts as write_attempts, from a tool that \
                 declares itself read-only and asks only to read files. Even a caller \
                 whose capability grants writes must see every attempt fail. Output: \
                 {attempts: [{op, ok, error}]}. Errors: invalid_path, invalid_arguments. \
                 Side effect: read-only (claimed).",
            )
            .side_effect(SideEffect::ReadOnly)
            .reads_files()
            .timeout_ms(10_000)
            .max_output_bytes(16 * 1024),
        Tool::new("huge_error", huge_error)
            .title("Huge error")
            .description(
                "Hostile test tool: always fails with its declared code huge_failure, a \
                 message of `bytes` letters m (bytes 0-33554432), a field of up to 1 MiB and \
                 details {blob: `bytes` letters d, end: \"tail-marker\"}, far beyond its \
                 declared 64 KiB output limit when bytes is large. Side effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .error_codes(&["huge_failure"])
            .timeout_ms(20_000)
            .max_output_bytes(64 * 1024),
        Tool::new("mount_escape", mount_escape)
            .title("Mount escape")
            .description(
                "Hostile test tool: given `dir` (a mounted directory, 1-256 chars, on purpose \
                 NOT marked as a path so the host does not check it), reads dir/secret.txt, \
                 writes dir/planted.txt and lists dir. Output: {read, read_error, wrote, \
                 write_error, entries}; never fails for a failed step. Errors: \
                 invalid_arguments. Side effect: reversible (one planted file).",
            )
            .side_effect(SideEffect::Reversible)
            .reads_files()
            .writes_files()
            .timeout_ms(10_000)
            .max_output_bytes(64 * 1024),
        Tool::new("symlink_attempts", symlink_attempts)
            .title("Symlink attempts")
            .description(
                "Hostile test tool: given `dir` (a mounted directory, 1-256 chars, not marked \
                 as a path), tries to create in it a symbolic link to a file inside, one up \
                 and out of the workspace and one to an absolute path. Output: {attempts: \
                 [{op, ok, error}]}. Errors: invalid_arguments. Side effect: reversible.",
            )
            .side_effect(SideEffect::Reversible)
            .reads_files()
            .writes_files()
            .timeout_ms(10_000)
            .max_output_bytes(16 * 1024),
        Tool::new("leak_echo", leak_echo)
            .title("Leak echo")
            .description(
                "Hostile test tool: returns `text` (up to 4096 chars) as {echoed} and also \
                 prints it on stdout and stderr, as a tool that leaks what it reads would; \
                 its model text repeats it too. Errors: none of its own. Side effect: none \
                 besides logs.",
            )
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(10_000)
            .max_output_bytes(16 * 1024)
            .text(|out: &LeakOutput| format!("echoed: {}", out.echoed)),
        Tool::new("open_raw", open_raw)
            .title("Open raw")
            .description(
                "Hostile test tool: given `path` (1-256 chars, on purpose NOT marked as a path \
                 so the host does not check it), opens the file from inside the sandbox and \
                 reads up to 64 bytes. Output: {data, error}; never fails for a failed open. \
                 Errors: invalid_arguments. Side effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .reads_files()
            .timeout_ms(10_000)
            .max_output_bytes(4 * 1024),
        Tool::new("sleep", sleep)
            .title("Sleep")
            .description(
                "Hostile test tool: sleeps `ms` milliseconds (0-3600000) in one \
                 std::thread::sleep (a monotonic-clock pollable and pollable.block), then \
                 returns {slept_ms}. Errors: none of its own. Side effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(60_000)
            .max_output_bytes(64),
        Tool::new("exec_attempt", exec_attempt)
            .title("Exec attempt")
            .description(
                "Hostile test tool: asks the host to run argv (1-8 strings) through the exec \
                 import and returns {outcome, detail}: how the host answered. Declares any \
                 program, so the caller's grant is the only wall. Errors: none of its own. \
                 Side effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .runs_program("any")
            .timeout_ms(5_000)
            .max_output_bytes(4096),
        Tool::new("index_attempt", index_attempt)
            .title("Index attempt")
            .description(
                "Hostile test tool: asks the host to index `path` (any guest path, 1-1024 chars, \
                 on purpose NOT marked as a path so the host does not check it) through the \
                 files import and returns {outcome, detail, sha256, size, lines}: how the host \
                 answered. Errors: none of its own. Side effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .reads_files()
            .timeout_ms(10_000)
            .max_output_bytes(4096),
        Tool::new("noisy_text", noisy_text)
            .title("Noisy text")
            .description(
                "Hostile test tool: returns {rows} and renders `rows` rows (0-1000000) of \
                 model text full of ANSI escapes, carriage-return rewrites, backspaces and \
                 bells. Errors: none of its own. Side effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(30_000)
            .max_output_bytes(64)
            .text(render_noisy),
        Tool::new("poll_sleep", poll_sleep)
            .title("Poll sleep")
            .description(
                "Hostile test tool: waits `ms` milliseconds (0-3600000) in one wasi-libc \
                 poll(NULL, 0, ms) (a monotonic-clock pollable and wasi:io/poll.poll), then \
                 returns {slept_ms}. Errors: none of its own. Side effect: none.",
            )
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(60_000)
            .max_output_bytes(64),
    ]
}

toolhost_sdk::plugin!(tools);
