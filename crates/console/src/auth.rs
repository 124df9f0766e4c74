//! Who may use the console: sessions, the cookie, CSRF and same-origin.
//!
//! The login form takes a token once; a good one opens a server-side
//! session whose random id travels in the cookie `toolhost_console`
//! (`HttpOnly; SameSite=Strict; Path=/console`). The cookie never holds the
//! token. Each session has its own random CSRF token, a hidden field of
//! every form; a POST without it, or from another origin (`Origin` not the
//! request's own host, or `Sec-Fetch-Site` other than `same-origin`), is
//! refused. Sessions end at logout, after [`SESSION_TTL`], or as soon as
//! their token is revoked or expires.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{header, HeaderMap};

use crate::Login;

/// The cookie's name.
pub const COOKIE: &str = "toolhost_console";

/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);

/// Most sessions kept; the oldest goes first.
pub const MAX_SESSIONS: usize = 256;

/// One logged-in browser.
pub struct Session {
    /// The cookie's value.
    pub id: String,
    /// The hidden field every form carries.
    pub csrf: String,
    /// Who, for decisions (`console:` and the token id).
    pub who: String,
    pub live: Box<dyn Fn() -> bool + Send + Sync>,
    opened: Instant,
}

/// The open sessions of this host.
#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
}

/// 32 random bytes as hex.
pub fn random_hex() -> String {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).expect("the OS random source");
    hex::encode(b)
}

impl Sessions {
    /// Opens a session for `login`; returns its id.
    pub fn open(&self, login: Login) -> (String, Arc<Session>) {
        let session = Arc::new(Session {
            id: random_hex(),
            csrf: random_hex(),
            who: login.who,
            live: login.live,
            opened: Instant::now(),
        });
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, s| s.opened.elapsed() < SESSION_TTL);
        while map.len() >= MAX_SESSIONS {
            let Some(oldest) = map.values().min_by_key(|s| s.opened).map(|s| s.id.clone()) else {
                break;
            };
            map.remove(&oldest);
        }
        map.insert(session.id.clone(), session.clone());
        (session.id.clone(), session)
    }

    /// The session named by the request's cookie, if open.
    pub fn get(&self, headers: &HeaderMap) -> Option<Arc<Session>> {
        let id = cookie(headers)?;
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let s = map.get(&id)?;
        (s.opened.elapsed() < SESSION_TTL && same_secret(&s.id, &id)).then(|| s.clone())
    }

    pub fn remove(&self, session: &Session) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(&session.id);
    }
}

/// The console cookie's value.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

/// Whether two secrets are equal, in time independent of where they
/// differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether a state-changing request comes from a page of this console:
/// `Sec-Fetch-Site`, when sent, is `same-origin`, and `Origin` is present
/// and names the request's own `Host`.
pub fn same_origin(headers: &HeaderMap) -> Result<(), &'static str> {
    if let Some(site) = headers.get("sec-fetch-site") {
        if site.as_bytes() != b"same-origin" {
            return Err("Forbidden: a cross-site request (Sec-Fetch-Site)");
        }
    }
    let mut origins = headers.get_all(header::ORIGIN).iter();
    let (Some(origin), None) = (origins.next(), origins.next()) else {
        return Err("Forbidden: a state-changing request needs one Origin header");
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or("Forbidden: no Host header")?;
    let origin = origin.to_str().unwrap_or("").to_ascii_lowercase();
    let host = host.to_ascii_lowercase();
    let own = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|rest| rest == host);
    if own {
        Ok(())
    } else {
        Err("Forbidden: the Origin is not this console's")
    }
}

/// An `application/x-www-form-urlencoded` body or query.
#[derive(Debug, Default)]
pub struct Form(Vec<(String, String)>);

impl Form {
    pub fn parse(bytes: &[u8]) -> Form {
        let text = String::from_utf8_lossy(bytes);
        Form(
            text.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (decode(k), decode(v))
                })
                .collect(),
        )
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `name` unless empty.
    pub fn nonempty(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.trim().is_empty())
    }
}

/// Percent-decoding, `+` as a space.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex_digit(b[i + 1]), hex_digit(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_same_origin_posts_pass() {
        let host = ("host", "127.0.0.1:8080");
        assert!(same_origin(&headers(&[host, ("origin", "http://127.0.0.1:8080")])).is_ok());
        assert!(same_origin(&headers(&[
            host,
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin")
        ]))
        .is_ok());
        for bad in [
            vec![host],
            vec![host, ("origin", "http://127.0.0.1:9090")],
            vec![host, ("origin", "http://localhost:8080")],
            vec![host, ("origin", "null")],
            vec![
                host,
                ("origin", "http://127.0.0.1:8080"),
                ("sec-fetch-site", "cross-site"),
            ],
            vec![
                host,
                ("origin", "http://127.0.0.1:8080"),
                ("origin", "http://127.0.0.1:8080"),
            ],
        ] {
            assert!(same_origin(&headers(&bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn forms_decode() {
        let f = Form::parse(b"a=1+2&b=%41%zz&c&token=x%3Dy");
        assert_eq!(f.get("a"), Some("1 2"));
        assert_eq!(f.get("b"), Some("A%zz"));
        assert_eq!(f.get("c"), Some(""));
        assert_eq!(f.get("token"), Some("x=y"));
        assert_eq!(f.get("d"), None);
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
    }
}
