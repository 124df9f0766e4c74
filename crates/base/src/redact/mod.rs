//! Secret redaction: well-known secret forms found in text and JSON are
//! replaced by a marker before they reach the model.
//!
//! A tool's output can carry secrets it was never meant to show: a
//! configuration file with an AWS key, a `.env` with a database password, a
//! fetched page echoing a token. [`Redactor`] finds them with the rule set of
//! [`rules`] (private key blocks, cloud and forge tokens, JWTs, connection
//! strings with passwords, high-entropy values assigned to secret-looking
//! names — see the table there) and replaces each secret with
//! `[REDACTED:<rule>]`, keeping the context (`password=[REDACTED:secret_assignment]`).
//! Every redaction is reported as a [`Redaction`] `{rule, field, count}`,
//! `field` being the JSON Pointer of the string (or the name the caller
//! gave a plain text), so the observation can say what was hidden where
//! without repeating it.
//!
//! In JSON, member names give context a plain scan cannot: the string under
//! `"aws_secret_access_key"` or `"client_secret"` is a secret as a whole
//! when it looks random, and in name/value pairs
//! (`{"name": "authorization", "value": "Bearer …"}`) the name speaks for
//! the value. Arrays inherit their member's name.
//!
//! A private key is hidden whole however a file's lines reach an output
//! (`blocks`): in one string, over the items of an array, in a text that
//! starts below its BEGIN line, and (with [`files`], which reads the files
//! a call named) in a window of its body alone. [`Redactor::redact_lines`]
//! redacts a file's text line by line for the `files` import's
//! `redacted-text`, which a search tool matches so that its counts say
//! nothing of a hidden value.
//!
//! Only known forms are found: a secret that was encoded, split, reversed
//! or otherwise transformed passes (see docs/threat-model.md).
//!
//! [`contains_secret`] is the exfiltration half: the same scan over a call's
//! arguments, without changing them, so that a tool with network needs can
//! be refused arguments that carry a secret (`secret_in_arguments`).
//!
//! The rule set is built once per process ([`redactor`]). A text is first
//! searched for each rule's *trigger literals* (`AKIA`, `ghp_`, `-----BEGIN`,
//! `://`, `eyJ`, secret-looking names; see [`rules::triggers`]) with one
//! Aho-Corasick DFA, ASCII case ignored, stepped through several segments
//! of a long text at once (`triggers`): one pass over the text says which
//! rules can match at all, and only those run their full pattern. A
//! string with no trigger, the common case, costs that one pass and no
//! allocation, which keeps the many small strings of a JSON output cheap
//! (a `RegexSet` of the same literals, used before, cost about 1.9 times
//! as much on a 64-line output). Case is compared as ASCII only: a trigger
//! spelled with a Unicode look-alike that `(?i)` would fold (`ſ` for `s`)
//! is not seen. The same pass serves long texts (on 1 MiB of source text
//! it costs what the patterns' own literal prefilters save). A rule's
//! pattern is compiled the first time a text holds one of its triggers, so
//! a process pays about 1 ms for the automata at its first scan instead of
//! ~22 ms for every pattern ([`Redactor::compile_all`] compiles them all
//! ahead). A JSON output is first searched whole for any trigger,
//! credential header name or escape that could spell one
//! ([`Redactor::json_may_hold_secret`]): an output with none skips the walk
//! over its strings. (A set over the full patterns was measured first and
//! was far slower on source text: its union automaton outgrows the lazy
//! DFA's cache.) Word boundaries are
//! ASCII (`(?-u:\b)`): a Unicode `\b` forces the slow engine on any
//! non-ASCII text. A member-name rule is tried only after the cheap tests
//! on the value. The `redact` benchmark measures 1 MiB of text, a
//! 20 000-line JSON output and a `file_view`-sized output of 64 lines;
//! see docs/performance.md for the figures.

mod blocks;
pub mod files;
pub mod rules;
mod triggers;

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::{LazyLock, OnceLock};

use regex::Regex;
use serde::Serialize;
use serde_json::Value;

