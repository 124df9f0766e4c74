//! Tools written in Python and JavaScript: the examples of `plugins/python`
//! (`csv_summary`) and `plugins/js` (`markdown_outline`), built from source
//! with the commands of `docs/python.md` and `docs/js.md`, loaded like any
//! plugin and held to the same sandbox as Rust tools.
//!
//! Both components are built once per test run (in parallel), into
//! `target/languages/`, with `TOOLHOST_KIT_TEST_TOOLS=1` so that each also
//! carries its kit's hidden test tools (`kit_py_spin`, `kit_py_open`,
//! `kit_py_echo` and the same with `kit_js_`). The guest toolchains come from
//! `.ci/guest-toolchains.sh`; on a developer machine the tests run it when
//! they are missing, under CI (`CI` set) they fail with a message instead.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::{CallOptions, Catalog, Host, LoadEvent, Sandbox, SandboxConfig, Source};

use crate::support::*;

/// The commands of the guides, run from the repository root. The docs must
/// contain these lines verbatim (`the_guides_show_the_commands_the_tests_run`).
const PY_INSTALL: [&str; 2] = [
    "python3 -m venv target/py-guest/venv",
    "target/py-guest/venv/bin/pip install -e plugins/python",
];
const PY_BUILD: &str = "target/py-guest/venv/bin/python -m toolhost_kit build plugins/python/examples/csv_summary.py -o target/languages/csv_summary.wasm";
const JS_INSTALL: &str = "npm ci --prefix plugins/js";
const JS_BUILD: &str = "node plugins/js/build.mjs plugins/js/examples/markdown_outline.js -o target/languages/markdown_outline.wasm";

const PY_WASM: &str = "target/languages/csv_summary.wasm";
const JS_WASM: &str = "target/languages/markdown_outline.wasm";

fn toolchains_present() -> bool {
    let root = repo_root();
    let python = Command::new(root.join("target/py-guest/venv/bin/python"))
        .args(["-c", "import toolhost_kit, componentize_py"])
        .output()
        .is_ok_and(|o| o.status.success());
    python
        && root
            .join("plugins/js/node_modules/@bytecodealliance/componentize-js/package.json")
            .is_file()
}

/// Makes sure componentize-py and componentize-js are installed.
fn ensure_toolchains() {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        if toolchains_present() {
            return;
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "the Python and JavaScript guest toolchains are missing: CI must run \
             `bash .ci/guest-toolchains.sh` before `cargo test`"
        );
        // Straight to the terminal: the test harness captures eprintln!,
        // and a person running `cargo test` should know what is fetched.
        let _ = writeln!(
            std::io::stderr(),
            "\ncargo test: the Python and JavaScript language tests build their example \
             tools from source and need the guest toolchains, which are missing; \
             installing them now with .ci/guest-toolchains.sh:\n  \
             - componentize-py and toolhost_kit into target/py-guest/venv (about 70 MB, from PyPI)\n  \
             - componentize-js into plugins/js/node_modules (about 390 MB, from the npm registry)\n\
             (once; nothing outside this repository is touched)\n"
        );
        let out = Command::new("bash")
            .arg(repo_root().join(".ci/guest-toolchains.sh"))
            .current_dir(repo_root())
            .output()
            .expect("running .ci/guest-toolchains.sh");
        assert!(
            out.status.success(),
            ".ci/guest-toolchains.sh failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(toolchains_present(), "the toolchains are still missing");
    });
}

