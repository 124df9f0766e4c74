//! The trigger pass: which of the rules' trigger literals (and the JSON
//! guard's) a text holds, ASCII case ignored, in one pass.
//!
//! The literals make one Aho-Corasick DFA (standard semantics: the state
//! after each byte lists every literal ending there). Stepping one DFA
//! through a text is bound by the latency of its table loads: each step
//! needs the state the step before produced (~570 MB/s here with
//! aho-corasick's own overlapping search). So a long text is cut into
//! [`STREAMS`] segments and one loop steps a DFA through each at once,
//! their loads independent of one another: ~1.1 GB/s on a text with no
//! literal (the `redact` benchmark's file-sized figures include it).
//!
//! Each stream starts in the start state at its segment's first byte and
//! reads on past the segment's end by the longest literal less one byte,
//! so every occurrence that starts in a segment is seen whole by that
//! segment's stream; one that starts in the overlap is seen again by the
//! next stream, which changes nothing in a set of hits. An automaton
//! started at some byte reports only occurrences that start at or after
//! it, so no stream sees one that is not there.

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::dfa::DFA;
use aho_corasick::{Anchored, MatchKind, StartKind};

/// Segments stepped through at once.
const STREAMS: usize = 4;

/// A text shorter than this is stepped through in one stream.
const SPLIT_MIN: usize = 256;

/// The trigger literals' automaton and the rules each literal triggers.
pub(super) struct Triggers {
    dfa: DFA,
    /// Bit `i`: the literal triggers rule `i` of the table (zero for the
    /// JSON guard's own literals).
    rules: Vec<u64>,
    /// The longest literal's length less one.
    overlap: usize,
}

/// What a text holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Hits {
    /// The rules (bit `i`: rule `i`) a literal of which occurs.
    pub rules: u64,
    /// Whether any literal occurs, one of the guard's own included.
    pub any: bool,
}

impl Triggers {
    /// `literals`: each literal and the rule it triggers (`None`: one of
    /// the JSON guard's, no rule's).
    pub(super) fn new(literals: &[(&str, Option<usize>)]) -> Triggers {
        let dfa = DFA::builder()
            .match_kind(MatchKind::Standard)
            .ascii_case_insensitive(true)
            .start_kind(StartKind::Unanchored)
            .prefilter(false)
            .build(literals.iter().map(|(l, _)| l))
            .expect("trigger literals compile");
        Triggers {
            dfa,
            rules: literals
                .iter()
                .map(|(_, rule)| rule.map_or(0, |r| 1u64 << r))
                .collect(),
            overlap: literals.iter().map(|(l, _)| l.len()).max().unwrap_or(1) - 1,
        }
    }

    /// The literals `text` holds.
    // `i` steps every lane at once: there is no one lane to iterate.
    #[allow(clippy::needless_range_loop)]
    pub(super) fn scan(&self, text: &[u8]) -> Hits {
        let mut hits = Hits::default();
        let start = self
            .dfa
            .start_state(Anchored::No)
            .expect("an unanchored start state");
        if text.len() < SPLIT_MIN {
            self.step(start, text, &mut hits);
            return hits;
        }
        // Segment `k` is `bounds[k]..bounds[k + 1]`; its stream reads on
        // to `ends[k]`.
        let segment = text.len().div_ceil(STREAMS);
        let bounds: [usize; STREAMS + 1] = std::array::from_fn(|k| (k * segment).min(text.len()));
        let ends: [usize; STREAMS] =
            std::array::from_fn(|k| (bounds[k + 1] + self.overlap).min(text.len()));
        // All streams step together as far as the shortest goes.
        let together = (0..STREAMS).map(|k| ends[k] - bounds[k]).min().unwrap_or(0);
        let lanes: [&[u8]; STREAMS] =
            std::array::from_fn(|k| &text[bounds[k]..bounds[k] + together]);
        let mut state = [start; STREAMS];
        for i in 0..together {
            for k in 0..STREAMS {
                let sid = self.dfa.next_state(Anchored::No, state[k], lanes[k][i]);
                state[k] = sid;
                if self.dfa.is_special(sid) {
                    self.hit(sid, &mut hits);
                }
            }
        }
        for k in 0..STREAMS {
            let rest = &text[bounds[k] + together..ends[k]];
            self.step(state[k], rest, &mut hits);
        }
        hits
    }

