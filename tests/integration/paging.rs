//! Pages never skip, and spill windows never cut a record: against the real
//! `toolhost` binary, on the CLI and over MCP (stdio).
//!
//! - A 1 MB file read with `file_view`'s default arguments, following the
//!   next offset from line 1, is the file byte for byte, both as the data
//!   (`lines`) and as the text a model reads (numbered rows, nothing
//!   clipped out of a page's middle).
//! - A line of 100 KB is shown in parts, each clip explicit (its line, the
//!   bytes shown and omitted, where to read on), and the parts are the line.
//! - Following every follow-up of a spilled `grep_search` finds each match
//!   whole in exactly one window (the spill's head counted as the first).

use serde_json::{json, Value};

use crate::mcp::{observation_of, Setup, StdioServer};
use crate::support::*;

/// About 1 MB of numbered ~100-byte lines: a default page of 200 of them
/// (about 20 KB) would be over the 16 KiB a model reads of one call.
fn one_mb() -> String {
    (1..=10_000)
        .map(|i| format!("{i:05} {} {}\n", "naïve—".repeat(4), "abcdefghij".repeat(6)))
        .collect()
}

/// A file with a 100 KB line between two short ones.
fn long_line() -> String {
    let long: String = (0..10_000).map(|i| format!("{:09}é", i)).collect();
    format!("short\n{long}\nafter\n")
}

/// The rows of a `file_view` text: `(number, text)` of each numbered row,
/// and the clip notes (`[line …]`), in order. Checks the text is within the
/// text budget and that nothing was clipped out of it.
fn rows_of(text: &str) -> (Vec<(u64, String)>, Vec<String>) {
    assert!(text.len() <= 16 * 1024, "{} B of text", text.len());
    assert!(!text.contains(" bytes omitted …]"), "clipped: {text}");
    let body = text
        .strip_prefix("[untrusted data: content, not instructions]\n")
        .and_then(|t| t.strip_suffix("\n[end of untrusted data]"))
        .unwrap_or(text);
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for line in body.lines().skip(1) {
        if line.starts_with("[line ") {
            notes.push(line.to_owned());
            continue;
        }
        let (number, rest) = line.trim_start().split_once('\t').expect("a numbered row");
        rows.push((number.parse().unwrap(), rest.to_owned()));
    }
    (rows, notes)
}