/// Runs one of the guides' command lines (split on spaces) from the
/// repository root, with the kits' hidden test tools enabled.
fn run_doc_command(line: &str) -> Output {
    let mut words = line.split(' ');
    let program = words.next().unwrap();
    let root = repo_root();
    let program = if program.contains('/') {
        root.join(program)
    } else {
        PathBuf::from(program)
    };
    let out = Command::new(&program)
        .args(words)
        .current_dir(&root)
        .env("TOOLHOST_KIT_TEST_TOOLS", "1")
        .output()
        .unwrap_or_else(|e| panic!("running {line}: {e}"));
    assert!(
        out.status.success(),
        "`{line}` failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub(crate) struct Built {
    pub(crate) python: PathBuf,
    pub(crate) js: PathBuf,
}

/// Takes `target/languages/` for this process: two test runs in one tree
/// (a developer's and an editor's, say) would otherwise overwrite each
/// other's components and cache. The lock is a directory holding the
/// owner's pid; it is taken over when that process is gone, so a crashed
/// run never blocks the next. The process keeps it until it exits.
fn lock_output_dir() {
    let dir = repo_root().join("target/languages");
    std::fs::create_dir_all(&dir).unwrap();
    let lock = dir.join(".lock");
    let me = std::process::id().to_string();
    let deadline = Instant::now() + Duration::from_secs(20 * 60);
    loop {
        if std::fs::create_dir(&lock).is_ok() {
            std::fs::write(lock.join("pid"), &me).unwrap();
            return;
        }
        let owner = std::fs::read_to_string(lock.join("pid")).unwrap_or_default();
        if owner == me {
            return;
        }
        let alive = !owner.is_empty() && Path::new("/proc").join(owner.trim()).exists();
        if !alive {
            // Stale (or half-written: give the owner a moment first).
            std::thread::sleep(Duration::from_millis(500));
            if std::fs::read_to_string(lock.join("pid")).unwrap_or_default() == owner {
                let _ = std::fs::remove_dir_all(&lock);
            }
            continue;
        }
        assert!(
            Instant::now() < deadline,
            "target/languages is locked by process {owner} for over 20 minutes"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Builds both examples once per run, in parallel.
pub(crate) fn built() -> &'static Built {
    static B: OnceLock<Built> = OnceLock::new();
    B.get_or_init(|| {
        lock_output_dir();
        ensure_toolchains();
        let root = repo_root();
        std::fs::create_dir_all(root.join("target/languages")).unwrap();
        let timed = |line: &'static str| {
            move || {
                let start = Instant::now();
                run_doc_command(line);
                eprintln!(
                    "languages: built in {:.1} s: {line}",
                    start.elapsed().as_secs_f64()
                );
            }
        };
        let python = std::thread::spawn(timed(PY_BUILD));
        timed(JS_BUILD)();
        python.join().expect("the Python build panicked");
        Built {
            python: root.join(PY_WASM),
            js: root.join(JS_WASM),
        }
    })
}

/// The compile cache of these tests. Every build makes new bytes, so the
/// entries of earlier runs are never read again: it starts empty each run.
pub(crate) fn cache_dir() -> PathBuf {
    repo_root().join("target/languages/compile-cache")
}

fn sandbox() -> &'static Sandbox {
    static S: OnceLock<Sandbox> = OnceLock::new();
    S.get_or_init(|| {
        lock_output_dir();
        let _ = std::fs::remove_dir_all(cache_dir());
        Sandbox::new(&SandboxConfig {
            cache_dir: Some(cache_dir()),
            ..SandboxConfig::default()
        })
        .expect("sandbox")
    })
}

/// Load events of the catalog load, per plugin.
static LOAD_EVENTS: Mutex<Vec<(String, LoadEvent)>> = Mutex::new(Vec::new());

/// A host with both examples (and their hidden test tools).
pub(crate) fn host() -> &'static Host {
    static H: OnceLock<Host> = OnceLock::new();
    H.get_or_init(|| {
        let b = built();
        let sources = [Source::File(b.python.clone()), Source::File(b.js.clone())];
        let catalog = Catalog::load(sandbox(), &sources, &|plugin, event| {
            if let LoadEvent::Compiled { elapsed } = event {
                eprintln!(
                    "languages: compiled {plugin} in {:.1} s",
                    elapsed.as_secs_f64()
                );
            }
            LOAD_EVENTS
                .lock()
                .unwrap()
                .push((plugin.to_string(), event));
        });
        Host::new(sandbox().clone(), catalog)
    })
}

fn with(fuel: Option<u64>, timeout_ms: Option<u64>) -> CallOptions {
    CallOptions {
        fuel,
        timeout_ms,
        ..CallOptions::default()
    }
}

#[track_caller]
fn assert_not_run(obs: &Value) {
    assert_eq!(obs["usage"]["fuel_consumed"], 0, "the guest ran: {obs:#}");
}

// ----- descriptors ---------------------------------------------------------------

