//! Tool discovery: a small BM25 index over what each tool says about
//! itself, so a model can find a tool by describing its task instead of
//! being sent the whole catalog every turn ("lazy discovery").
//!
//! Each tool is one document made of its name (split on `_`, `.` and `-`),
//! title, description, and every input parameter's name and description
//! (read from its input schema's `properties`, nested ones too), the name
//! and title weighted up. Words are lowercased, split on anything that is
//! not a letter or digit, stripped of common English stop words and
//! lightly stemmed ([`stem`]: plural, `-ing`, `-ed`, `-er`, `-ly`, … and a
//! few irregular verb forms), so "resizing images" meets `resize_image`,
//! and mapped through a small table of words tools and tasks use for the
//! same thing ("unzip" and "extract", "photo" and "image").
//! Queries go through the same steps, are widened by a vocabulary of
//! software tasks ([`TASKS`]: "compile" also asks for what runs programs,
//! "where is X defined" for what searches code) and are ranked with Okapi
//! BM25 (k1 = 1.2, b = 0.75), the widened terms counting half. Query words
//! are also widened through WordNet ([`super::lexicon`]: "kilogram" asks for
//! "mass" and "unit"), those terms counting a fifth of their lexicon weight,
//! and read by their shape first (`Index::query_terms`: a file name, an
//! e-mail address, a URL, a compound).
//!
//! A search never comes back empty while tools exist: when fewer tools than
//! asked share a word with the query, the rest are ranked by the character
//! trigrams their name, title and description share with it, and marked
//! weak ([`Hit::strong`] is false), so the model knows to read the summary
//! before trusting the match. No network, no model.
//!
//! ```
//! use toolhost::tools::discovery::{Doc, Index};
//! let index = Index::new(vec![
//!     Doc::new("image.resize", "Resize an image", "Scale a picture to a width and height.", &[]),
//!     Doc::new("file_view", "View a file", "Read numbered lines of a text file.", &[]),
//! ]);
//! let hits = index.search("make a picture smaller", 3);
//! assert_eq!(hits[0].name, "image.resize");
//! ```

use std::collections::HashMap;

use serde_json::Value;

/// One tool as the index sees it.
#[derive(Debug, Clone)]
pub struct Doc {
    pub name: String,
    pub title: String,
    /// The first sentence of the description: what a search result shows.
    pub summary: String,
    terms: Vec<String>,
    /// Character trigrams of the name, title and description: the
    /// fallback ranking when no word is shared.
    grams: std::collections::HashSet<[char; 3]>,
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub name: String,
    pub title: String,
    pub summary: String,
    pub score: f64,
    /// Whether the tool shares a word (or a task's concept) with the query;
    /// false for a hit ranked only by spelling likeness.
    pub strong: bool,
}

/// How much more a word in the name or title counts than one in the
/// description.
const NAME_WEIGHT: usize = 3;
const K1: f64 = 1.2;
const B: f64 = 0.75;

impl Doc {
    /// A document of a tool's name, title, description and parameters
    /// (`(name, description)` pairs).
    pub fn new(name: &str, title: &str, description: &str, params: &[(String, String)]) -> Doc {
        let mut terms = Vec::new();
        for _ in 0..NAME_WEIGHT {
            terms.extend(words(name));
            terms.extend(words(title));
        }
        terms.extend(words(description));
        for (p, d) in params {
            terms.extend(words(p));
            terms.extend(words(d));
        }
        Doc {
            name: name.to_owned(),
            title: title.to_owned(),
            summary: first_sentence(description),
            terms,
            grams: trigrams(&format!("{name} {title} {description}")),
        }
    }

    /// A document from a tool's published parts: its input schema's
    /// properties (nested objects and array items too) are the parameters.
    pub fn from_schema(name: &str, title: &str, description: &str, input_schema: &Value) -> Doc {
        let mut params = Vec::new();
        collect_params(input_schema, &mut params, 0);
        Doc::new(name, title, description, &params)
    }

