//! `tp-effects`: side-effecting tools for the host's dry-run, probe and
//! idempotency tests.
//!
//! | tool                   | side effect | dry-run | probe | does                               |
//! |------------------------|-------------|---------|-------|------------------------------------|
//! | `append_line`          | reversible  | yes     | yes   | appends a line, then waits         |
//! | `append_line_no_probe` | reversible  | no      | no    | the same; in-doubt needs a person  |
//! | `count_calls`          | idempotent  | no      | no    | appends one byte, returns the count |
//! | `clear_dir`            | irreversible| yes     | no    | deletes the files in a directory   |
//! | `sneaky_append`        | reversible  | yes     | yes   | appends a line; its dry-run and    |
//! |                        |             |         |       | probe try to append one too, and   |
//! |                        |             |         |       | its dry-run tries to ask the person|
//! | `sneaky_get`           | reversible  | yes     | yes   | one HTTP GET; its dry-run and      |
//! |                        |             |         |       | probe try to send one too          |
//! | `bump_counter`         | reversible  | no      | no    | read-modify-write of a counter     |
//! |                        |             |         |       | named by an `x-toolhost-resource`  |
//!
//! The wait (`hold_ms`) comes AFTER the effect, so a test can kill the host
//! (or let the call time out) once the effect has happened but before the
//! call returns: the textbook in-doubt call. It waits in slices of at most
//! 5 ms measured with `std::time::Instant` (WASI monotonic clock), so the
//! host's epoch deadline and cancellation still stop it promptly while it
//! burns almost no fuel or CPU.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use toolhost_sdk::{
    Change, Context, Deserialize, JsonSchema, Plan, Probe, Serialize, SideEffect, Tool, ToolError,
};
use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, Method, OutgoingRequest, Scheme};

/// Arguments of `append_line` and `append_line_no_probe`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AppendArgs {
    /// File to append to, relative to the workspace root; created if missing.
    #[schemars(length(min = 1, max = 1024), extend("x-toolhost-path" = "write"))]
    path: String,
    /// The line to append, without a line break.
    #[schemars(length(min = 1, max = 200), pattern(r"^[^\r\n]+$"))]
    line: String,
    /// Milliseconds to wait after appending, before returning.
    #[serde(default)]
    #[schemars(range(min = 0, max = 60_000))]
    hold_ms: u32,
}

/// Result of `append_line`.
#[derive(Debug, PartialEq, Eq, Serialize, JsonSchema)]
struct AppendOutput {
    /// The file, as given.
    path: String,
    /// Number of lines in the file after the append.
    lines: u64,
}

/// Arguments of `count_calls`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CountArgs {
    /// Counter file, relative to the workspace root; created if missing.
    #[schemars(length(min = 1, max = 1024), extend("x-toolhost-path" = "write"))]
    path: String,
    /// Milliseconds to wait after counting, before returning.
    #[serde(default)]
    #[schemars(range(min = 0, max = 60_000))]
    hold_ms: u32,
}

/// Result of `count_calls`.
#[derive(Serialize, JsonSchema)]
struct CountOutput {
    /// The counter file, as given.
    path: String,
    /// How many times the tool has run on this file (its size in bytes).
    count: u64,
}

fn file_error(e: &io::Error, path: &str) -> ToolError {
    ToolError::io(e, path).field("/path")
}

/// Appends `bytes` to the file (creating it) and flushes it to the host.
fn append(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new().append(true).create(true).open(path)?;
    file.write_all(bytes)?;
    file.flush()?;
    match file.sync_all() {
        Err(e) if e.kind() != io::ErrorKind::Unsupported => Err(e),
        _ => Ok(()),
    }
}

/// Waits `ms` milliseconds in short sleeps (see the crate docs).
fn hold(ms: u32) {
    let until = Instant::now() + Duration::from_millis(ms.into());
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(5)));
    }
}

fn append_line(ctx: &Context, args: AppendArgs) -> Result<AppendOutput, ToolError> {
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    append(&guest, format!("{}\n", args.line).as_bytes())
        .map_err(|e| file_error(&e, &args.path))?;
    let text = fs::read_to_string(&guest).map_err(|e| file_error(&e, &args.path))?;
    let lines = text.lines().count() as u64;
    hold(args.hold_ms);
    Ok(AppendOutput {
        path: args.path,
        lines,
    })
}

fn plan_append(ctx: &Context, args: AppendArgs) -> Result<Plan, ToolError> {
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    let added = args.line.len() as u64 + 1;
    let change = match fs::metadata(&guest) {
        Ok(meta) => Change::modify(&args.path, 1, 0, meta.len(), meta.len() + added),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Change::create(&args.path, 1, added),
        Err(e) => return Err(file_error(&e, &args.path)),
    };
    Ok(Plan::new(format!("append one line to {}", args.path)).change(change))
}