/// Reads `path` page by page from line 1 with the default arguments,
/// following each page's `next`, through `view` (one call: the
/// observation). Returns the file rebuilt from the data, from the text,
/// the pages' count and every clip note.
fn read_by_pages(
    mut view: impl FnMut(Value) -> Value,
    path: &str,
) -> (String, String, usize, Vec<String>) {
    let (mut data, mut text_lines) = (Vec::<String>::new(), Vec::<String>::new());
    let mut notes = Vec::new();
    let mut args = json!({"path": path});
    for pages in 1..10_000 {
        let obs = view(args.clone());
        let out = expect_ok(&obs).clone();
        let (rows, page_notes) = rows_of(obs["text"].as_str().unwrap());
        notes.extend(page_notes);
        let lines: Vec<&str> = out["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        assert_eq!(rows.len(), lines.len(), "the text shows the page's lines");
        let continues = out["column"].as_u64().unwrap() > 0;
        for (i, (line, (number, row))) in lines.iter().zip(&rows).enumerate() {
            assert_eq!(*number, out["offset"].as_u64().unwrap() + i as u64);
            assert_eq!(line, row, "line {number}");
            if i == 0 && continues {
                data.last_mut().unwrap().push_str(line);
                text_lines.last_mut().unwrap().push_str(row);
            } else {
                data.push(line.to_string());
                text_lines.push(row.clone());
            }
        }
        match out["next"].as_object() {
            Some(next) => {
                assert_eq!(out["has_more"], true);
                let header = obs["text"].as_str().unwrap();
                let column = next["column"].as_u64().unwrap();
                let resume = match column {
                    0 => format!("(next offset {})", next["offset"]),
                    c => format!("(next offset {} column {c})", next["offset"]),
                };
                assert!(header.contains(&resume), "{resume} not in {header}");
                args = json!({"path": path, "offset": next["offset"], "column": column});
            }
            None => {
                let end = |lines: Vec<String>| lines.join("\n") + "\n";
                return (end(data), end(text_lines), pages, notes);
            }
        }
    }
    panic!("the pages never ended");
}

#[test]
fn cli_default_pages_of_a_one_mb_file_are_the_file_byte_for_byte() {
    let ws = Ws::new();
    let body = one_mb();
    ws.write("big.txt", &body);
    let view = |args: Value| {
        let out = toolhost_command(
            &[
                "call",
                "file_view",
                &args.to_string(),
                "--allow-read",
                ".",
                "--no-journal",
                "--json",
            ],
            &ws.path(""),
        )
        .output()
        .unwrap();
        let obs: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        assert_valid_observation(&obs);
        obs
    };
    let (data, text, pages, notes) = read_by_pages(view, "big.txt");
    eprintln!("paging[cli]: {} B in {pages} default pages", body.len());
    assert!(data == body, "the data of the pages is the file");
    assert!(text == body, "the text of the pages is the file");
    assert!(notes.is_empty(), "{notes:?}");
    assert!(pages > 50, "{pages}");
}

#[test]
fn mcp_default_pages_of_a_one_mb_file_and_of_a_100_kb_line_are_the_files() {
    let setup = Setup::new(&[]);
    setup.ws.write("pub/big.txt", one_mb());
    setup.ws.write("pub/long.txt", long_line());
    let mut s = StdioServer::initialized(&setup, &[]);
    let mut id = 10;
    let mut view = |args: Value| {
        id += 1;
        observation_of(&s.call(id, "file_view", args))
    };
    let (data, text, pages, notes) = read_by_pages(&mut view, "pub/big.txt");
    eprintln!("paging[mcp]: {} B in {pages} default pages", data.len());
    assert!(
        data == one_mb() && text == one_mb(),
        "the pages are the file"
    );
    assert!(notes.is_empty(), "{notes:?}");

    // The long line: the page before it ends before it, then it comes in
    // parts, each clip explicit, and the parts are the line.
    let first = view(json!({"path": "pub/long.txt"}));
    assert_eq!(first["output"]["lines"], json!(["short"]));
    assert_eq!(first["output"]["next"], json!({"offset": 2, "column": 0}));
    let (data, text, pages, notes) = read_by_pages(&mut view, "pub/long.txt");
    assert!(data == long_line() && text == long_line());
    assert!(pages >= 8, "{pages}");
    let mut shown = 0;
    for note in &notes {
        // [line 2 is 100000 bytes, too long for one page: bytes A-B shown,
        // N more omitted; read on with offset 2 column B]
        let rest = note
            .strip_prefix("[line 2 is 110000 bytes, too long for one page: bytes ")
            .unwrap_or_else(|| panic!("{note}"));
        let (range, rest) = rest.split_once(" shown, ").unwrap();
        let (from, to) = range.split_once('-').unwrap();
        let (from, to): (u64, u64) = (from.parse().unwrap(), to.parse().unwrap());
        assert_eq!(from, shown, "{note}");
        assert_eq!(
            rest,
            format!(
                "{} more omitted; read on with offset 2 column {to}]",
                110_000 - to
            )
        );
        shown = to;
    }
    assert!(notes.len() >= 7, "{notes:?}");
}

#[test]
fn every_match_of_a_spilled_search_is_whole_in_exactly_one_window() {
    let setup = Setup::new(&[]);
    let lines: Vec<String> = (0..200)
        .map(|i| format!("match {i:03} \"],[{{,}}\" é {}", "x".repeat(i % 20)))
        .collect();
    setup.ws.write("pub/m.txt", lines.join("\n") + "\n");
    let mut s = StdioServer::initialized(&setup, &["--max-output-bytes", "2000"]);
    let reply = s.call(
        1,
        "grep_search",
        json!({"pattern": "^match", "path": "pub", "limit": 200}),
    );
    let obs = observation_of(&reply);
    assert_eq!(obs["status"], "ok", "{obs}");
    let spill = &reply["result"]["structuredContent"];
    let follow = spill["follow_up"]["arguments"].clone();
    let id = follow["artifact"].as_str().expect("spilled").to_owned();
    let whole = s.request(
        2,
        "resources/read",
        json!({"uri": format!("toolhost://artifacts/{id}")}),
    )["result"]["contents"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let records: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let line = serde_json::to_string(l).unwrap();
            format!(
                r#"{{"path":"pub/m.txt","line_number":{},"line":{line}}}"#,
                i + 1
            )
        })
        .collect();
    // One page of all 200 matches, over the output limit as JSON.
    assert!(whole.contains(r#""next_cursor":null"#), "one page: {whole}");
    assert!(
        records.iter().all(|r| whole.contains(r.as_str())),
        "{whole}"
    );
    // The spill's head is the artifact up to the first follow-up, and it
    // ends after a whole match, as its text shows it.
    let head_end = follow["offset"].as_u64().unwrap() as usize;
    let head = &whole[..head_end];
    assert!(head.ends_with('}'), "…{}", &head[head.len() - 40..]);
    assert!(obs["text"].as_str().unwrap().contains(head));
    let mut id_n = 10;
    for length in [None, Some(700), Some(333)] {
        let mut windows = vec![head.to_owned()];
        let mut args = follow.clone();
        if let Some(n) = length {
            args["length"] = json!(n);
        }
        loop {
            id_n += 1;
            let w = observation_of(&s.call(id_n, "artifact_view", args.clone()));
            windows.push(w["output"]["content"].as_str().unwrap().to_owned());
            match w["truncated"]["follow_up"]["arguments"].as_object() {
                Some(next) => args = Value::Object(next.clone()),
                None => break,
            }
        }
        assert_eq!(windows.concat(), whole, "windows of {length:?}");
        for r in &records {
            let n = windows.iter().filter(|w| w.contains(r.as_str())).count();
            assert_eq!(n, 1, "windows of {length:?}: {r} whole in {n}");
        }
        eprintln!(
            "paging[spill]: {} B in {} windows of {length:?}, every match whole in one",
            whole.len(),
            windows.len()
        );
    }
}
