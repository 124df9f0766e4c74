//! Scripts against direct calls: `cargo bench --bench script`.
//!
//! Eight multi-step tasks over a generated repository of 400 files, each
//! done two ways:
//!
//! - direct: the sequence of tool calls an agent makes, one round trip
//!   each: the model writes each call (tool name and arguments) and reads
//!   each observation's text;
//! - script: the model writes one `run_script` call and reads its result.
//!
//! Both ways must give the same answer. Tokens are counted with the BPE the
//! catalog cost uses (o200k_base): what the model writes plus what it
//! reads, per task and in total. Wall time is the host's time for the
//! calls (the model's own time per round trip is not in it, which favours
//! the direct way); the engine's fuel is what the interpreter itself ran
//! (the inner calls' fuel is theirs). The per-call overhead of an inner
//! call is reported against the same call made directly, awaited one by
//! one and started together (`Promise.all`, run as a batch).
//!
//! `SCRIPT_PROFILE=N` runs each read-only task's script N times and nothing
//! else, for a profiler.

#[allow(dead_code)]
#[path = "../../tests/integration/support.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;
use toolhost::observation::Status;
use toolhost::{Allow, Call, CallOptions, Host, Session, Source};

/// Files in the generated repository.
const FILES: usize = 400;

/// The generated repository: `src/m<k>/f<i>.rs`, each with one function,
/// some `TODO(owner)` lines, some `use crate::util;`, some calls of
/// `helper(..)` and some uses of `old_name`.
fn fixture() -> Ws {
    let ws = Ws::new();
    let owners = ["ana", "bo", "cy", "dee", "eli"];
    for i in 0..FILES {
        let mut text = String::new();
        if i % 7 == 0 {
            text.push_str("use crate::util;\n");
        }
        text.push_str(&format!(
            "// module file {i}\n\npub fn f_{i}(x: u32) -> u32 {{\n"
        ));
        for t in 0..(i * 7 % 5) {
            let owner = owners[(i + t) % owners.len()];
            text.push_str(&format!("    // TODO({owner}): step {t} of f_{i}\n"));
        }
        if i % 4 == 0 {
            text.push_str(&format!("    let y = helper(x + {i});\n"));
        } else {
            text.push_str("    let y = x;\n");
        }
        if i % 13 == 0 {
            text.push_str("    let old_name = y * 2;\n    old_name + 1\n");
        } else {
            text.push_str("    y + 1\n");
        }
        if i % 11 == 0 {
            text.push_str("    // unsafe is not used here\n");
        }
        text.push_str("}\n");
        for extra in 0..(i % 9) {
            text.push_str(&format!("// padding line {extra}\n"));
        }
        ws.write(&format!("src/m{}/f{i}.rs", i % 10), text);
    }
    ws
}

/// Counts tokens with o200k_base.
struct Tokens(tiktoken_rs::CoreBPE);

impl Tokens {
    fn count(&self, text: &str) -> usize {
        self.0.encode_ordinary(text).len()
    }
}

/// An agent calling tools one at a time: what it wrote, what it read, and
/// the host's time.
struct Agent<'a> {
    host: &'a Host,
    session: &'a Session,
    tokens: &'a Tokens,
    written: usize,
    read: usize,
    calls: usize,
    wall: Duration,
}

impl Agent<'_> {
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let args = args.to_string();
        let opts = keyed(&CallOptions::default());
        let start = Instant::now();
        let obs = self.host.run(self.session, Call::new(tool, &args, &opts));
        self.wall += start.elapsed();
        self.calls += 1;
        self.written += self.tokens.count(tool) + self.tokens.count(&args);
        self.read += self.tokens.count(&obs.text);
        assert_eq!(obs.status, Status::Ok, "{tool} {args}: {}", obs.text);
        obs.output.unwrap_or(Value::Null)
    }

    /// Every match of `pattern` under `path` (all pages).
    fn grep_all(&mut self, path: &str, pattern: &str, glob: Option<&str>) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut args = json!({"path": path, "pattern": pattern, "limit": 200});
            if let Some(g) = glob {
                args["glob"] = json!(g);
            }
            if let Some(c) = &cursor {
                args["cursor"] = json!(c);
            }
            let page = self.call("grep_search", args);
            out.extend(page["matches"].as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return out,
            }
        }
    }

    /// Every line of `path` (all pages).
    fn view_all(&mut self, path: &str) -> Vec<String> {
        let mut lines = Vec::new();
        let mut offset = 1;
        loop {
            let page = self.call(
                "file_view",
                json!({"path": path, "offset": offset, "limit": 500}),
            );
            for l in page["lines"].as_array().unwrap() {
                lines.push(l.as_str().unwrap().to_string());
            }
            if page["has_more"] != true {
                return lines;
            }
            offset = page["next"]["offset"].as_u64().unwrap();
        }
    }
}