use crate::json::push_pointer_token;
pub use blocks::KeyLines;
pub use rules::SecretRule;
use rules::{
    aws_secret_ok, connection_password_ok, jwt_ok, looks_like_secret_value, Check,
    AWS_SECRET_NAME_RX, BASE64_40_RX, RULES, SECRET_NAME_RX,
};

/// How far after an AWS access key id a lone 40-character secret key is
/// looked for (a credentials CSV or an `aws configure` listing).
const AWS_PAIR_WINDOW: usize = 160;

/// Header names whose values are credentials.
const CREDENTIAL_HEADERS: [&str; 6] = [
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "x-auth-token",
    "cookie",
    "set-cookie",
];

/// One kind of secret hidden in one place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Redaction {
    pub rule: SecretRule,
    /// JSON Pointer of the string, or the name given to a plain text.
    pub field: String,
    /// How many secrets of this rule were hidden there.
    pub count: usize,
}

/// A secret found in a text: its rule and byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretMatch {
    pub rule: SecretRule,
    pub start: usize,
    pub end: usize,
}

/// The marker that replaces a secret.
pub fn marker(rule: SecretRule) -> String {
    format!("[REDACTED:{}]", rule.id())
}

/// The rule set: the trigger automata built at once, each rule's pattern
/// compiled the first time a text holds one of its triggers.
pub struct Redactor {
    /// Every rule's trigger literals, compared without ASCII case, and
    /// the JSON guard's own: the credential header names and the two JSON
    /// escapes that can spell a trigger's character (`\u`, `\/`). A JSON
    /// text with none of them holds nothing [`Redactor::redact_json`]
    /// would hide (see [`Redactor::json_may_hold_secret`]).
    triggers: triggers::Triggers,
    /// Each rule's pattern, word boundaries made ASCII.
    patterns: Vec<String>,
    regexes: Vec<OnceLock<Regex>>,
}

static REDACTOR: LazyLock<Redactor> = LazyLock::new(Redactor::compile);

/// The process-wide redactor, compiled on first use.
pub fn redactor() -> &'static Redactor {
    &REDACTOR
}

/// Replaces the secrets in `text`; `field` names it in the report.
pub fn redact_text<'a>(text: &'a str, field: &str) -> (Cow<'a, str>, Vec<Redaction>) {
    redactor().redact_text(text, field)
}

/// Replaces the secrets in every string of `value`, in place.
pub fn redact_json(value: &mut Value) -> Vec<Redaction> {
    redactor().redact_json(value)
}

/// The secrets a call's arguments carry (empty when none): the check
/// behind `secret_in_arguments`.
pub fn contains_secret(args: &Value) -> Vec<Redaction> {
    redactor().scan_json(args)
}

impl Redactor {
    fn compile() -> Redactor {
        // Word boundaries are ASCII (see the module overview).
        let patterns: Vec<String> = RULES
            .iter()
            .map(|r| r.pattern.replace(r"\b", r"(?-u:\b)"))
            .collect();
        // One bit per rule in `find`.
        assert!(RULES.len() <= 64, "more rules than bits in a u64");
        let mut literals: Vec<(&str, Option<usize>)> = Vec::new();
        for (index, r) in RULES.iter().enumerate() {
            literals.extend(rules::triggers(r.rule).iter().map(|t| (*t, Some(index))));
        }
        literals.extend(CREDENTIAL_HEADERS.iter().map(|h| (*h, None)));
        literals.extend([("\\u", None), ("\\/", None)]);
        Redactor {
            triggers: triggers::Triggers::new(&literals),
            regexes: patterns.iter().map(|_| OnceLock::new()).collect(),
            patterns,
        }
    }

    /// Rule `index`'s compiled pattern (compiled now if it was not yet).
    fn regex(&self, index: usize) -> &Regex {
        self.regexes[index]
            .get_or_init(|| Regex::new(&self.patterns[index]).expect("secret rule compiles"))
    }

    /// How many rule patterns are compiled so far.
    #[cfg(test)]
    fn compiled(&self) -> usize {
        self.regexes.iter().filter(|r| r.get().is_some()).count()
    }

    /// Compiles every rule's pattern now rather than on first need.
    pub fn compile_all(&self) {
        for index in 0..self.regexes.len() {
            self.regex(index);
        }
    }