    /// Adds the tool's declared task words: `keywords` weighted like the
    /// name, `examples` once each.
    pub fn with_task_words(mut self, keywords: &[String], examples: &[String]) -> Doc {
        for _ in 0..NAME_WEIGHT {
            for k in keywords {
                self.terms.extend(words(k));
            }
        }
        for e in examples {
            self.terms.extend(words(e));
        }
        self
    }
}

fn collect_params(schema: &Value, out: &mut Vec<(String, String)>, depth: usize) {
    if depth > 8 {
        return;
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            let d = v.get("description").and_then(Value::as_str).unwrap_or("");
            out.push((k.clone(), d.to_owned()));
            collect_params(v, out, depth + 1);
        }
    }
    if let Some(items) = schema.get("items") {
        collect_params(items, out, depth + 1);
    }
}

/// The first sentence of `s` (up to 200 bytes).
fn first_sentence(s: &str) -> String {
    let end = s.find(". ").map(|i| i + 1).unwrap_or(s.len()).min(200);
    let mut end = end.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].trim().to_owned()
}

const STOP: &[&str] = &[
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "for", "with", "by", "at", "from", "is",
    "are", "be", "it", "its", "this", "that", "as", "i", "me", "my", "we", "our", "you", "your",
    "want", "need", "please", "can", "could", "would", "should", "some", "all", "any", "into",
    "out", "about", "which", "what", "how", "do", "does", "use", "when", "not", "no", "if", "then",
    "than", "so", "one", "get",
];

/// The index terms of a text: lowercase words, stop words dropped, stemmed.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .map(|w| canonical(stem(&w)))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Words tools and tasks say for the same thing: each group's stems meet
/// at the first one's (so "unzip the bundle" meets "extract an archive",
/// "shrink the photo" meets "resize an image").
const SYNONYMS: &[&[&str]] = &[
    &["view", "show", "display", "read", "open", "look"],
    &["search", "find", "grep", "locate", "mention", "contain"],
    &["delete", "remove", "erase"],
    &["edit", "change", "modify", "replace", "update"],
    &["mail", "email"],
    &["extract", "unzip", "unpack", "decompress", "untar"],
    &["archive", "zip", "tarball", "compress", "pack"],
    &["fetch", "download", "request"],
    &["picture", "image", "photo", "screenshot"],
    &["small", "shrink", "scale", "resize"],
    &["folder", "directory", "dir"],
    &["meeting", "event", "appointment"],
    &["commit", "history"],
];