/// The script's helpers, the same in every task: the model writes them
/// once per script.
const GREP_ALL: &str = r#"
async function grepAll(path, pattern, glob) {
  const out = []; let cursor;
  do {
    const args = { path, pattern, limit: 200 };
    if (glob) args.glob = glob;
    if (cursor) args.cursor = cursor;
    const page = await tools.grep_search(args);
    out.push(...page.matches); cursor = page.next_cursor;
  } while (cursor);
  return out;
}
"#;

struct Task {
    name: &'static str,
    direct: fn(&mut Agent<'_>) -> Value,
    script: &'static str,
    writes: bool,
}

fn paths_of(matches: &[Value]) -> Vec<String> {
    let set: BTreeSet<String> = matches
        .iter()
        .map(|m| m["path"].as_str().unwrap().to_string())
        .collect();
    set.into_iter().collect()
}

fn tasks() -> Vec<Task> {
    vec![
        Task {
            name: "TODO lines per file, top 10",
            direct: |a| {
                let mut per: BTreeMap<String, u64> = BTreeMap::new();
                for m in a.grep_all("src", "TODO", None) {
                    *per.entry(m["path"].as_str().unwrap().into()).or_default() += 1;
                }
                let mut v: Vec<(String, u64)> = per.into_iter().collect();
                v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
                json!(v
                    .into_iter()
                    .take(10)
                    .map(|(p, n)| json!([p, n]))
                    .collect::<Vec<_>>())
            },
            script: r#"
const per = {};
for (const m of await grepAll("src", "TODO")) per[m.path] = (per[m.path] || 0) + 1;
return Object.entries(per).sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1)).slice(0, 10);
"#,
            writes: false,
        },
        Task {
            name: "importers of util, first 5 lines each",
            direct: |a| {
                let files = paths_of(&a.grep_all("src", "^use crate::util;", None));
                let mut out = serde_json::Map::new();
                for f in files {
                    let page = a.call("file_view", json!({"path": f, "limit": 5}));
                    out.insert(f, page["lines"].clone());
                }
                Value::Object(out)
            },
            script: r#"
const files = [...new Set((await grepAll("src", "^use crate::util;")).map(m => m.path))].sort();
const pages = await Promise.all(files.map(path => tools.file_view({ path, limit: 5 })));
return Object.fromEntries(files.map((f, i) => [f, pages[i].lines]));
"#,
            writes: false,
        },
        Task {
            name: "calls of helper, file:line and enclosing fn",
            direct: |a| {
                let matches = a.grep_all("src", r"helper\(", None);
                let mut out = Vec::new();
                for f in paths_of(&matches) {
                    let lines = a.view_all(&f);
                    for m in matches.iter().filter(|m| m["path"] == f.as_str()) {
                        let n = m["line_number"].as_u64().unwrap() as usize;
                        let func = lines[..n]
                            .iter()
                            .rev()
                            .find_map(|l| {
                                let at = l.find("fn ")?;
                                let rest = &l[at + 3..];
                                Some(rest[..rest.find('(')?].to_string())
                            })
                            .unwrap_or_default();
                        out.push(json!(format!("{f}:{n} {func}")));
                    }
                }
                Value::Array(out)
            },
            script: r#"
const matches = await grepAll("src", "helper\\(");
const files = [...new Set(matches.map(m => m.path))].sort();
const out = [];
for (const f of files) {
  const lines = []; let offset = 1, page;
  do { page = await tools.file_view({ path: f, offset, limit: 500 });
       lines.push(...page.lines); offset = page.next && page.next.offset; } while (page.has_more);
  for (const m of matches.filter(m => m.path === f)) {
    let fn = "";
    for (let i = m.line_number - 1; i >= 0; i--) {
      const r = /fn (\w+)\(/.exec(lines[i]); if (r) { fn = r[1]; break; }
    }
    out.push(`${f}:${m.line_number} ${fn}`);
  }
}
return out;
"#,
            writes: false,
        },
        Task {
            name: "total lines of the files f1*.rs",
            direct: |a| {
                let files = paths_of(&a.grep_all("src", "^pub fn ", Some("**/f1*.rs")));
                let mut sum = 0;
                for f in files {
                    let page = a.call("file_view", json!({"path": f, "limit": 1}));
                    sum += page["total_lines"].as_u64().unwrap();
                }
                json!(sum)
            },
            script: r#"
const files = [...new Set((await grepAll("src", "^pub fn ", "**/f1*.rs")).map(m => m.path))];
const pages = await Promise.all(files.map(path => tools.file_view({ path, limit: 1 })));
return pages.reduce((s, p) => s + p.total_lines, 0);
"#,
            writes: false,
        },
        Task {
            name: "files that mention unsafe",
            direct: |a| json!(paths_of(&a.grep_all("src", "unsafe", None)).len()),
            script: r#"return new Set((await grepAll("src", "unsafe")).map(m => m.path)).size;"#,
            writes: false,
        },
        Task {
            name: "longest file of src/m3",
            direct: |a| {
                let files = paths_of(&a.grep_all("src/m3", "^pub fn ", None));
                let mut best = (0, String::new());
                for f in files {
                    let n = a.call("file_view", json!({"path": f, "limit": 1}))["total_lines"]
                        .as_u64()
                        .unwrap();
                    if n > best.0 || (n == best.0 && f < best.1) {
                        best = (n, f);
                    }
                }
                json!([best.1, best.0])
            },
            script: r#"
const files = [...new Set((await grepAll("src/m3", "^pub fn ")).map(m => m.path))].sort();
const pages = await Promise.all(files.map(path => tools.file_view({ path, limit: 1 })));
let best = ["", 0];
files.forEach((f, i) => { if (pages[i].total_lines > best[1]) best = [f, pages[i].total_lines]; });
return best;
"#,
            writes: false,
        },
        Task {
            name: "distinct TODO owners",
            direct: |a| {
                let owners: BTreeSet<String> = a
                    .grep_all("src", r"TODO\(", None)
                    .iter()
                    .filter_map(|m| {
                        let l = m["line"].as_str()?;
                        let at = l.find("TODO(")? + 5;
                        Some(l[at..at + l[at..].find(')')?].to_string())
                    })
                    .collect();
                json!(owners)
            },
            script: r#"
const owners = new Set((await grepAll("src", "TODO\\(")).map(m => /TODO\((\w+)\)/.exec(m.line)[1]));
return [...owners].sort();
"#,
            writes: false,
        },
        Task {
            name: "rename old_name to new_name everywhere (writes)",
            direct: |a| {
                let files = paths_of(&a.grep_all("src", "old_name", None));
                let mut total = 0;
                for f in &files {
                    let out = a.call(
                        "file_edit",
                        json!({"path": f, "old_str": "old_name", "new_str": "new_name", "allow_multiple": true}),
                    );
                    total += out["replacements"].as_u64().unwrap();
                }
                json!({"files": files.len(), "replacements": total})
            },
            script: r#"
const files = [...new Set((await grepAll("src", "old_name")).map(m => m.path))];
let replacements = 0;
for (const path of files)
  replacements += (await tools.file_edit({ path, old_str: "old_name", new_str: "new_name", allow_multiple: true })).replacements;
return { files: files.length, replacements };
"#,
            writes: true,
        },
    ]
}