    /// Whether the JSON text `raw` may hold something that
    /// [`Redactor::redact_json`] of its parsed value would hide. `false`
    /// when `raw` holds no trigger literal of any rule, no credential
    /// header name and no `\u` or `\/` escape (the only escapes whose
    /// character a trigger can contain): every rule needs a trigger in the
    /// string it matches, every secret-looking member name holds one, and
    /// a string's text is its raw text with escapes undone. One pass over
    /// `raw` instead of one per string.
    pub fn json_may_hold_secret(&self, raw: &str) -> bool {
        self.triggers.scan(raw.as_bytes()).any
    }

    /// Every secret in `text`, non-overlapping, in order. Where two rules
    /// cover the same text the longer match wins, then the more specific
    /// rule (earlier in the table).
    pub fn find(&self, text: &str) -> Vec<SecretMatch> {
        let mut found: Vec<(SecretMatch, usize)> = Vec::new();
        // One pass of the trigger automaton says which rules can match;
        // most texts hold no trigger at all, and that pass allocates
        // nothing.
        let hit = self.triggers.scan(text.as_bytes()).rules;
        if hit == 0 {
            return Vec::new();
        }
        let candidates = (0..RULES.len()).filter(|&i| hit & (1 << i) != 0);
        for index in candidates {
            let def = &RULES[index];
            for caps in self.regex(index).captures_iter(text) {
                let Some(m) = caps.get(def.group) else {
                    continue;
                };
                let mut end = m.end();
                let ok = match def.check {
                    Check::None => true,
                    Check::Jwt => jwt_ok(m.as_str()),
                    Check::AwsSecret => aws_secret_ok(text, m.start(), m.end()),
                    Check::ConnectionPassword => {
                        connection_password_ok(caps.get(1).map_or("", |u| u.as_str()), m.as_str())
                    }
                    Check::RandomValue => {
                        let trimmed = m.as_str().trim_end_matches(['"', '\'', ')', ']', '}', '.']);
                        end = m.start() + trimmed.len();
                        looks_like_secret_value(trimmed)
                    }
                };
                if ok {
                    found.push((
                        SecretMatch {
                            rule: def.rule,
                            start: m.start(),
                            end,
                        },
                        index,
                    ));
                }
            }
            // A block whose BEGIN line is above the text: its END line
            // and the body lines over it.
            if def.rule == SecretRule::PrivateKey {
                found.extend(blocks::headless(text).into_iter().map(|(start, end)| {
                    let rule = SecretRule::PrivateKey;
                    (SecretMatch { rule, start, end }, index)
                }));
            }
        }
        // A lone 40-character secret key shortly after an access key id.
        let ids: Vec<usize> = found
            .iter()
            .filter(|(m, _)| m.rule == SecretRule::AwsAccessKeyId)
            .map(|(m, _)| m.end)
            .collect();
        for id_end in ids {
            let mut window_end = (id_end + AWS_PAIR_WINDOW).min(text.len());
            while !text.is_char_boundary(window_end) {
                window_end -= 1;
            }
            for m in BASE64_40_RX.find_iter(&text[id_end..window_end]) {
                let (start, end) = (id_end + m.start(), id_end + m.end());
                if aws_secret_ok(text, start, end) {
                    found.push((
                        SecretMatch {
                            rule: SecretRule::AwsSecretKey,
                            start,
                            end,
                        },
                        usize::MAX,
                    ));
                }
            }
        }
        // Specific forms first; the catch-all only where none matched.
        let (generic, specific): (Vec<_>, Vec<_>) = found
            .into_iter()
            .partition(|(m, _)| m.rule == SecretRule::SecretAssignment);
        let mut out = merge(specific);
        if !generic.is_empty() {
            let extra: Vec<_> = generic
                .into_iter()
                .filter(|(g, _)| !out.iter().any(|m| g.start < m.end && m.start < g.end))
                .collect();
            out.extend(merge(extra));
            out.sort_by_key(|m| m.start);
        }
        out
    }

    /// Whether `text` holds any secret.
    pub fn is_secret_free(&self, text: &str) -> bool {
        self.find(text).is_empty()
    }

