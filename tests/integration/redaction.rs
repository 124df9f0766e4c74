//! Redaction of what the reference tools read: private keys read whole, in
//! a window that starts in a key's body, through a search and through a
//! spill; a search's counts cannot be used to guess a redacted value; the
//! `secrets` right sees files as they are.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use toolhost::{Allow, CallOptions};

use crate::support::*;

fn ssh_keygen(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("ssh-keygen")
        .args(args)
        .current_dir(dir)
        .status()
        .expect("ssh-keygen runs (apt-get install -y openssh-client)");
    assert!(status.success());
}

/// A PEM RSA key and an OpenSSH key, made at run time (no key in the
/// repository), in a file between ordinary lines.
struct Fixture {
    ws: Ws,
    /// The file's lines.
    lines: Vec<String>,
    /// Every body line of both keys.
    body: Vec<String>,
    /// 1-based line numbers of the two BEGIN lines.
    begins: [usize; 2],
}

fn fixture() -> Fixture {
    let keys = tempfile::tempdir().unwrap();
    ssh_keygen(
        keys.path(),
        &[
            "-q", "-t", "rsa", "-b", "2048", "-m", "PEM", "-N", "", "-f", "pem",
        ],
    );
    ssh_keygen(
        keys.path(),
        &["-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", "ossh"],
    );
    let pem = std::fs::read_to_string(keys.path().join("pem")).unwrap();
    let ossh = std::fs::read_to_string(keys.path().join("ossh")).unwrap();
    assert!(pem.starts_with(&format!("-----{} RSA PRIVATE KEY", "BEGIN")));
    assert!(ossh.starts_with(&format!("-----{} OPENSSH PRIVATE KEY", "BEGIN")));
    let text = format!("# deploy\nhost = example.org\n{pem}port = 22\n{ossh}done = true\n");
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let body: Vec<String> = lines
        .iter()
        .filter(|l| !l.starts_with("-----") && !l.contains(' ') && l.len() >= 4)
        .cloned()
        .collect();
    assert!(body.len() > 40, "{} body lines", body.len());
    let begins: Vec<usize> = (1..)
        .zip(&lines)
        .filter(|(_, l)| l.contains("BEGIN"))
        .map(|(n, _)| n)
        .collect();
    let ws = Ws::new();
    ws.write("conf/deploy.txt", &text);
    Fixture {
        ws,
        lines,
        body,
        begins: [begins[0], begins[1]],
    }
}

/// Panics if any body line shows anywhere in `what`: whole (any length) as
/// a line of a text or an item of an array, or inside anything when it is
/// long enough not to occur by chance.
fn assert_no_body(body: &[String], what: &str, context: &str) {
    let what = what.replace("\\n", "\n").replace("\\t", "\t");
    let rows: Vec<&str> = what
        .split(['\n', '"', '\t'])
        .map(|r| r.trim_end_matches("\\n"))
        .collect();
    for line in body {
        assert!(
            !(line.len() >= 12 && what.contains(line.as_str())),
            "{context}: body line {line} shows in {what}"
        );
        assert!(
            !rows.contains(&line.as_str()),
            "{context}: body line {line} shows as a line in {what}"
        );
    }
}

fn view(f: &Fixture, host: &toolhost::Host, offset: usize, limit: usize) -> Value {
    let args = json!({"path": "conf/deploy.txt", "offset": offset, "limit": limit});
    let obs = call(host, &f.ws, "file_view", &args.to_string(), &READ_ALL);
    expect_ok(&obs);
    obs
}