/// The vocabulary of software tasks: a query word on the left also asks
/// for the concepts on the right (the words tools use to say what they do).
/// Groups follow kinds of task, not any one catalog: running project
/// tooling; finding where code is defined or used; small text corrections;
/// talking to the network; removing things; reading and showing; then
/// listing folders, version control, comparing, checksums, documents,
/// databases, trackers, containers, metrics, names, schedules, calendars,
/// languages and weather.
pub const TASKS: &[(&[&str], &[&str])] = &[
    (
        &[
            "build",
            "compile",
            "lint",
            "test",
            "run",
            "execute",
            "exec",
            "start",
            "launch",
            "invoke",
            "cargo",
            "pytest",
            "npm",
            "make",
            "script",
            "command",
            "binary",
            "clippy",
            "tests",
            "suite",
            "formatter",
            "typecheck",
            "benchmark",
        ],
        &["run", "program", "command", "build", "test"],
    ),
    (
        &[
            "defined",
            "definition",
            "declared",
            "used",
            "usage",
            "usages",
            "locate",
            "where",
            "occurrence",
            "occurrences",
            "grep",
            "search",
            "find",
            "callers",
            "regex",
            "regular",
            "expression",
            "pattern",
            "match",
            "matching",
            "todo",
            "references",
            "codebase",
            "mention",
        ],
        &["search", "regex", "locate", "code", "match", "line"],
    ),
    (
        &[
            "fix",
            "replace",
            "patch",
            "edit",
            "correct",
            "change",
            "typo",
            "modify",
            "update",
            "tweak",
            "substitute",
            "rewrite",
            "amend",
            "adjust",
            "swap",
            "refactor",
        ],
        &["edit", "replace", "text", "exact"],
    ),
    (&["rename"], &["move", "name", "edit"]),
    (
        &[
            "fetch", "download", "api", "request", "endpoint", "url", "website", "web", "http",
            "https", "curl", "rest", "site", "online", "internet",
        ],
        &["fetch", "url", "http", "web", "page"],
    ),
    (
        &[
            "remove", "delete", "clean", "cleanup", "erase", "discard", "purge", "wipe", "trash",
            "rm", "obsolete", "stale", "unused", "rid",
        ],
        &["delete", "remove", "file"],
    ),
    (
        &[
            "read", "show", "open", "view", "display", "say", "says", "contents", "content",
            "print", "cat", "see", "inspect", "peek", "glance",
        ],
        &["view", "read", "line", "file"],
    ),
    (
        &["ls", "dir", "folder", "directory", "tree", "root"],
        &["list", "folder", "entries"],
    ),
    (
        &["uncommitted", "unstaged", "dirty", "untracked", "pending"],
        &["status", "working", "tree", "staged", "untracked"],
    ),
    (
        &["blame", "who", "author", "history"],
        &["commit", "author", "history"],
    ),
    (
        &["different", "differ", "difference", "diff", "compare"],
        &["difference", "diff", "compare"],
    ),
    (
        &[
            "same",
            "identical",
            "checksum",
            "integrity",
            "tampered",
            "corrupt",
        ],
        &["digest", "verify", "compare", "checksum"],
    ),
    (
        &["readme", "markdown", "md", "html", "webpage"],
        &["markdown", "html", "render"],
    ),
    (
        &["table", "database", "sql", "postgres"],
        &["sql", "database", "query", "rows"],
    ),
    (&["bug", "crash", "tracker", "issue"], &["issue", "tracker"]),
    (
        &["docker", "container", "nginx", "bounce", "restart", "crash"],
        &["container", "docker"],
    ),
    (
        &[
            "latency",
            "memory",
            "throughput",
            "p99",
            "dashboard",
            "rate",
            "second",
        ],
        &["metrics", "time", "series"],
    ),
    (
        &["resolve", "hostname", "ip", "address", "dns"],
        &["dns", "resolve", "host", "records"],
    ),
    (
        &[
            "every",
            "hourly",
            "nightly",
            "daily",
            "periodically",
            "repeat",
        ],
        &["schedule", "cron", "periodically"],
    ),
    (
        &[
            "book",
            "sync",
            "standup",
            "meeting",
            "calendar",
            "appointment",
        ],
        &["meeting", "appointment", "calendar", "schedule"],
    ),
    (
        &["german", "french", "english", "japanese", "language"],
        &["translate", "language"],
    ),
    (
        &["umbrella", "rain", "forecast"],
        &["weather", "forecast", "rain"],
    ),
];

/// How much a concept added by [`TASKS`] counts against a word the query
/// says itself.
const CONCEPT_WEIGHT: f64 = 0.5;

/// How much a term WordNet relates to a query word counts (times its
/// own weight, [`super::lexicon::related`]) against a word the query says.
const LEXICON_WEIGHT: f64 = 0.2;

/// The concepts `query_terms` ask for through [`TASKS`], not already said.
fn concepts(query_terms: &[String]) -> Vec<String> {
    static TABLE: std::sync::OnceLock<HashMap<String, Vec<String>>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t: HashMap<String, Vec<String>> = HashMap::new();
        for (cues, adds) in TASKS {
            let adds: Vec<String> = adds.iter().flat_map(|a| words(a)).collect();
            for cue in *cues {
                for w in words(cue) {
                    t.entry(w).or_default().extend(adds.iter().cloned());
                }
            }
        }
        t
    });
    let mut out: Vec<String> = query_terms
        .iter()
        .filter_map(|t| table.get(t))
        .flatten()
        .filter(|c| !query_terms.contains(c))
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The character trigrams of each lowercase word of `text` (padded with a
/// space on each side, so short words and word starts count).
fn trigrams(text: &str) -> std::collections::HashSet<[char; 3]> {
    let mut out = std::collections::HashSet::new();
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 1)
    {
        let chars: Vec<char> = std::iter::once(' ')
            .chain(w.to_lowercase().chars())
            .chain(std::iter::once(' '))
            .collect();
        for t in chars.windows(3) {
            out.insert([t[0], t[1], t[2]]);
        }
    }
    out
}

