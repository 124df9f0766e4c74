//! Related words from WordNet, for widening a `find_tools` query.
//!
//! A task is often phrased in words no tool uses: "350 fahrenheit in
//! celsius" for a tool that converts "units of temperature", "relocate the
//! log" for one that "moves a file". WordNet (Princeton's lexical database
//! of English, shipped by Debian as `wordnet-base`) links such words: a
//! word's synonyms, the more general words above it (a kilogram is a mass
//! unit, a unit of measurement), the noun an adjective describes ("warm" →
//! temperature) and the forms derived from it ("deletion" ↔ "delete").
//!
//! `lexicon.tsv.zst` is made from it once and kept in the repository
//! (compressed with zstd), so a build needs no WordNet: one line per index
//! term or phrase (in the index's own
//! words: [`words`](super::discovery::words), stemmed, stop words dropped), then a tab and up to
//! [`MAX_RELATED`] related terms, each with a weight digit 1–9 (tenths).
//! Lines are sorted by bytes, so a look-up is a binary search over the
//! text, unpacked once on the first search that needs it (about 4 MB):
//! no parsing, no allocation per look-up. The WordNet licence is in
//! `LICENSE-WordNet` beside it.
//!
//! The file is regenerated with
//! `TOOLHOST_WRITE_LEXICON=1 cargo test -p toolhost --lib lexicon`; the same
//! test checks it is current (it needs `/usr/share/wordnet`).

/// The lexicon, compressed with zstd: about a fifth of its size in the
/// binary.
static COMPRESSED: &[u8] = include_bytes!("lexicon.tsv.zst");

/// The lexicon's text, unpacked on the first search that needs it.
fn lexicon() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        zstd::decode_all(COMPRESSED)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_default()
    })
}

/// Most related terms kept per entry.
pub const MAX_RELATED: usize = 12;

/// Longest phrase (in index terms) an entry may have.
const MAX_PHRASE: usize = 3;

/// The line of `key` in `data` (sorted by bytes), after its tab.
fn lookup<'a>(data: &'a str, key: &str) -> Option<&'a str> {
    let b = data.as_bytes();
    // `lo` is always the start of a line; `hi` the end of the range.
    let (mut lo, mut hi) = (0usize, b.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let start = b[..mid]
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |i| i + 1)
            .max(lo);
        let end = b[start..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |i| start + i);
        let (k, rest) = data[start..end].split_once('\t')?;
        match k.cmp(key) {
            std::cmp::Ordering::Equal => return Some(rest),
            std::cmp::Ordering::Less => lo = end + 1,
            std::cmp::Ordering::Greater => hi = start,
        }
    }
    None
}

/// The terms related to the words and phrases of `terms` (a query's index
/// terms in their order), each with its weight in (0, 1], the largest
/// where several entries name it; terms of the query itself are left out.
pub fn related(terms: &[String]) -> Vec<(String, f64)> {
    related_in(lexicon(), terms)
}