#[test]
fn private_keys_read_with_file_view_show_no_body_line() {
    let f = fixture();
    let host = reference_host();
    // The whole file.
    let obs = view(&f, host, 1, 500);
    assert_no_body(&f.body, &obs.to_string(), "whole file");
    let lines = obs["output"]["lines"].as_array().unwrap();
    assert_eq!(lines.len(), f.lines.len(), "one item per line");
    assert_eq!(lines[0], "# deploy");
    assert_eq!(lines[f.lines.len() - 1], "done = true");
    assert!(obs["text"].as_str().unwrap().contains("port = 22"));
    assert!(obs["text"]
        .as_str()
        .unwrap()
        .contains("[REDACTED:private_key]"));
    // Windows starting below each BEGIN line: one in the body only, one
    // that runs through the END line into the next key.
    for begin in f.begins {
        for (offset, limit) in [(begin + 3, 5), (begin + 5, 60), (begin + 1, 1)] {
            let obs = view(&f, host, offset, limit);
            assert_no_body(&f.body, &obs.to_string(), &format!("{offset}+{limit}"));
            assert!(
                obs["redactions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["rule"] == "private_key"),
                "{obs:#}"
            );
        }
    }
    // A window of the plain lines around the keys is left as it is.
    let obs = view(&f, host, 1, 2);
    assert_eq!(
        obs["output"]["lines"],
        json!(["# deploy", "host = example.org"])
    );
    assert_eq!(obs["redactions"], json!([]));
    // The secrets right reads the key as it is.
    let session = session_allowing(
        &f.ws,
        &Allow {
            read: &["."],
            secrets: true,
            ..Allow::default()
        },
    );
    let begin = f.begins[0];
    let args = json!({"path": "conf/deploy.txt", "offset": begin + 3, "limit": 5}).to_string();
    let obs = run_in(host, &session, "file_view", &args, &CallOptions::default());
    assert_eq!(expect_ok(&obs)["lines"][0], f.lines[begin + 2], "{obs:#}");
    assert_eq!(obs["redactions"], json!([]));
}

#[test]
fn grep_search_finds_no_key_body_and_its_counts_reveal_no_redacted_value() {
    let f = fixture();
    let host = reference_host();
    let grep = |pattern: &str| -> Value {
        let args = json!({"pattern": pattern, "path": ".", "limit": 200});
        let obs = call(host, &f.ws, "grep_search", &args.to_string(), &READ_ALL);
        expect_ok(&obs);
        obs
    };
    // A substring of a body line matches nothing.
    let line = &f.body[5];
    let probe = &line[10..30];
    let obs = grep(&regex_escape(probe));
    assert_eq!(obs["output"]["total"], 0, "{obs:#}");
    // A search that lists every line of the file shows no body line.
    let obs = grep(".");
    assert_no_body(&f.body, &obs.to_string(), "grep .");
    assert_eq!(obs["output"]["total"], f.lines.len(), "line numbers kept");
    let last = obs["output"]["matches"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["line"], "done = true");
    assert_eq!(last["line_number"], f.lines.len());

    // Probing a redacted access key id character by character: a right
    // guess and a wrong one give the same answer.
    let id = format!("{}{}", ["AK", "IA"].concat(), "Q7XK2M4PZR5T3WNB");
    f.ws.write(
        "conf/aws.ini",
        format!("[default]\naws_access_key_id = {id}\n"),
    );
    let answer = |pattern: &str| {
        let obs = grep(pattern);
        (
            obs["output"]["total"].clone(),
            obs["output"]["matches"].clone(),
            obs["text"].as_str().unwrap().to_owned(),
        )
    };
    for known in [4, 8, 12] {
        let right = &id[..known + 1];
        let mut wrong = id[..known].to_string();
        wrong.push(if &id[known..=known] == "A" { 'B' } else { 'A' });
        let (a, b) = (answer(right), answer(&wrong));
        assert_eq!(a, b, "{right} vs {wrong}");
        assert_eq!(a.0, 0);
    }
    assert_eq!(answer(&format!("= {}", &id[..4])).0, 0);
    assert_eq!(answer("REDACTED:aws_access_key_id").0, 1);

    // The secrets right searches the file as it is.
    let session = session_allowing(
        &f.ws,
        &Allow {
            read: &["."],
            secrets: true,
            ..Allow::default()
        },
    );
    let args = json!({"pattern": &id[..9], "path": "."}).to_string();
    let obs = run_in(
        host,
        &session,
        "grep_search",
        &args,
        &CallOptions::default(),
    );
    assert_eq!(expect_ok(&obs)["total"], 1, "{obs:#}");
}

#[test]
fn a_spilled_file_view_of_a_key_keeps_no_body_line_in_its_artifact() {
    let f = fixture();
    let store = tempfile::tempdir().unwrap();
    let artifacts = toolhost::Artifacts::open(store.path(), Duration::from_secs(600)).unwrap();
    let host = host_with(&[toolhost::Source::reference()]).with_artifacts(Arc::new(artifacts));
    let opts = CallOptions {
        max_output_bytes: Some(2000),
        ..CallOptions::default()
    };
    let args = json!({"path": "conf/deploy.txt", "limit": 500}).to_string();
    let obs = call_with(&host, &f.ws, "file_view", &args, &READ_ALL, &opts);
    assert_eq!(obs["status"], "ok", "{obs:#}");
    assert!(obs["truncated"]["artifact"].is_string(), "spilled: {obs:#}");
    assert_no_body(&f.body, &obs.to_string(), "spilled observation");
    let mut kept = 0;
    for entry in walk(store.path()) {
        let bytes = std::fs::read(&entry).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert_no_body(&f.body, &text, &entry.display().to_string());
        kept += usize::from(text.contains("port = 22"));
    }
    assert_eq!(kept, 1, "the artifact holds the output");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

#[test]
fn invisible_and_bidi_characters_reach_the_model_escaped_and_the_output_exact() {
    let hidden = "invoice\u{202E}fdp.exe\u{200B}\u{2066}x\u{FEFF}\u{E0049}\u{E0047}";
    let args = json!({ "text": hidden }).to_string();
    let obs = call(hostile_host(), &Ws::new(), "leak_echo", &args, &NOTHING);
    assert_eq!(expect_ok(&obs)["echoed"], hidden, "the output keeps them");
    let text = obs["text"].as_str().unwrap();
    assert!(
        text.contains(r"invoice\u{202E}fdp.exe\u{200B}\u{2066}x\u{FEFF}\u{E0049}\u{E0047}"),
        "{text}"
    );
    assert!(
        !text
            .chars()
            .any(|c| c as u32 >= 0x2000 && !c.is_alphanumeric()),
        "no invisible character in {text:?}"
    );
    // A reference tool's rendering (grep_search's rows) too.
    let f = fixture();
    f.ws.write("conf/name.txt", "a\u{202E}b\n");
    let args = json!({"pattern": "a", "path": "conf/name.txt"}).to_string();
    let obs = call(reference_host(), &f.ws, "grep_search", &args, &READ_ALL);
    assert_eq!(expect_ok(&obs)["matches"][0]["line"], "a\u{202E}b");
    assert!(
        obs["text"].as_str().unwrap().contains(r"a\u{202E}b"),
        "{obs:#}"
    );
}