    /// Replaces the secrets in `text`; `field` names it in the report.
    pub fn redact_text<'a>(&self, text: &'a str, field: &str) -> (Cow<'a, str>, Vec<Redaction>) {
        let matches = self.find(text);
        if matches.is_empty() {
            return (Cow::Borrowed(text), Vec::new());
        }
        let mut report = Vec::new();
        record(&mut report, &matches, field);
        (Cow::Owned(apply(text, &matches)), report)
    }

    /// Replaces the secrets in a file's text line by line: a secret over
    /// several lines (a private key) leaves its marker on each of them, so
    /// the text keeps the file's line count and every line its number.
    /// Returns how many secrets were hidden.
    pub fn redact_lines<'a>(&self, text: &'a str) -> (Cow<'a, str>, usize) {
        let matches = self.find(text);
        if matches.is_empty() {
            return (Cow::Borrowed(text), 0);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for m in &matches {
            out.push_str(&text[at..m.start]);
            for (i, piece) in text[m.start..m.end].split('\n').enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                let (piece, cr) = match piece.strip_suffix('\r') {
                    Some(p) => (p, "\r"),
                    None => (piece, ""),
                };
                if !piece.is_empty() {
                    out.push_str(&marker(m.rule));
                }
                out.push_str(cr);
            }
            at = m.end;
        }
        out.push_str(&text[at..]);
        (Cow::Owned(out), matches.len())
    }

    /// Replaces the secrets in every string of `value`, in place; returns
    /// what was hidden where.
    pub fn redact_json(&self, value: &mut Value) -> Vec<Redaction> {
        let mut report = Vec::new();
        self.walk(value, None, &mut String::new(), &mut report, true);
        report
    }

    /// What [`Redactor::redact_json`] would hide, without changing `value`.
    pub fn scan_json(&self, value: &Value) -> Vec<Redaction> {
        let mut copy = value.clone();
        let mut report = Vec::new();
        self.walk(&mut copy, None, &mut String::new(), &mut report, false);
        report
    }

    fn walk(
        &self,
        value: &mut Value,
        name: Option<&str>,
        pointer: &mut String,
        report: &mut Vec<Redaction>,
        rewrite: bool,
    ) {
        match value {
            Value::String(s) => {
                let matches = self.find(s);
                if !matches.is_empty() {
                    record(report, &matches, pointer);
                    if rewrite {
                        *s = apply(s, &matches);
                    }
                    return;
                }
                // Nothing of a known form: the member's name may still say
                // the whole value is a secret.
                if let Some(rule) = name.and_then(|n| whole_value_rule(n, s)) {
                    record(
                        report,
                        &[SecretMatch {
                            rule,
                            start: 0,
                            end: s.len(),
                        }],
                        pointer,
                    );
                    if rewrite {
                        *s = marker(rule);
                    }
                }
            }
            Value::Array(items) => {
                self.blocks_across_items(items, pointer, report, rewrite);
                for (i, item) in items.iter_mut().enumerate() {
                    let len = pointer.len();
                    pointer.push('/');
                    let _ = write!(pointer, "{i}");
                    self.walk(item, name, pointer, report, rewrite);
                    pointer.truncate(len);
                }
            }
            Value::Object(members) => {
                // A name/value pair: the name speaks for the value.
                let pair_name = ["name", "key", "header"]
                    .iter()
                    .find_map(|k| members.get(*k).and_then(Value::as_str))
                    .map(str::to_owned);
                for (key, item) in members.iter_mut() {
                    let len = pointer.len();
                    push_pointer_token(pointer, key);
                    let context = match (&pair_name, key.as_str()) {
                        (Some(n), "value") => n.as_str(),
                        _ => key.as_str(),
                    };
                    self.walk(item, Some(context), pointer, report, rewrite);
                    pointer.truncate(len);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

impl Redactor {
    /// Key blocks spread over the items of an array ([`blocks::across_items`]):
    /// over the string items themselves, and over each member the object
    /// items share (`[{"line": …}, …]`). The body and END items are
    /// replaced by the marker here; a BEGIN item is left to the rule,
    /// which matches it to its end.
    fn blocks_across_items(
        &self,
        items: &mut [Value],
        pointer: &str,
        report: &mut Vec<Redaction>,
        rewrite: bool,
    ) {
        if items.len() < 2 {
            return;
        }
        let mut columns: Vec<Option<String>> = Vec::new();
        if items.iter().any(Value::is_string) {
            columns.push(None);
        }
        for item in items.iter() {
            if let Value::Object(members) = item {
                for (k, v) in members {
                    if v.is_string() && !columns.iter().any(|c| c.as_deref() == Some(k)) {
                        columns.push(Some(k.clone()));
                    }
                }
            }
        }
        for column in columns {
            let view: Vec<Option<&str>> = items
                .iter()
                .map(|item| match &column {
                    None => item.as_str(),
                    Some(k) => item.get(k).and_then(Value::as_str),
                })
                .collect();
            // Cheap test first: no marker line in the column, no block.
            if !view
                .iter()
                .flatten()
                .any(|s| s.contains("-----BEGIN") || s.contains("-----END"))
            {
                continue;
            }
            let found = blocks::across_items(&view);
            for (i, end) in found {
                let mut field = format!("{pointer}/{i}");
                if let Some(k) = &column {
                    push_pointer_token(&mut field, k);
                }
                let rule = SecretRule::PrivateKey;
                record(
                    report,
                    &[SecretMatch {
                        rule,
                        start: 0,
                        end,
                    }],
                    &field,
                );
                if !rewrite {
                    continue;
                }
                let target = match &column {
                    None => Some(&mut items[i]),
                    Some(k) => items[i].get_mut(k),
                };
                if let Some(Value::String(s)) = target {
                    *s = format!("{}{}", marker(rule), &s[end..]);
                }
            }
        }
    }
}

/// The rule that makes a whole string under member `name` a secret.
fn whole_value_rule(name: &str, value: &str) -> Option<SecretRule> {
    // The cheap tests come first: most strings of an output (a line of
    // text, a path) are under a name that says nothing of secrets (`text`,
    // `path`), and one match of that short name is cheaper than the
    // randomness test of a long value (which lines of hex or base64 pass).
    let rule =
        if value.len() == 40 && aws_secret_ok(value, 0, 40) && AWS_SECRET_NAME_RX.is_match(name) {
            SecretRule::AwsSecretKey
        } else if value.trim().len() >= 8
            && CREDENTIAL_HEADERS
                .iter()
                .any(|h| h.eq_ignore_ascii_case(name))
        {
            SecretRule::AuthorizationHeader
        } else if !value.contains(char::is_whitespace)
            && SECRET_NAME_RX.is_match(name)
            && looks_like_secret_value(value)
        {
            SecretRule::SecretAssignment
        } else {
            return None;
        };
    // Already redacted.
    (!value.contains("[REDACTED:")).then_some(rule)
}

/// Non-overlapping matches in text order: the earliest first, then the
/// longest, then the rule earliest in the table.
fn merge(mut found: Vec<(SecretMatch, usize)>) -> Vec<SecretMatch> {
    found.sort_by_key(|(m, priority)| (m.start, std::cmp::Reverse(m.end), *priority));
    let mut out: Vec<SecretMatch> = Vec::with_capacity(found.len());
    for (m, _) in found {
        match out.last() {
            Some(last) if m.start < last.end => {}
            _ => out.push(m),
        }
    }
    out
}

fn apply(text: &str, matches: &[SecretMatch]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for m in matches {
        out.push_str(&text[at..m.start]);
        out.push_str(&marker(m.rule));
        at = m.end;
    }
    out.push_str(&text[at..]);
    out
}

fn record(report: &mut Vec<Redaction>, matches: &[SecretMatch], field: &str) {
    for m in matches {
        match report
            .iter_mut()
            .find(|r| r.rule == m.rule && r.field == field)
        {
            Some(r) => r.count += 1,
            None => report.push(Redaction {
                rule: m.rule,
                field: field.to_string(),
                count: 1,
            }),
        }
    }
}

#[cfg(test)]
mod tests;