fn main() {
    let tokens = Tokens(tiktoken_rs::o200k_base().expect("o200k_base"));
    let host = host_with(&[Source::reference(), Source::script()]);
    let allow = Allow {
        write: &["."],
        script: true,
        ..Allow::default()
    };
    let (direct_ws, script_ws) = (fixture(), fixture());
    let direct_session = session_allowing(&direct_ws, &allow);
    let script_session = session_allowing(&script_ws, &allow);
    // For a profiler: SCRIPT_PROFILE=N runs each read-only task's script N
    // times and nothing else.
    if let Some(n) = std::env::var("SCRIPT_PROFILE")
        .ok()
        .and_then(|n| n.parse::<u32>().ok())
    {
        for task in tasks().iter().filter(|t| !t.writes) {
            let args = json!({ "source": format!("{GREP_ALL}{}", task.script) }).to_string();
            let start = Instant::now();
            for _ in 0..n {
                let obs = host.run(
                    &script_session,
                    Call::new("run_script", &args, &CallOptions::default()),
                );
                assert_eq!(obs.status, Status::Ok, "{}: {}", task.name, obs.text);
            }
            println!(
                "{}: {:.1} ms",
                task.name,
                start.elapsed().as_secs_f64() * 1e3 / f64::from(n)
            );
        }
        return;
    }

    println!(
        "| task | direct calls | direct tokens | script tokens | saved | direct ms | script ms | engine fuel |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let (mut direct_total, mut script_total) = (0usize, 0usize);
    let (mut direct_wall, mut script_wall) = (Duration::ZERO, Duration::ZERO);
    let mut engine_fuel = 0u64;
    for task in tasks() {
        let mut agent = Agent {
            host: &host,
            session: &direct_session,
            tokens: &tokens,
            written: 0,
            read: 0,
            calls: 0,
            wall: Duration::ZERO,
        };
        let direct = (task.direct)(&mut agent);

        let source = format!("{GREP_ALL}{}", task.script);
        let args = json!({ "source": source }).to_string();
        let opts = if task.writes {
            keyed(&CallOptions::default())
        } else {
            CallOptions::default()
        };
        let start = Instant::now();
        let obs = host.run(&script_session, Call::new("run_script", &args, &opts));
        let wall = start.elapsed();
        assert_eq!(obs.status, Status::Ok, "{}: {}", task.name, obs.text);
        let scripted = obs.output.as_ref().unwrap()["value"].clone();
        assert_eq!(direct, scripted, "{}: the two ways disagree", task.name);

        let d = agent.written + agent.read;
        let s = tokens.count("run_script") + tokens.count(&args) + tokens.count(&obs.text);
        direct_total += d;
        script_total += s;
        direct_wall += agent.wall;
        script_wall += wall;
        engine_fuel += obs.usage.fuel_consumed;
        println!(
            "| {} | {} | {d} | {s} | {:.0}% | {:.1} | {:.1} | {:.1} M |",
            task.name,
            agent.calls,
            100.0 * (1.0 - s as f64 / d as f64),
            agent.wall.as_secs_f64() * 1e3,
            wall.as_secs_f64() * 1e3,
            obs.usage.fuel_consumed as f64 / 1e6
        );
    }
    println!(
        "| **total** | | {direct_total} | {script_total} | {:.0}% | {:.1} | {:.1} | {:.1} M |",
        100.0 * (1.0 - script_total as f64 / direct_total as f64),
        direct_wall.as_secs_f64() * 1e3,
        script_wall.as_secs_f64() * 1e3,
        engine_fuel as f64 / 1e6
    );

    // The overhead of an inner call: a script of N file_view calls against
    // N direct calls of the same.
    let n = 200;
    let view = json!({"path": "src/m1/f1.rs", "limit": 5}).to_string();
    let opts = CallOptions::default();
    let start = Instant::now();
    for _ in 0..n {
        let obs = host.run(&script_session, Call::new("file_view", &view, &opts));
        assert_eq!(obs.status, Status::Ok);
    }
    let direct_each = start.elapsed() / n;
    let loop_args = json!({"source": format!(
        "for (let i = 0; i < {n}; i++) await tools.file_view({{path: \"src/m1/f1.rs\", limit: 5}}); return {n};"
    )})
    .to_string();
    let empty_args = json!({"source": "return 0;"}).to_string();
    let start = Instant::now();
    let obs = host.run(&script_session, Call::new("run_script", &empty_args, &opts));
    let empty = start.elapsed();
    assert_eq!(obs.status, Status::Ok);
    let start = Instant::now();
    let obs = host.run(&script_session, Call::new("run_script", &loop_args, &opts));
    let looped = start.elapsed();
    assert_eq!(obs.status, Status::Ok, "{}", obs.text);
    let inner_each = looped.saturating_sub(empty) / n;
    // The same calls started together: one request, run as a batch.
    let all_args = json!({"source": format!(
        "const a = []; for (let i = 0; i < {n}; i++) a.push(tools.file_view({{path: \"src/m1/f1.rs\", limit: 5}})); \
         return (await Promise.all(a)).length;"
    )})
    .to_string();
    let start = Instant::now();
    let obs = host.run(&script_session, Call::new("run_script", &all_args, &opts));
    let together = start.elapsed();
    assert_eq!(obs.status, Status::Ok, "{}", obs.text);
    let together_each = together.saturating_sub(empty) / n;
    println!(
        "\nan empty script: {:.2} ms; a direct file_view: {:.0} µs; the same as an inner call: \
         {:.0} µs awaited one by one, {:.0} µs each of {n} started together (Promise.all, {} cores)",
        empty.as_secs_f64() * 1e3,
        direct_each.as_secs_f64() * 1e6,
        inner_each.as_secs_f64() * 1e6,
        together_each.as_secs_f64() * 1e6,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
}