    /// Steps the DFA from `sid` through `bytes`; the state it ends in.
    fn step(&self, mut sid: StateID, bytes: &[u8], hits: &mut Hits) -> StateID {
        for &b in bytes {
            sid = self.dfa.next_state(Anchored::No, sid, b);
            if self.dfa.is_special(sid) {
                self.hit(sid, hits);
            }
        }
        sid
    }

    /// Adds the literals that end in state `sid` (a special state: a
    /// match, or the dead state a standard DFA never enters) to `hits`.
    #[cold]
    fn hit(&self, sid: StateID, hits: &mut Hits) {
        if !self.dfa.is_match(sid) {
            return;
        }
        hits.any = true;
        for i in 0..self.dfa.match_len(sid) {
            hits.rules |= self.rules[self.dfa.match_pattern(sid, i).as_usize()];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn triggers() -> Triggers {
        Triggers::new(&[
            ("sk-", Some(0)),
            ("sk-ant-", Some(1)),
            ("token", Some(2)),
            ("encryption", Some(3)),
            ("x-auth-token", None),
            ("\\u", None),
        ])
    }

    /// What a plain overlapping search finds: the reference.
    fn reference(text: &[u8]) -> Hits {
        let t = triggers();
        let ac = aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build([
                "sk-",
                "sk-ant-",
                "token",
                "encryption",
                "x-auth-token",
                "\\u",
            ])
            .unwrap();
        let mut hits = Hits::default();
        for m in ac.find_overlapping_iter(text) {
            hits.any = true;
            hits.rules |= t.rules[m.pattern().as_usize()];
        }
        hits
    }

    #[test]
    fn every_occurrence_counts_whatever_its_case_and_overlap() {
        let t = triggers();
        assert_eq!(t.scan(b"key: SK-ANT-abc").rules, 0b11);
        assert_eq!(t.scan(b"key: sk-abc").rules, 0b1);
        assert_eq!(
            t.scan(b"X-Auth-Token: x"),
            Hits {
                rules: 0b100,
                any: true
            }
        );
        assert_eq!(
            t.scan(b"\\u0041"),
            Hits {
                rules: 0,
                any: true
            }
        );
        assert_eq!(t.scan(b"tokencryption").rules, 0b1100);
        assert_eq!(t.scan(b"nothing here"), Hits::default());
        // `ſ` (U+017F) folds to `s` under Unicode rules, not here.
        assert_eq!(t.scan("ſk-".as_bytes()), Hits::default());
    }

    #[test]
    fn occurrences_at_every_segment_edge_are_seen() {
        let t = triggers();
        for len in [SPLIT_MIN - 1, SPLIT_MIN, 1000, 4097] {
            let segment = len.div_ceil(STREAMS);
            let edges = (1..STREAMS).map(|k| k * segment).chain([0, len]);
            for edge in edges {
                for at in edge.saturating_sub(12)..(edge + 3).min(len) {
                    for word in [&b"ENCRYPTION"[..], b"tokencryption", b"sk-", b"\\u"] {
                        let mut text = vec![b'.'; len];
                        let end = (at + word.len()).min(len);
                        text[at..end].copy_from_slice(&word[..end - at]);
                        assert_eq!(t.scan(&text), reference(&text), "len {len} at {at}");
                    }
                }
            }
        }
    }

    #[test]
    fn random_texts_agree_with_a_plain_search() {
        let alphabet = b"sk-antoKENcryptiox\\uAUTH. ";
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 1500) as usize;
            let text: Vec<u8> = (0..len)
                .map(|i| {
                    let r = x.rotate_left((i % 64) as u32) ^ (i as u64).wrapping_mul(0x2545_f491);
                    alphabet[(r % alphabet.len() as u64) as usize]
                })
                .collect();
            assert_eq!(t().scan(&text), reference(&text), "round {round}");
        }
        fn t() -> &'static Triggers {
            static T: std::sync::OnceLock<Triggers> = std::sync::OnceLock::new();
            T.get_or_init(triggers)
        }
    }
}