fn canonical(stemmed: String) -> String {
    static TABLE: std::sync::OnceLock<HashMap<String, String>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = HashMap::new();
        for group in SYNONYMS {
            let head = stem(group[0]);
            for w in *group {
                t.insert(stem(w), head.clone());
            }
        }
        t
    });
    table.get(&stemmed).cloned().unwrap_or(stemmed)
}

/// A light English stemmer: enough for "searching", "searches" and
/// "searched" to meet "search", and "deletion" to meet "delete".
pub fn stem(w: &str) -> String {
    const IRREGULAR: &[(&str, &str)] = &[
        ("wrote", "writ"),
        ("written", "writ"),
        ("write", "writ"),
        ("writing", "writ"),
        ("found", "find"),
        ("sent", "send"),
        ("made", "make"),
        ("ran", "run"),
        ("children", "child"),
        ("bigger", "big"),
        ("smaller", "small"),
        ("larger", "larg"),
    ];
    if let Some((_, s)) = IRREGULAR.iter().find(|(k, _)| *k == w) {
        return (*s).to_owned();
    }
    if w.len() <= 3 || w.chars().any(|c| c.is_ascii_digit()) {
        return w.to_owned();
    }
    let mut s = w.to_owned();
    for (suffix, keep) in [
        ("ations", 3),
        ("ation", 3),
        ("ions", 3),
        ("ion", 3),
        ("ments", 3),
        ("ment", 3),
        ("ness", 3),
        ("ings", 3),
        ("ing", 3),
        ("ies", 2),
        ("ied", 2),
        ("ers", 3),
        ("er", 3),
        ("ed", 3),
        ("ly", 3),
        ("es", 3),
        ("s", 3),
        ("e", 3),
    ] {
        if let Some(base) = s.strip_suffix(suffix) {
            if base.len() >= keep && !(suffix == "s" && base.ends_with('s')) {
                s = base.to_owned();
                if suffix == "ies" || suffix == "ied" {
                    s.push('y');
                }
                break;
            }
        }
    }
    // A doubled final consonant left by -ing/-ed ("running" → "runn").
    let b = s.as_bytes();
    if b.len() >= 4 && b[b.len() - 1] == b[b.len() - 2] && !b"aeiouls".contains(&b[b.len() - 1]) {
        s.pop();
    }
    // A final -e ("delete" and "deletion" meet at "delet").
    if s.len() > 3 && s.ends_with('e') {
        s.pop();
    }
    s
}

/// A BM25 index over tool documents.
#[derive(Debug, Clone, Default)]
pub struct Index {
    docs: Vec<Doc>,
    /// Term frequency per document.
    tf: Vec<HashMap<String, usize>>,
    /// Documents each term appears in.
    df: HashMap<String, usize>,
    avg_len: f64,
}