/// Done when the file holds the line (as a whole line): the append happened.
fn probe_append(
    ctx: &Context,
    args: AppendArgs,
    _key: &str,
) -> Result<Probe<AppendOutput>, ToolError> {
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    let text = match fs::read_to_string(&guest) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Probe::NotDone),
        Err(e) => return Err(file_error(&e, &args.path)),
    };
    if text.lines().any(|l| l == args.line) {
        Ok(Probe::Done(AppendOutput {
            path: args.path,
            lines: text.lines().count() as u64,
        }))
    } else {
        Ok(Probe::NotDone)
    }
}

fn count_calls(ctx: &Context, args: CountArgs) -> Result<CountOutput, ToolError> {
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    append(&guest, b".").map_err(|e| file_error(&e, &args.path))?;
    let count = fs::metadata(&guest)
        .map_err(|e| file_error(&e, &args.path))?
        .len();
    hold(args.hold_ms);
    Ok(CountOutput {
        path: args.path,
        count,
    })
}

/// Arguments of `bump_counter`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BumpArgs {
    /// Counter name: the resource this call writes (its file is
    /// `counters/<name>`, not a path argument).
    #[schemars(
        length(min = 1, max = 32),
        pattern(r"^[a-z0-9_]+$"),
        extend("x-toolhost-resource" = "write")
    )]
    counter: String,
    /// Milliseconds to wait between reading and writing the counter.
    #[serde(default)]
    #[schemars(range(min = 0, max = 60_000))]
    hold_ms: u32,
}

/// Result of `bump_counter`.
#[derive(Serialize, JsonSchema)]
struct BumpOutput {
    /// The counter's value after this call.
    value: u64,
}

/// Reads the counter, waits, writes it plus one: two calls that overlap
/// lose one increment unless the host keeps them apart.
fn bump_counter(ctx: &Context, args: BumpArgs) -> Result<BumpOutput, ToolError> {
    let rel = format!("counters/{}", args.counter);
    let guest = ctx.guest_path(&rel).map_err(|e| e.field("/counter"))?;
    let value = match fs::read_to_string(&guest) {
        Ok(text) => text.trim().parse::<u64>().unwrap_or(0),
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(ToolError::io(&e, &rel)),
    } + 1;
    hold(args.hold_ms);
    fs::write(&guest, value.to_string()).map_err(|e| ToolError::io(&e, &rel))?;
    Ok(BumpOutput { value })
}

/// Arguments of `clear_dir`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ClearArgs {
    /// Directory whose regular files are deleted, relative to the workspace
    /// root.
    #[schemars(length(min = 1, max = 1024), extend("x-toolhost-path" = "write"))]
    path: String,
}

/// Result of `clear_dir`.
#[derive(Serialize, JsonSchema)]
struct ClearOutput {
    /// The directory, as given.
    path: String,
    /// Names of the files deleted, sorted.
    deleted: Vec<String>,
}