fn related_in(data: &str, terms: &[String]) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for n in 1..=MAX_PHRASE.min(terms.len()) {
        for window in terms.windows(n) {
            let key = window.join(" ");
            let Some(line) = lookup(data, &key) else {
                continue;
            };
            let mut parts = line.split(' ');
            while let (Some(term), Some(w)) = (parts.next(), parts.next()) {
                let w = f64::from(w.parse::<u8>().unwrap_or(0)) / 10.0;
                if w <= 0.0 || terms.iter().any(|t| t == term) {
                    continue;
                }
                match out.iter_mut().find(|(t, _)| t == term) {
                    Some(e) => e.1 = e.1.max(w),
                    None => out.push((term.to_owned(), w)),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::discovery::words;
    use super::*;

    fn q(s: &str) -> Vec<String> {
        words(s)
    }

    #[test]
    fn lookup_finds_every_line_and_nothing_else() {
        let data = "a\tx 5\nab\ty 3\nb c\tz 9\nd\tw 1";
        assert_eq!(lookup(data, "a"), Some("x 5"));
        assert_eq!(lookup(data, "ab"), Some("y 3"));
        assert_eq!(lookup(data, "b c"), Some("z 9"));
        assert_eq!(lookup(data, "d"), Some("w 1"));
        for absent in ["", "aa", "b", "c", "e", "0"] {
            assert_eq!(lookup(data, absent), None, "{absent}");
        }
        assert_eq!(lookup("", "a"), None);
    }

    #[test]
    fn every_entry_of_the_lexicon_is_found_and_well_formed() {
        let mut last = "";
        let mut n = 0;
        let text = lexicon();
        assert!(!text.is_empty());
        for line in text.lines() {
            let (key, rest) = line.split_once('\t').expect("a tab");
            assert!(key > last, "{key:?} after {last:?}: not sorted");
            last = key;
            let parts: Vec<&str> = rest.split(' ').collect();
            assert!(
                parts.len() % 2 == 0 && parts.len() <= 2 * MAX_RELATED,
                "{line}"
            );
            for pair in parts.chunks(2) {
                assert!(matches!(pair[1].parse::<u8>(), Ok(1..=9)), "{line}");
            }
            // Every 97th entry: the binary search finds it.
            if n % 97 == 0 {
                assert_eq!(lookup(text, key), Some(rest));
            }
            n += 1;
        }
        assert!(n > 10_000, "{n} entries");
    }

    #[test]
    fn words_meet_the_words_tools_use() {
        let has = |query: &str, term: &str| {
            let r = related(&q(query));
            let t = &words(term)[0];
            assert!(
                r.iter().any(|(x, _)| x == t),
                "{query:?} → {term:?} not in {r:?}"
            );
        };
        has("relocate", "move");
        has("kilogram", "mass");
        has("kilogram", "unit");
        has("warm", "temperature");
        has("pound", "unit");
    }

    #[test]
    fn phrases_are_looked_up_and_the_query_own_terms_left_out() {
        let terms = q("clean up the desk");
        let r = related(&terms);
        let tidy = &words("tidy")[0];
        assert!(r.iter().any(|(t, _)| t == tidy), "{r:?}");
        for own in &terms {
            assert!(!r.iter().any(|(t, _)| t == own), "{own} in {r:?}");
        }
        assert!(r.iter().all(|(_, w)| *w > 0.0 && *w <= 1.0), "{r:?}");
    }

    /// Generates `lexicon.tsv` from `/usr/share/wordnet` with
    /// `TOOLHOST_WRITE_LEXICON=1`; otherwise checks the committed file is
    /// what the installed WordNet gives. Fails, naming the package, without
    /// WordNet.
    #[test]
    fn lexicon_is_current() {
        let dir = std::path::Path::new("/usr/share/wordnet");
        assert!(
            dir.join("data.noun").exists(),
            "/usr/share/wordnet is missing: apt-get install wordnet-base"
        );
        let made = generate::lexicon(dir).expect("reading WordNet");
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tools/lexicon.tsv.zst");
        if std::env::var_os("TOOLHOST_WRITE_LEXICON").is_some() {
            let packed = zstd::encode_all(made.as_bytes(), 19).unwrap();
            std::fs::write(&path, &packed).unwrap();
            eprintln!(
                "wrote {} ({} bytes, {} unpacked)",
                path.display(),
                packed.len(),
                made.len()
            );
            return;
        }
        assert!(
            made == lexicon(),
            "lexicon.tsv.zst is not what WordNet gives: TOOLHOST_WRITE_LEXICON=1 cargo test -p toolhost --lib lexicon"
        );
    }

    /// Reading WordNet's database files (`data.*`, `index.*`; the format is
    /// WordNet's `wndb(5)`).
    mod generate {
        use super::super::{MAX_PHRASE, MAX_RELATED};
        use super::words;
        use std::collections::{BTreeMap, HashMap, HashSet};
        use std::path::Path;

        /// Senses of a word read: the first, and those after it that
        /// WordNet's tagged texts used, up to this many.
        const MAX_SENSES: usize = 3;
        /// Steps up the hypernym tree, by part of speech.
        const NOUN_UP: usize = 3;
        const VERB_UP: usize = 2;
        /// A noun hypernym this close to the root ("entity", "object",
        /// "abstraction", "whole") says nothing about a task.
        const MIN_NOUN_DEPTH: usize = 4;
        /// Weights: a synonym; each step up keeps this share; the noun an
        /// adjective describes, a similar adjective, a derived form.
        const SYNONYM: f64 = 1.0;
        const UP: f64 = 0.7;
        const ATTRIBUTE: f64 = 0.8;
        const DERIVED: f64 = 0.6;

        /// Words of phrasal verbs ("stash away", "clean up") that say
        /// nothing alone.
        const PARTICLES: &[&str] = &[
            "up", "down", "away", "off", "over", "aside", "back", "along", "around", "through",
            "together", "apart",
        ];

        type Id = (u8, u32);

        struct Synset {
            lemmas: Vec<String>,
            /// (pointer symbol, target, source word number; 0 for the
            /// whole synset).
            pointers: Vec<(String, Id, usize)>,
        }

        fn file_of(pos: &str) -> u8 {
            match pos {
                "n" => b'n',
                "v" => b'v',
                "a" | "s" => b'a',
                _ => b'r',
            }
        }

        fn lemma_text(raw: &str) -> String {
            // Adjective markers: "(a)", "(p)", "(ip)".
            let raw = raw.split('(').next().unwrap_or(raw);
            raw.replace('_', " ").to_lowercase()
        }

        fn read_data(dir: &Path, synsets: &mut HashMap<Id, Synset>) -> std::io::Result<()> {
            for pos in ["noun", "verb", "adj", "adv"] {
                let text = std::fs::read_to_string(dir.join(format!("data.{pos}")))?;
                for line in text.lines().filter(|l| !l.starts_with(' ')) {
                    let head = line.split(" | ").next().unwrap_or(line);
                    let f: Vec<&str> = head.split_whitespace().collect();
                    let (Ok(offset), Some(kind)) = (f[0].parse::<u32>(), f.get(2)) else {
                        continue;
                    };
                    let w_cnt = usize::from_str_radix(f[3], 16).unwrap_or(0);
                    let lemmas = (0..w_cnt).map(|i| lemma_text(f[4 + 2 * i])).collect();
                    let mut i = 4 + 2 * w_cnt;
                    let p_cnt: usize = f[i].parse().unwrap_or(0);
                    i += 1;
                    let mut pointers = Vec::with_capacity(p_cnt);
                    for _ in 0..p_cnt {
                        let target = (file_of(f[i + 2]), f[i + 1].parse().unwrap_or(0));
                        let source = usize::from_str_radix(&f[i + 3][..2], 16).unwrap_or(0);
                        pointers.push((f[i].to_owned(), target, source));
                        i += 4;
                    }
                    synsets.insert((file_of(kind), offset), Synset { lemmas, pointers });
                }
            }
            Ok(())
        }

        /// Every lemma's senses, most used first, by part of speech.
        /// A lemma, its data file, its senses (most used first) and how
        /// many of them the tagged texts used.
        type IndexEntry = (String, u8, Vec<u32>, usize);

        fn read_index(dir: &Path) -> std::io::Result<Vec<IndexEntry>> {
            let mut out = Vec::new();
            for pos in ["noun", "verb", "adj", "adv"] {
                let text = std::fs::read_to_string(dir.join(format!("index.{pos}")))?;
                for line in text.lines().filter(|l| !l.starts_with(' ')) {
                    let f: Vec<&str> = line.split_whitespace().collect();
                    let p_cnt: usize = f[3].parse().unwrap_or(0);
                    let tagged: usize = f[5 + p_cnt].parse().unwrap_or(0);
                    let senses = f[6 + p_cnt..]
                        .iter()
                        .filter_map(|s| s.parse().ok())
                        .collect();
                    out.push((lemma_text(f[0]), file_of(f[1]), senses, tagged));
                }
            }
            Ok(out)
        }

        /// Each noun synset's distance from the root of its tree.
        fn depths(synsets: &HashMap<Id, Synset>) -> HashMap<Id, usize> {
            fn depth(
                id: Id,
                s: &HashMap<Id, Synset>,
                memo: &mut HashMap<Id, usize>,
                guard: usize,
            ) -> usize {
                if let Some(d) = memo.get(&id) {
                    return *d;
                }
                let ups: Vec<Id> = s
                    .get(&id)
                    .map(|x| {
                        x.pointers
                            .iter()
                            .filter(|p| p.0 == "@" || p.0 == "@i")
                            .map(|p| p.1)
                            .collect()
                    })
                    .unwrap_or_default();
                let d = if ups.is_empty() || guard > 40 {
                    0
                } else {
                    1 + ups
                        .iter()
                        .map(|u| depth(*u, s, memo, guard + 1))
                        .min()
                        .unwrap_or(0)
                };
                memo.insert(id, d);
                d
            }
            let mut memo = HashMap::new();
            for id in synsets.keys().filter(|k| k.0 == b'n') {
                depth(*id, synsets, &mut memo, 0);
            }
            memo
        }

        pub fn lexicon(dir: &Path) -> std::io::Result<String> {
            let mut synsets = HashMap::new();
            read_data(dir, &mut synsets)?;
            let depth = depths(&synsets);
            let index = read_index(dir)?;
            // Words of everyday use: those WordNet's tagged texts used. Tool
            // descriptions are written in them, so only they are worth
            // adding to a query.
            let common: HashSet<String> = index
                .iter()
                .filter(|e| e.3 > 0)
                .flat_map(|e| words(&e.0))
                .collect();
            // (weight, order found) per related term, per entry.
            let mut entries: BTreeMap<String, HashMap<String, (f64, usize)>> = BTreeMap::new();
            for (lemma, file, senses, tagged) in index {
                let key_terms = words(&lemma);
                if key_terms.is_empty()
                    || key_terms.len() > MAX_PHRASE
                    || (key_terms.len() > 1 && tagged == 0)
                {
                    continue;
                }
                let key = key_terms.join(" ");
                if key.contains(['\t', '\n'])
                    || !key.chars().all(|c| c.is_alphanumeric() || c == ' ')
                {
                    continue;
                }
                let mut found: HashMap<String, (f64, usize)> = HashMap::new();
                let mut add = |text: &str, w: f64| {
                    for t in words(text) {
                        if key_terms.contains(&t)
                            || !common.contains(&t)
                            || PARTICLES.contains(&t.as_str())
                        {
                            continue;
                        }
                        let order = found.len();
                        let e = found.entry(t).or_insert((0.0, order));
                        e.0 = e.0.max(w);
                    }
                };
                let used = senses.len().min(MAX_SENSES).min(tagged.max(1));
                for offset in &senses[..used] {
                    let id = (file, *offset);
                    let Some(s) = synsets.get(&id) else { continue };
                    let word_no = s
                        .lemmas
                        .iter()
                        .position(|l| *l == lemma)
                        .map_or(0, |i| i + 1);
                    for l in &s.lemmas {
                        add(l, SYNONYM);
                    }
                    // Up the hypernym tree, breadth first.
                    let up = if file == b'n' { NOUN_UP } else { VERB_UP };
                    let mut level = vec![id];
                    let mut w = 1.0;
                    for _ in 0..up {
                        w *= UP;
                        let next: Vec<Id> = level
                            .iter()
                            .filter_map(|i| synsets.get(i))
                            .flat_map(|x| x.pointers.iter())
                            .filter(|p| p.0 == "@" || p.0 == "@i")
                            .map(|p| p.1)
                            .filter(|t| {
                                t.0 != b'n' || depth.get(t).copied().unwrap_or(0) >= MIN_NOUN_DEPTH
                            })
                            .collect();
                        for t in &next {
                            for l in &synsets[t].lemmas {
                                add(l, w);
                            }
                        }
                        level = next;
                    }
                    for (sym, target, source) in &s.pointers {
                        let w = match sym.as_str() {
                            "=" | "&" | "\\" => ATTRIBUTE,
                            "+" if *source == word_no => DERIVED,
                            _ => continue,
                        };
                        if let Some(t) = synsets.get(target) {
                            for l in &t.lemmas {
                                add(l, w);
                            }
                        }
                    }
                }
                let entry = entries.entry(key).or_default();
                let base = entry.len();
                for (t, (w, order)) in found {
                    let e = entry.entry(t).or_insert((0.0, base + order));
                    e.0 = e.0.max(w);
                }
            }
            let mut out = String::new();
            for (key, related) in entries {
                let mut related: Vec<(String, u8, usize)> = related
                    .into_iter()
                    .map(|(t, (w, order))| (t, (w * 10.0).round().clamp(1.0, 9.0) as u8, order))
                    .filter(|(t, _, _)| !t.contains(['\t', '\n', ' ']))
                    .collect();
                // Heaviest first; among equals, the most used sense's first.
                related.sort_by(|a, b| {
                    b.1.cmp(&a.1)
                        .then(a.2.cmp(&b.2))
                        .then_with(|| a.0.cmp(&b.0))
                });
                related.truncate(MAX_RELATED);
                if related.is_empty() {
                    continue;
                }
                out.push_str(&key);
                out.push('\t');
                let parts: Vec<String> =
                    related.iter().map(|(t, w, _)| format!("{t} {w}")).collect();
                out.push_str(&parts.join(" "));
                out.push('\n');
            }
            Ok(out)
        }
    }
}