impl Index {
    pub fn new(docs: Vec<Doc>) -> Index {
        let mut tf = Vec::with_capacity(docs.len());
        let mut df: HashMap<String, usize> = HashMap::new();
        let mut total = 0usize;
        for d in &docs {
            let mut counts: HashMap<String, usize> = HashMap::new();
            for t in &d.terms {
                *counts.entry(t.clone()).or_default() += 1;
            }
            for t in counts.keys() {
                *df.entry(t.clone()).or_default() += 1;
            }
            total += d.terms.len();
            tf.push(counts);
        }
        let avg_len = if docs.is_empty() {
            1.0
        } else {
            total as f64 / docs.len() as f64
        };
        Index {
            docs,
            tf,
            df,
            avg_len,
        }
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The index terms of `query` in order, each with its weight:
    /// - an e-mail address says "email address" (its parts name a person,
    ///   not a task);
    /// - a URL says "url" and "web", its own words counting half;
    /// - a file name (`backup.sql`, `CONTRIBUTING.md`) says "file", its
    ///   extension counting half (it names the object, not the task);
    /// - a word the index does not know but two of its words make up
    ///   ("hostname" for "host name") counts as those two, half each; two
    ///   words the index knows as one ("time zone" for "timezone") also say
    ///   that one.
    fn query_terms(&self, query: &str) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = Vec::new();
        let push = |text: &str, w: f64, out: &mut Vec<(String, f64)>| {
            out.extend(words(text).into_iter().map(|t| (t, w)));
        };
        for raw in query.split_whitespace() {
            let token = raw.trim_matches(|c: char| !c.is_alphanumeric());
            let lower = token.to_lowercase();
            if token.contains('@') && token.rsplit('@').next().is_some_and(|d| d.contains('.')) {
                push("email address", 1.0, &mut out);
            } else if lower.starts_with("http://")
                || lower.starts_with("https://")
                || lower.starts_with("www.")
            {
                push("url web", 1.0, &mut out);
                push(token, 0.5, &mut out);
            } else if let Some((stem, ext)) = token.rsplit_once('.').filter(|(b, e)| {
                !b.is_empty()
                    && (1..=5).contains(&e.len())
                    && e.chars().all(|c| c.is_ascii_alphanumeric())
                    && !e.chars().all(|c| c.is_ascii_digit())
            }) {
                push(stem, 1.0, &mut out);
                push(ext, 0.5, &mut out);
                push("file", 1.0, &mut out);
            } else {
                push(token, 1.0, &mut out);
            }
        }
        // Compounds, split and joined, against the index's vocabulary.
        let known = |t: &str| self.df.contains_key(t);
        let mut extra = Vec::new();
        for (t, w) in &out {
            if known(t) || t.len() < 6 {
                continue;
            }
            let chars: Vec<(usize, char)> = t.char_indices().collect();
            for &(i, _) in chars.iter().skip(3).take(chars.len().saturating_sub(6)) {
                let (a, b) = (canonical(stem(&t[..i])), canonical(stem(&t[i..])));
                if known(&a) && known(&b) {
                    extra.push((a, w / 2.0));
                    extra.push((b, w / 2.0));
                    break;
                }
            }
        }
        for pair in out.windows(2) {
            let joined = canonical(stem(&format!("{}{}", pair[0].0, pair[1].0)));
            if known(&joined) {
                extra.push((joined, pair[0].1.min(pair[1].1)));
            }
        }
        out.extend(extra);
        out
    }