/// The regular files directly in the directory, sorted by name.
fn files_in(ctx: &Context, path: &str) -> Result<Vec<String>, ToolError> {
    let guest = ctx.guest_path(path).map_err(|e| e.field("/path"))?;
    let mut names = Vec::new();
    for entry in fs::read_dir(&guest).map_err(|e| file_error(&e, path))? {
        let entry = entry.map_err(|e| file_error(&e, path))?;
        if entry
            .file_type()
            .map_err(|e| file_error(&e, path))?
            .is_file()
        {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

fn clear_dir(ctx: &Context, args: ClearArgs) -> Result<ClearOutput, ToolError> {
    let names = files_in(ctx, &args.path)?;
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    for name in &names {
        fs::remove_file(guest.join(name)).map_err(|e| file_error(&e, &args.path))?;
    }
    Ok(ClearOutput {
        path: args.path,
        deleted: names,
    })
}

fn plan_clear(ctx: &Context, args: ClearArgs) -> Result<Plan, ToolError> {
    let names = files_in(ctx, &args.path)?;
    let mut plan = Plan::new(format!("delete {} files in {}", names.len(), args.path));
    for name in names {
        plan = plan.change(Change::delete(format!("{}/{name}", args.path), 0, 0));
    }
    Ok(plan)
}

/// The dry-run of `sneaky_append`: plans the append, and also tries to make
/// it (which a dry-run must never be able to do). The plan's warning says
/// whether the write went through.
fn plan_sneaky(ctx: &Context, args: AppendArgs) -> Result<Plan, ToolError> {
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    let attempt = append(&guest, b"written by a dry-run\n");
    let form = toolhost_sdk::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
    let asked = toolhost_sdk::ask::ask("sneaky", "May I?", &form);
    let plan = plan_append(ctx, args)?;
    Ok(plan
        .warning(match attempt {
            Ok(()) => "write attempt: succeeded".to_string(),
            Err(e) => format!("write attempt: failed: {e}"),
        })
        .warning(match asked {
            Ok(reply) => format!("ask attempt: answered: {reply:?}"),
            Err(e) => format!("ask attempt: failed: {}: {}", e.code, e.message),
        }))
}

/// The probe of `sneaky_append`: tries to append (a probe must have no
/// effect), then answers as `append_line`'s probe does.
fn probe_sneaky(
    ctx: &Context,
    args: AppendArgs,
    key: &str,
) -> Result<Probe<AppendOutput>, ToolError> {
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    let _ = append(&guest, b"written by a probe\n");
    probe_append(ctx, args, key)
}

/// Arguments of `sneaky_get`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    /// `host:port` of a plain HTTP server; the request is `GET /`.
    #[schemars(length(min = 3, max = 300))]
    authority: String,
}

/// Result of `sneaky_get`.
#[derive(Serialize, JsonSchema)]
struct GetOutput {
    /// The response's status code.
    status: u16,
}

/// One `GET http://<authority>/` through `wasi:http`: the status, or what
/// the host answered instead (`HttpRequestDenied` when the origin is not
/// granted). The host's deadline bounds the wait.
fn get(authority: &str) -> Result<u16, String> {
    let request = OutgoingRequest::new(Fields::new());
    request
        .set_method(&Method::Get)
        .and_then(|()| request.set_scheme(Some(&Scheme::Http)))
        .and_then(|()| request.set_authority(Some(authority)))
        .and_then(|()| request.set_path_with_query(Some("/")))
        .map_err(|()| format!("the request for {authority} was malformed"))?;
    let future = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    loop {
        match future.get() {
            Some(Ok(Ok(response))) => return Ok(response.status()),
            Some(Ok(Err(e))) => return Err(format!("{e:?}")),
            Some(Err(())) => return Err("the response was already taken".into()),
            None => future.subscribe().block(),
        }
    }
}

fn sneaky_get(_: &Context, args: GetArgs) -> Result<GetOutput, ToolError> {
    let status = get(&args.authority).map_err(|e| ToolError::new("connection_failed", e))?;
    Ok(GetOutput { status })
}

/// The dry-run of `sneaky_get`: plans the request, and also tries to send
/// it (which a dry-run must never be able to do). The plan's warning says
/// whether it went out.
fn plan_sneaky_get(_: &Context, args: GetArgs) -> Result<Plan, ToolError> {
    let attempt = get(&args.authority);
    Ok(
        Plan::new(format!("send GET / to {}", args.authority)).warning(match attempt {
            Ok(status) => format!("network attempt: succeeded (status {status})"),
            Err(e) => format!("network attempt: failed: {e}"),
        }),
    )
}

/// The probe of `sneaky_get`: tries to send the request (a probe must have
/// no effect), then cannot tell whether the call's own request went out.
fn probe_sneaky_get(_: &Context, args: GetArgs, _key: &str) -> Result<Probe<GetOutput>, ToolError> {
    let _ = get(&args.authority);
    Ok(Probe::Unknown)
}

const APPEND_CONTRACT: &str = "\
Inputs: path = workspace-relative file (1-1024 chars), created if missing; line = text to \
append (1-200 chars, no line break); hold_ms = milliseconds to wait AFTER appending and before \
returning (0-60000, default 0). Output: {path, lines} = the path as given and the file's line \
count after the append (under 1 KiB). Errors: not_found (a parent directory is missing), \
permission_denied, io_error, invalid_path, invalid_arguments.";

fn append_tool(name: &'static str, title: &'static str, description: String) -> Tool {
    Tool::new(name, append_line)
        .title(title)
        .description(description)
        .side_effect(SideEffect::Reversible)
        .reads_files()
        .writes_files()
        .error_codes(&["not_found", "permission_denied", "io_error"])
        .timeout_ms(70_000)
        .max_output_bytes(1024)
}

fn tools() -> Vec<Tool> {
    vec![
        append_tool(
            "append_line",
            "Append a line",
            format!(
                "Test tool: appends one line to a file, then waits hold_ms. Use only in \
                 toolhost's own tests. {APPEND_CONTRACT} Side effect: reversible (one more \
                 line). Dry-run: plans the append. Probe: done when the file contains the \
                 line, not-done otherwise."
            ),
        )
        .dry_run(plan_append)
        .probe(probe_append),
        append_tool(
            "append_line_no_probe",
            "Append a line (no probe)",
            format!(
                "Test tool: appends one line to a file, then waits hold_ms. Use only in \
                 toolhost's own tests. {APPEND_CONTRACT} Side effect: reversible (one more \
                 line). No dry-run and no probe: an interrupted call stays in doubt until an \
                 operator settles it."
            ),
        ),
        append_tool(
            "sneaky_append",
            "Append a line (with a writing dry-run and probe)",
            format!(
                "Test tool: appends one line to a file, then waits hold_ms. Use only in \
                 toolhost's own tests. {APPEND_CONTRACT} Side effect: reversible (one more \
                 line). Dry-run: plans the append and ALSO tries to append a line (the host \
                 must make that fail); the plan's warning says whether it worked. Probe: \
                 tries to append a line too, then answers like append_line's probe."
            ),
        )
        .dry_run(plan_sneaky)
        .probe(probe_sneaky),
        Tool::new("sneaky_get", sneaky_get)
            .title("Send one GET (with a dry-run and probe that send one too)")
            .description(
                "Test tool: sends one HTTP GET / to a plain-HTTP server and returns its status. \
                 Use only in toolhost's own tests. Inputs: authority = host:port (3-300 chars). \
                 Output: {status} (under 1 KiB). Errors: connection_failed (the message is the \
                 wasi:http error, e.g. HttpRequestDenied), invalid_arguments. Side effect: \
                 reversible (the server sees one request). Dry-run: plans the request and ALSO \
                 tries to send it (the host must refuse); the plan's warning says whether it \
                 went out. Probe: tries to send it too, then answers unknown.",
            )
            .side_effect(SideEffect::Reversible)
            .network_host("any")
            .error_codes(&["connection_failed"])
            .timeout_ms(10_000)
            .max_output_bytes(1024)
            .dry_run(plan_sneaky_get)
            .probe(probe_sneaky_get),
        Tool::new("count_calls", count_calls)
            .title("Count calls")
            .description(
                "Test tool: appends one byte to a counter file and returns how many bytes it \
                 now has, i.e. how many times it ran; then waits hold_ms. Use only in \
                 toolhost's own tests, to prove a call ran exactly once. Inputs: path = \
                 workspace-relative counter file (1-1024 chars), created if missing; hold_ms = \
                 milliseconds to wait after counting (0-60000, default 0). Output: {path, \
                 count} (under 1 KiB). Errors: not_found, permission_denied, io_error, \
                 invalid_path, invalid_arguments. Side effect: declared idempotent so that the \
                 host deduplicates it by key; each real execution adds one byte. No dry-run, \
                 no probe.",
            )
            .side_effect(SideEffect::Idempotent)
            .reads_files()
            .writes_files()
            .error_codes(&["not_found", "permission_denied", "io_error"])
            .timeout_ms(70_000)
            .max_output_bytes(1024),
        Tool::new("bump_counter", bump_counter)
            .title("Bump a named counter")
            .description(
                "Test tool: reads the number in counters/<counter> (0 when missing), waits \
                 hold_ms, writes it back plus one. Use only in toolhost's own tests of \
                 plugin-declared resources: the counter argument is annotated \
                 x-toolhost-resource write. Inputs: counter = counter name (1-32 chars, a-z \
                 0-9 _); hold_ms = milliseconds between read and write (0-60000, default \
                 0). Output: {value} = the counter after this call (under 1 KiB). Errors: \
                 not_found (no counters directory), permission_denied, io_error, \
                 invalid_arguments. Side effect: reversible (the counter goes up by one). \
                 No dry-run, no probe.",
            )
            .side_effect(SideEffect::Reversible)
            .reads_files()
            .writes_files()
            .error_codes(&["not_found", "permission_denied", "io_error"])
            .timeout_ms(70_000)
            .max_output_bytes(1024),
        Tool::new("clear_dir", clear_dir)
            .title("Clear a directory")
            .description(
                "Test tool: deletes every regular file directly inside a directory \
                 (subdirectories and links stay). Use only in toolhost's own tests of plans \
                 on directory targets. Inputs: path = workspace-relative directory (1-1024 \
                 chars). Output: {path, deleted: [file names, sorted]} (under 16 KiB). \
                 Errors: not_found, permission_denied, io_error, invalid_path, \
                 invalid_arguments. Side effect: irreversible. Dry-run: plans one delete \
                 per file. No probe.",
            )
            .side_effect(SideEffect::Irreversible)
            .reads_files()
            .writes_files()
            .error_codes(&["not_found", "permission_denied", "io_error"])
            .timeout_ms(10_000)
            .max_output_bytes(16 * 1024)
            .dry_run(plan_clear),
    ]
}

toolhost_sdk::plugin!(tools);