#[test]
fn both_examples_load_and_pass_the_lint() {
    let h = host();
    let names = loaded_tool_names(h);
    assert_eq!(
        names,
        [
            "csv_summary",
            "kit_js_echo",
            "kit_js_open",
            "kit_js_spin",
            "kit_py_echo",
            "kit_py_open",
            "kit_py_spin",
            "markdown_outline"
        ]
    );
    for t in h.catalog().tools() {
        assert!(!t.report.refused, "{}", t.report);
        assert_eq!(t.report.errors(), 0, "{}", t.report);
    }
    // The examples lint clean: no warnings either, and fit both providers'
    // strict modes as far as their bounds allow.
    for name in ["csv_summary", "markdown_outline"] {
        let t = h.catalog().get(name).unwrap();
        assert_eq!(t.report.warnings(), 0, "{}", t.report);
        let d = &t.descriptor;
        assert_eq!(d.side_effect.as_str(), "read-only");
        assert!(d.needs.fs_read && !d.needs.fs_write, "{name}");
        assert!(t.input.has_path_fields(), "{name}");
        let s = &d.input_schema;
        assert_eq!(s["additionalProperties"], false, "{name}");
        assert_eq!(s["required"], json!(["path"]), "{name}");
        assert_eq!(s["properties"]["path"]["x-toolhost-path"], "read", "{name}");
        assert_eq!(s["properties"]["path"]["maxLength"], 1024, "{name}");
        for code in [
            "not_found",
            "not_text",
            "too_large",
            "internal_error",
            "invalid_path",
        ] {
            assert!(d.error_codes.iter().any(|c| c == code), "{name}: {code}");
        }
        assert!(d.output_schema.is_some(), "{name}");
    }
    // Python: the description is the docstring without its Args section,
    // which describes the parameters; defaults and bounds come from the
    // signature.
    let csv = &h.catalog().get("csv_summary").unwrap().descriptor;
    assert!(csv.description.starts_with("Summarizes one CSV file"));
    assert!(!csv.description.contains("Args:"));
    let p = &csv.input_schema["properties"];
    assert_eq!(
        p["path"]["description"],
        "CSV file, relative to the workspace root."
    );
    assert_eq!(
        p["max_columns"],
        json!({"type": "integer", "minimum": 1, "maximum": 100, "default": 50,
               "description": "Most columns to report; the rest are counted in columns_omitted."})
    );
    assert_eq!(p["delimiter"]["enum"], json!([",", ";", "\t", "|"]));
    assert_eq!(csv.title.as_deref(), Some("Summarize a CSV file"));
    // JavaScript: the schema is the object literal, closed by the kit.
    let md = &h.catalog().get("markdown_outline").unwrap().descriptor;
    assert_eq!(
        md.input_schema["properties"]["max_level"],
        json!({"type": "integer", "minimum": 1, "maximum": 6, "default": 6,
               "description": "Deepest heading level to list (1 = only top-level headings)."})
    );
    // Loading compiled each component once (nothing was cached yet).
    let events = LOAD_EVENTS.lock().unwrap();
    for wasm in [PY_WASM, JS_WASM] {
        let mine: Vec<_> = events
            .iter()
            .filter(|(p, _)| p.ends_with(wasm))
            .map(|(_, e)| *e)
            .collect();
        assert!(
            matches!(
                mine[..],
                [LoadEvent::Compiling { .. }, LoadEvent::Compiled { .. }]
            ),
            "{wasm}: {mine:?}"
        );
    }
}

#[test]
fn both_kits_export_task_words_that_find_tools_indexes() {
    let h = host();
    let csv = &h.catalog().get("csv_summary").unwrap().descriptor;
    assert!(csv.keywords.iter().any(|k| k == "spreadsheet"), "{csv:?}");
    assert_eq!(csv.examples.len(), 3);
    let md = &h.catalog().get("markdown_outline").unwrap().descriptor;
    assert!(
        md.keywords.iter().any(|k| k == "table of contents"),
        "{md:?}"
    );
    assert_eq!(md.examples.len(), 3);
    // The kits' test tools declare none: they have no words.
    for name in ["kit_py_echo", "kit_js_echo"] {
        let d = &h.catalog().get(name).unwrap().descriptor;
        assert!(d.keywords.is_empty() && d.examples.is_empty(), "{name}");
    }
    let index = toolhost::discovery::index_of(h.catalog().tools().map(|t| &t.descriptor));
    let top = |q: &str| index.search(q, 1)[0].name.clone();
    assert_eq!(top("spreadsheet statistics"), "csv_summary");
    assert_eq!(top("table of contents"), "markdown_outline");
}

// ----- real work -------------------------------------------------------------------