    /// The `limit` best tools for `query`, best first (ties by name).
    /// Tools sharing a word or a task concept with the query come first
    /// (strong); when there are fewer than `limit`, the rest are ranked by
    /// shared character trigrams (weak), even for a query of stop words
    /// alone. Empty only when the index is, the query has no letter or
    /// digit, or `limit` is 0.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        let said_in_order = self.query_terms(query);
        let mut q: Vec<(String, f64)> = Vec::new();
        for (t, w) in &said_in_order {
            match q.iter_mut().find(|(x, _)| x == t) {
                Some(e) => e.1 = e.1.max(*w),
                None => q.push((t.clone(), *w)),
            }
        }
        q.sort_by(|a, b| a.0.cmp(&b.0));
        let plain: Vec<String> = q.iter().map(|(t, _)| t.clone()).collect();
        let expanded = concepts(&plain);
        let in_order: Vec<String> = said_in_order.into_iter().map(|(t, _)| t).collect();
        let mut lexical = super::lexicon::related(&in_order);
        lexical.retain(|(t, _)| !expanded.contains(t) && self.df.contains_key(t));
        let n = self.docs.len() as f64;
        let bm25 = |tf: &HashMap<String, usize>, len: f64, t: &String| -> Option<f64> {
            let f = *tf.get(t)? as f64;
            let df = *self.df.get(t)? as f64;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            Some(idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * len / self.avg_len)))
        };
        let mut hits: Vec<Hit> = self
            .docs
            .iter()
            .zip(&self.tf)
            .filter_map(|(d, tf)| {
                let len = d.terms.len() as f64;
                let said: f64 = q
                    .iter()
                    .filter_map(|(t, w)| Some(w * bm25(tf, len, t)?))
                    .sum();
                let implied: f64 = expanded.iter().filter_map(|t| bm25(tf, len, t)).sum();
                let related: f64 = lexical
                    .iter()
                    .filter_map(|(t, w)| Some(w * bm25(tf, len, t)?))
                    .sum();
                let score = said + CONCEPT_WEIGHT * implied + LEXICON_WEIGHT * related;
                (score > 0.0).then(|| Hit {
                    name: d.name.clone(),
                    title: d.title.clone(),
                    summary: d.summary.clone(),
                    score,
                    strong: true,
                })
            })
            .collect();
        sort_hits(&mut hits);
        hits.truncate(limit);
        if hits.len() < limit && query.chars().any(char::is_alphanumeric) {
            let qg = trigrams(query);
            let mut weak: Vec<Hit> = self
                .docs
                .iter()
                .filter(|d| !hits.iter().any(|h| h.name == d.name))
                .map(|d| {
                    let shared = d.grams.intersection(&qg).count() as f64;
                    let denom = ((qg.len() * d.grams.len()) as f64).sqrt().max(1.0);
                    Hit {
                        name: d.name.clone(),
                        title: d.title.clone(),
                        summary: d.summary.clone(),
                        score: shared / denom,
                        strong: false,
                    }
                })
                .collect();
            sort_hits(&mut weak);
            weak.truncate(limit - hits.len());
            hits.extend(weak);
        }
        hits
    }
}

fn sort_hits(hits: &mut [Hit]) {
    hits.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// The host's tool that searches the catalog.
pub const TOOL_NAME: &str = "find_tools";

/// Results `find_tools` returns by default, and at most.
pub const DEFAULT_RESULTS: usize = 5;
pub const MAX_RESULTS: usize = 20;

/// An index of `tools` (descriptors), the way `find_tools` searches them.
pub fn index_of<'a>(tools: impl Iterator<Item = &'a crate::descriptor::ToolDescriptor>) -> Index {
    Index::new(
        tools
            .map(|d| {
                Doc::from_schema(
                    &d.name,
                    d.title.as_deref().unwrap_or(""),
                    &d.description,
                    &d.input_schema,
                )
                .with_task_words(&d.keywords, &d.examples)
            })
            .collect(),
    )
}

/// What declares found tools for a script, by name
/// ([`find_tools`]'s `declare`).
pub type Declare<'a> = dyn Fn(&[String]) -> String + 'a;

/// The `find_tools` tool over `index`: `{"query", "limit"?}` →
/// `{"tools": [{"name", "title", "summary", "score", "match"}]}`, best
/// first; `match` is `"strong"` or `"weak"` ([`Hit::strong`]). With
/// `declare` (the caller may run scripts), the output also carries
/// `script_declarations`: `declare` of the found tools' names, the
/// TypeScript declaration a script calls them by
/// ([`crate::script::declarations`]), and the text ends with it.
pub fn find_tools(
    index: &Index,
    args: &str,
    call_id: &str,
    max_text_bytes: usize,
    declare: Option<&Declare<'_>>,
) -> crate::observation::Observation {
    use crate::descriptor::SideEffect;
    use crate::observation::{ErrorCode, Observation};
    let fail = |info| Observation::failure(call_id, TOOL_NAME, SideEffect::ReadOnly, info);
    let value = match crate::json::parse_strict(args) {
        Ok(v) => v,
        Err(e) => return fail(ErrorCode::InvalidJson.info(e.to_string())),
    };
    let expected = "{\"query\": \"what you want to do, in words\", \"limit\"?: 1..=20}";
    let Some(map) = value.as_object() else {
        return fail(
            ErrorCode::InvalidArguments
                .info("the arguments must be an object")
                .with_field("")
                .with_expected(expected),
        );
    };
    if let Some(k) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "query" | "limit"))
    {
        return fail(
            ErrorCode::InvalidArguments
                .info(format!("unknown argument `{k}`"))
                .with_field(format!("/{k}"))
                .with_expected(expected),
        );
    }
    let query = match map.get("query") {
        Some(Value::String(q)) if !q.trim().is_empty() && q.len() <= 1000 => q,
        _ => {
            return fail(
                ErrorCode::InvalidArguments
                    .info("`query` is required: describe the task in words (1 to 1000 bytes)")
                    .with_field("/query")
                    .with_expected("a non-empty string of at most 1000 bytes"),
            )
        }
    };
    let limit = match map.get("limit") {
        None => DEFAULT_RESULTS,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_RESULTS as u64).contains(&n) => n as usize,
            _ => {
                return fail(
                    ErrorCode::InvalidArguments
                        .info(format!(
                            "`limit` must be an integer from 1 to {MAX_RESULTS}"
                        ))
                        .with_field("/limit")
                        .with_expected(format!("1..={MAX_RESULTS}"))
                        .with_actual(v.to_string()),
                )
            }
        },
    };
    let hits = index.search(query, limit);
    let tools: Vec<Value> = hits
        .iter()
        .map(|h| {
            serde_json::json!({
                "name": h.name,
                "title": h.title,
                "summary": h.summary,
                "score": (h.score * 1000.0).round() / 1000.0,
                "match": if h.strong { "strong" } else { "weak" },
            })
        })
        .collect();
    let mut text = String::new();
    if hits.is_empty() {
        text.push_str("no tool matches; try other words for the task");
    } else if !hits[0].strong {
        text.push_str(
            "No tool shares a word with the task; these are weak matches by spelling only. \
             Read each summary before calling one, or search again in other words.\n",
        );
    }
    for h in &hits {
        let weak = if h.strong { "" } else { " (weak match)" };
        text.push_str(&format!("{}: {} — {}{weak}\n", h.name, h.title, h.summary));
    }
    let mut output = serde_json::json!({ "tools": tools });
    if let Some(declare) = declare {
        let names: Vec<String> = hits.iter().map(|h| h.name.clone()).collect();
        let decl = declare(&names);
        text.push_str("In run_script:\n");
        text.push_str(&decl);
        output["script_declarations"] = Value::String(decl);
    }
    Observation::ok(
        call_id,
        TOOL_NAME,
        SideEffect::ReadOnly,
        output,
        max_text_bytes,
    )
    .with_plugin_text(&text, max_text_bytes)
}

/// How many of a search's first hits a lazy session's list may gain.
pub const REVEAL: usize = 3;

/// The share of the best hit's score a runner-up needs to be revealed too.
pub const REVEAL_SHARE: f64 = 0.5;

/// The names a lazy session's list gains from a `find_tools` answer's
/// `tools`: the strong matches among the first [`REVEAL`] that score at
/// least [`REVEAL_SHARE`] of the first one's, or the first hit
/// alone when none of them is strong. The rest stay callable by name, but a
/// search does not put the whole catalog in every later turn.
pub fn to_reveal(tools: &[Value]) -> Vec<String> {
    let name = |t: &Value| t["name"].as_str().map(String::from);
    let top = tools
        .first()
        .and_then(|t| t["score"].as_f64())
        .unwrap_or(0.0);
    let strong: Vec<String> = tools
        .iter()
        .take(REVEAL)
        .filter(|t| t["match"] == "strong")
        .filter(|t| t["score"].as_f64().unwrap_or(0.0) >= REVEAL_SHARE * top)
        .filter_map(name)
        .collect();
    if strong.is_empty() {
        tools.first().and_then(name).into_iter().collect()
    } else {
        strong
    }
}