#[test]
fn csv_summary_summarizes_a_real_file() {
    let h = host();
    let ws = Ws::new();
    ws.write(
        "data/weather.csv",
        "city,temp_c,rain_mm,note\nOslo,3.5,120,cold\nRome,14,80,\n\nLima,19.25,,dry\n",
    );
    let grant = Grant {
        read: &["data"],
        write: &[],
    };
    let obs = call(
        h,
        &ws,
        "csv_summary",
        r#"{"path":"data/weather.csv"}"#,
        &grant,
    );
    let out = expect_ok(&obs).clone();
    // The kit's `text=` rendering is what the model reads (between the
    // untrusted-data markers: it quotes a file).
    let text = obs["text"].as_str().unwrap();
    assert!(
        text.contains("data/weather.csv: 3 rows, 4 columns\n  city: text, 3 filled\n  temp_c: numeric, 3 filled, min 3.5, max 19.25"),
        "{text}"
    );
    assert_eq!(out["path"], "data/weather.csv");
    assert_eq!(out["rows"], 3);
    assert_eq!(out["columns"], 4);
    assert_eq!(out["columns_omitted"], 0);
    let cols = out["column_stats"].as_array().unwrap();
    assert_eq!(
        cols[0],
        json!({"name": "city", "kind": "text", "non_empty": 3, "min": null, "max": null, "mean": null})
    );
    assert_eq!(cols[1]["kind"], "numeric");
    assert_eq!(cols[1]["min"], 3.5);
    assert_eq!(cols[1]["max"], 19.25);
    assert!((cols[1]["mean"].as_f64().unwrap() - (3.5 + 14.0 + 19.25) / 3.0).abs() < 1e-9);
    assert_eq!(
        (cols[2]["non_empty"].clone(), cols[2]["mean"].clone()),
        (json!(2), json!(100.0))
    );
    assert_eq!(cols[3]["kind"], "text");

    // Options: no header, another delimiter, fewer columns reported; a BOM.
    ws.write("data/semi.csv", "\u{feff}1;2;x\n3;4;y\n");
    let out = expect_ok(&call(
        h,
        &ws,
        "csv_summary",
        r#"{"path":"data/semi.csv","delimiter":";","has_header":false,"max_columns":2}"#,
        &grant,
    ))
    .clone();
    assert_eq!(
        (out["rows"].clone(), out["columns"].clone()),
        (json!(2), json!(3))
    );
    assert_eq!(out["columns_omitted"], 1);
    assert_eq!(out["column_stats"][0]["name"], "column_1");
    assert_eq!(out["column_stats"][1]["max"], 4.0);

    // The tool's own errors, with the argument at fault.
    let obs = call(
        h,
        &ws,
        "csv_summary",
        r#"{"path":"data/missing.csv"}"#,
        &grant,
    );
    let e = expect_error(&obs, "error", "not_found");
    assert_eq!(
        (e["field"].as_str(), e["correctable"].as_bool()),
        (Some("/path"), Some(true))
    );
    assert!(
        e["message"].as_str().unwrap().contains("data/missing.csv"),
        "{e}"
    );
    ws.write("data/blob.csv", [0xff_u8, 0xfe, 0x00, 0x41]);
    let obs = call(h, &ws, "csv_summary", r#"{"path":"data/blob.csv"}"#, &grant);
    assert_eq!(expect_error(&obs, "error", "not_text")["field"], "/path");
    // A directory is not a CSV file.
    let obs = call(h, &ws, "csv_summary", r#"{"path":"data"}"#, &grant);
    assert_eq!(obs["status"], "error", "{obs:#}");
}

#[test]
fn markdown_outline_lists_the_headings_of_a_real_file() {
    let h = host();
    let ws = Ws::new();
    ws.write(
        "docs/guide.md",
        "---\ntitle: Guide\n---\n# Guide\n\nIntro.\n\n## Install\n\n```sh\n# not a heading\n```\n\nUsage\n-----\n\n### Options ##\n\nTitle\n=====\n",
    );
    let grant = Grant {
        read: &["docs"],
        write: &[],
    };
    let obs = call(
        h,
        &ws,
        "markdown_outline",
        r#"{"path":"docs/guide.md"}"#,
        &grant,
    );
    let out = expect_ok(&obs).clone();
    // The kit's `text(out)` rendering is what the model reads.
    let text = obs["text"].as_str().unwrap();
    assert!(
        text.contains("docs/guide.md: 5 headings\n# Guide (line 4)\n  ## Install (line 8)\n"),
        "{text}"
    );
    assert_eq!(
        out,
        json!({
            "path": "docs/guide.md",
            "headings": [
                {"level": 1, "text": "Guide", "line": 4},
                {"level": 2, "text": "Install", "line": 8},
                {"level": 2, "text": "Usage", "line": 14},
                {"level": 3, "text": "Options", "line": 17},
                {"level": 1, "text": "Title", "line": 19}
            ],
            "total": 5,
            "omitted": 0
        })
    );
    let out = expect_ok(&call(
        h,
        &ws,
        "markdown_outline",
        r#"{"path":"docs/guide.md","max_level":2,"max_headings":3}"#,
        &grant,
    ))
    .clone();
    assert_eq!(
        (out["total"].clone(), out["omitted"].clone()),
        (json!(4), json!(1))
    );
    assert_eq!(out["headings"].as_array().unwrap().len(), 3);

    let obs = call(
        h,
        &ws,
        "markdown_outline",
        r#"{"path":"docs/nope.md"}"#,
        &grant,
    );
    let e = expect_error(&obs, "error", "not_found");
    assert_eq!(
        (e["field"].as_str(), e["correctable"].as_bool()),
        (Some("/path"), Some(true))
    );
    ws.write("docs/bin.md", [b'#', b' ', 0xc3, 0x28]);
    let obs = call(
        h,
        &ws,
        "markdown_outline",
        r#"{"path":"docs/bin.md"}"#,
        &grant,
    );
    assert_eq!(expect_error(&obs, "error", "not_text")["field"], "/path");
}

// ----- the host checks first -----------------------------------------------------

#[test]
fn invalid_arguments_never_reach_the_guest() {
    let h = host();
    let ws = Ws::new();
    ws.write("d/a.csv", "a\n1\n").write("d/a.md", "# A\n");
    let grant = Grant {
        read: &["d"],
        write: &[],
    };
    for (tool, args, field) in [
        (
            "csv_summary",
            r#"{"path":"d/a.csv","max_columns":0}"#,
            "/max_columns",
        ),
        (
            "csv_summary",
            r#"{"path":"d/a.csv","max_columns":101}"#,
            "/max_columns",
        ),
        (
            "csv_summary",
            r#"{"path":"d/a.csv","delimiter":"x"}"#,
            "/delimiter",
        ),
        (
            "csv_summary",
            r#"{"path":"d/a.csv","has_header":"yes"}"#,
            "/has_header",
        ),
        ("csv_summary", r#"{"path":"d/a.csv","extra":1}"#, "/extra"),
        ("csv_summary", r#"{}"#, "/path"),
        (
            "markdown_outline",
            r#"{"path":"d/a.md","max_level":7}"#,
            "/max_level",
        ),
        (
            "markdown_outline",
            r#"{"path":"d/a.md","max_headings":1.5}"#,
            "/max_headings",
        ),
        ("markdown_outline", r#"{"path":"d/a.md","x":null}"#, "/x"),
        ("markdown_outline", r#"{"path":""}"#, "/path"),
    ] {
        let obs = call(h, &ws, tool, args, &grant);
        let e = expect_error(&obs, "error", "invalid_arguments");
        assert!(
            e["field"].as_str().unwrap().starts_with(field),
            "{tool} {args}: {obs:#}"
        );
        assert_not_run(&obs);
    }
    // Duplicate keys and huge integers are refused by the strict parser.
    for tool in ["csv_summary", "markdown_outline"] {
        let obs = call(h, &ws, tool, r#"{"path":"d/a","path":"d/b"}"#, &grant);
        expect_error(&obs, "error", "invalid_json");
        assert_not_run(&obs);
    }
}

// ----- the same sandbox for every language --------------------------------------

#[test]
fn python_and_javascript_tools_get_the_same_sandbox() {
    let h = host();
    let ws = Ws::new();
    ws.write("data/a.csv", "x\n1\n")
        .write("data/a.md", "# A\n")
        .write("secret/key.txt", "TOPSECRET-VALUE");
    let grant = Grant {
        read: &["data"],
        write: &[],
    };
    // A path argument outside the grants is refused before the guest runs:
    // denied inside the workspace, an invalid argument outside it.
    for tool in ["csv_summary", "markdown_outline"] {
        for (path, status, code) in [
            ("secret/key.txt", "denied", "denied"),
            ("../etc/passwd", "denied", "denied"),
            ("/etc/passwd", "error", "invalid_arguments"),
        ] {
            let args = json!({ "path": path }).to_string();
            let obs = call(h, &ws, tool, &args, &grant);
            expect_error(&obs, status, code);
            assert_eq!(obs["error"]["field"], "/path", "{obs:#}");
            assert_not_run(&obs);
        }
    }
    // Inside the guest, nothing but the granted directory exists: not the
    // rest of the workspace, not the host's files.
    for tool in ["kit_py_open", "kit_js_open"] {
        for path in [
            "/workspace/secret/key.txt",
            "/etc/passwd",
            "/workspace/../secret/key.txt",
        ] {
            let args = json!({ "guest_path": path }).to_string();
            let obs = call(h, &ws, tool, &args, &grant);
            assert_eq!(obs["status"], "error", "{tool} {path}: {obs:#}");
            assert!(!obs.to_string().contains("TOPSECRET"), "{obs:#}");
        }
        // The granted file is readable, so the failures above are the sandbox.
        let obs = call(
            h,
            &ws,
            tool,
            r#"{"guest_path":"/workspace/data/a.csv"}"#,
            &grant,
        );
        assert_eq!(expect_ok(&obs)["bytes"], 4, "{tool}");
    }
    // A runaway loop stops: on fuel, and on the wall-clock deadline.
    for tool in ["kit_py_spin", "kit_js_spin"] {
        let obs = call_with(h, &ws, tool, "{}", &NOTHING, &with(Some(50_000_000), None));
        expect_error(&obs, "error", "fuel_exhausted");
        assert_eq!(obs["usage"]["fuel_consumed"], 50_000_000);
        let start = Instant::now();
        let obs = call_with(
            h,
            &ws,
            tool,
            "{}",
            &NOTHING,
            &with(Some(u64::MAX / 4), Some(300)),
        );
        expect_error(&obs, "error", "timeout");
        let took = start.elapsed();
        assert!(took < Duration::from_secs(5), "{tool}: {took:?}");
    }
}

// ----- the compile cache with big components -------------------------------------

fn load_events(sandbox: &Sandbox, bytes: &[u8]) -> (Vec<LoadEvent>, Duration) {
    let seen = Mutex::new(Vec::new());
    let start = Instant::now();
    let plugin = sandbox
        .load(bytes, &|e| seen.lock().unwrap().push(e))
        .expect("load");
    let took = start.elapsed();
    // What was loaded is the right component.
    let names: Vec<String> = plugin
        .describe()
        .expect("describe")
        .into_iter()
        .map(|d| d.unwrap().name)
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n == "csv_summary" || n == "markdown_outline"),
        "{names:?}"
    );
    (seen.into_inner().unwrap(), took)
}

#[test]
fn the_cache_serves_big_components_after_a_restart_and_recompiles_a_truncated_entry() {
    let _ = host(); // compiles both into cache_dir()
    let b = built();
    let py = std::fs::read(&b.python).unwrap();
    let js = std::fs::read(&b.js).unwrap();
    assert!(
        py.len() > 10_000_000 && js.len() > 10_000_000,
        "{} {}",
        py.len(),
        js.len()
    );

    // A new component is a new entry: one each.
    let entries: Vec<PathBuf> = std::fs::read_dir(cache_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let artifacts = entries
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .count();
    assert_eq!((artifacts, entries.len()), (2, 4), "{entries:?}");
    let dir = tempfile::tempdir().unwrap();
    for e in &entries {
        std::fs::copy(e, dir.path().join(e.file_name().unwrap())).unwrap();
    }
    let config = SandboxConfig {
        cache_dir: Some(dir.path().to_path_buf()),
        ..SandboxConfig::default()
    };

    // A restarted host (a new sandbox) reads both from the cache.
    let restarted = Sandbox::new(&config).unwrap();
    let (e, py_cached) = load_events(&restarted, &py);
    assert_eq!(e, [LoadEvent::CacheHit]);
    let (e, js_cached) = load_events(&restarted, &js);
    assert_eq!(e, [LoadEvent::CacheHit]);
    eprintln!(
        "languages: cached load (+describe): python {:.0} ms, javascript {:.0} ms",
        py_cached.as_secs_f64() * 1e3,
        js_cached.as_secs_f64() * 1e3
    );

    // Truncated artifacts are detected, discarded, recompiled and rewritten.
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "cwasm") {
            continue;
        }
        let data = std::fs::read(&p).unwrap();
        std::fs::write(&p, &data[..data.len() / 2]).unwrap();
    }
    let again = Sandbox::new(&config).unwrap();
    let (e, took) = load_events(&again, &py);
    assert!(
        matches!(
            e[..],
            [
                LoadEvent::CacheCorrupt,
                LoadEvent::Compiling { bytes },
                LoadEvent::Compiled { .. }
            ] if bytes == py.len()
        ),
        "{e:?}"
    );
    eprintln!(
        "languages: python recompiled in {:.1} s",
        took.as_secs_f64()
    );
    let (e, _) = load_events(&Sandbox::new(&config).unwrap(), &py);
    assert_eq!(e, [LoadEvent::CacheHit]);
}

#[test]
fn the_python_kit_unit_tests_pass() {
    ensure_toolchains();
    let out = Command::new(repo_root().join("target/py-guest/venv/bin/python"))
        .args(["-m", "unittest", "discover", "-s", "plugins/python/tests"])
        .current_dir(repo_root())
        .output()
        .expect("running the kit's unit tests");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ----- the guides ------------------------------------------------------------------

fn doc(name: &str) -> String {
    std::fs::read_to_string(repo_root().join("docs").join(name)).unwrap()
}

#[test]
fn the_guides_show_the_commands_the_tests_run() {
    let py = doc("python.md");
    for line in PY_INSTALL.iter().chain([&PY_BUILD]) {
        assert!(
            py.lines().any(|l| l.trim() == *line),
            "docs/python.md lacks `{line}`"
        );
    }
    let js = doc("js.md");
    for line in [JS_INSTALL, JS_BUILD] {
        assert!(
            js.lines().any(|l| l.trim() == line),
            "docs/js.md lacks `{line}`"
        );
    }
    // The toolchain script installs with the same commands.
    let script = std::fs::read_to_string(repo_root().join(".ci/guest-toolchains.sh")).unwrap();
    assert!(script.contains("-m venv target/py-guest/venv"), "{script}");
    assert!(script.contains("install -e plugins/python"), "{script}");
    assert!(script.contains("ci --prefix plugins/js"), "{script}");
}

/// The guides end with a `toolhost call` of the example on a demo file; run
/// the same command line with the test binary.
/// The CLI reads a copy of the tests' cache (it adds an entry for the
/// embedded reference tools).
fn toolhost_call(wasm: &str, tool: &str, args: &str, ws: &Path, grant: &str) -> Value {
    let _ = host(); // the components are built and cached
    let cache = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(cache_dir()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, cache.path().join(p.file_name().unwrap())).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["--plugin", &repo_root().join(wasm).display().to_string()])
        .args(["call", tool, args, "--workspace"])
        .arg(ws)
        .args(["--allow-read", grant, "--pretty"])
        .env("TOOLHOST_CACHE_DIR", cache.path())
        .output()
        .expect("running toolhost");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Served from the cache: no compile message for the component.
    assert!(
        !stderr.contains(&format!("compiling {}", repo_root().join(wasm).display())),
        "{stderr}"
    );
    let obs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid_observation(&obs);
    obs
}

#[test]
fn the_guides_toolhost_call_works() {
    let ws = Ws::new();
    // docs/python.md
    let py = doc("python.md");
    assert!(py.contains(r#"call csv_summary '{"path":"data/weather.csv"}' --workspace target/demo --allow-read data"#));
    ws.write(
        "data/weather.csv",
        "city,temp_c,rain_mm\nOslo,3.5,120\nRome,14,80\nLima,19.25,\n",
    );
    let obs = toolhost_call(
        PY_WASM,
        "csv_summary",
        r#"{"path":"data/weather.csv"}"#,
        ws.dir.path(),
        "data",
    );
    assert_eq!(obs["output"]["rows"], 3);
    assert_eq!(obs["output"]["column_stats"][1]["max"], 19.25);
    // docs/js.md
    let js = doc("js.md");
    assert!(js.contains(r#"call markdown_outline '{"path":"docs/guide.md"}' --workspace target/demo --allow-read docs"#));
    ws.write("docs/guide.md", "# Guide\n\n## Install\n\n## Use\n");
    let obs = toolhost_call(
        JS_WASM,
        "markdown_outline",
        r#"{"path":"docs/guide.md"}"#,
        ws.dir.path(),
        "docs",
    );
    assert_eq!(obs["output"]["total"], 3);
}