/// The published definition of `find_tools` (MCP `tools/list`).
pub fn tool_definition() -> Value {
    serde_json::json!({
        "name": TOOL_NAME,
        "title": "Find tools",
        "description": "Search this server's tools by what you want to do. Returns the best matches (name, title, one-line summary), best first, each with a score and whether the match is strong or weak; in a lazy session the top matches join your tool list. When you may run scripts, also the TypeScript declaration run_script calls them by. Read-only, no side effect.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "the task in your own words"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "how many tools (default 5)"}
            },
            "required": ["query"],
            "additionalProperties": false
        },
        "annotations": {
            "title": "Find tools",
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false
        },
        "_meta": {"dev.toolhost/side_effect": "read-only"}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_meet() {
        for (a, b) in [
            ("searching", "search"),
            ("searches", "search"),
            ("searched", "search"),
            ("deletion", "delete"),
            ("deleting", "delete"),
            ("images", "image"),
            ("resizing", "resize"),
            ("running", "run"),
            ("queries", "query"),
            ("written", "write"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} / {b}");
        }
    }

    #[test]
    fn parameters_are_indexed_and_nothing_shared_is_weak() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "timezone": {"type": "string", "description": "IANA zone such as Europe/Paris"}
        }});
        let index = Index::new(vec![
            Doc::from_schema("clock_now", "Current time", "Returns the time.", &schema),
            Doc::new("file_view", "View a file", "Read lines of a file.", &[]),
        ]);
        assert_eq!(
            index.search("what time is it in Paris", 3)[0].name,
            "clock_now"
        );
        // Nothing shared: still hits, every one weak.
        let weak = index.search("zzz qqq", 3);
        assert_eq!(weak.len(), 2, "{weak:?}");
        assert!(weak.iter().all(|h| !h.strong), "{weak:?}");
        assert!(index.search("", 3).is_empty());
    }

    fn reference_like() -> Index {
        Index::new(vec![
            Doc::new("file_view", "View file", "Shows numbered lines of one UTF-8 text file.", &[]),
            Doc::new("file_edit", "Edit file", "Replaces exact text in an existing UTF-8 file.", &[]),
            Doc::new(
                "file_delete",
                "Delete file",
                "Deletes one regular file in the workspace. Not for changing a file.",
                &[],
            ),
            Doc::new(
                "grep_search",
                "Search files",
                "Finds lines matching a Rust regex in the text files under a path. Use it to locate code.",
                &[],
            ),
            Doc::new(
                "run_command",
                "Run a program",
                "Runs one program in an OS sandbox. For builds and tests (cargo test, pytest, make).",
                &[],
            ),
            Doc::new("http_get", "Fetch a URL", "Fetches one http(s) URL with a GET.", &[]),
        ])
    }

    #[test]
    fn phrasings_without_the_tools_words_still_find_tools() {
        let index = reference_like();
        for q in [
            "wibble the frobnicator",
            "é",
            "where does the parser get its config from",
            "xyzzy plugh",
            "what should I do",
            "a",
        ] {
            let hits = index.search(q, 3);
            assert_eq!(hits.len(), 3, "{q}: {hits:?}");
            for h in &hits {
                assert!(h.score.is_finite() && h.score >= 0.0, "{h:?}");
            }
        }
        // Hits are strong first, then weak, never interleaved.
        let hits = index.search("compile wibble", 5);
        let first_weak = hits.iter().position(|h| !h.strong).unwrap_or(hits.len());
        assert!(hits[first_weak..].iter().all(|h| !h.strong), "{hits:?}");
    }

    #[test]
    fn the_task_vocabulary_sends_tasks_to_the_right_tool() {
        let index = reference_like();
        for (q, want) in [
            ("search the code for a regular expression", "grep_search"),
            ("compile the project and run the unit tests", "run_command"),
            ("lint the crate", "run_command"),
            ("start the dev server", "run_command"),
            ("where is parse_config defined", "grep_search"),
            ("fix the typo in the heading of README", "file_edit"),
            ("call the weather API", "http_get"),
            ("what does the changelog say", "file_view"),
            ("clean up the leftover temp log", "file_delete"),
        ] {
            let hits = index.search(q, 3);
            assert_eq!(hits[0].name, want, "{q}: {hits:?}");
            assert!(hits[0].strong, "{q}: {hits:?}");
        }
    }
}
