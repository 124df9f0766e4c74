//! Network origins: one type, one parser, one grammar.
//!
//! Capability tokens (`net=` caveats), tool descriptors
//! (`needs.network-hosts`), the CLI's `--allow-net` and the sandbox's
//! outgoing-HTTP wall all speak of origins through [`Origin`], so a value is
//! accepted by all of them or refused by all of them, with the same message.
//!
//! # Grammar
//!
//! ```text
//! origin = scheme "://" host [ ":" port ] [ "/" ]
//! scheme = "http" | "https"                   (any case; written lowercase)
//! host   = dns-name | ipv4 | "[" ipv6 "]"     (any case; written lowercase)
//! port   = 1..65535                           (default: 80 for http, 443 for https)
//! ```
//!
//! The canonical text is always `scheme://host:port`, port explicit:
//! `HTTPS://Api.Example.com/` is `https://api.example.com:443`.
//!
//! - **Schemes.** Only `http` and `https`: the sandbox's only way out is
//!   `wasi:http/outgoing-handler`, which sends HTTP requests and has no
//!   upgrade to WebSocket, so a `ws://`/`wss://` (or `ftp://`) grant could
//!   never be honoured. It is refused where it is written (mint, attenuate,
//!   token decode, descriptor lint, `--allow-net`), never dropped later.
//! - **Names.** ASCII letters, digits and `-` in dot-separated labels of 1 to
//!   63 characters (no leading or trailing `-`), at most 253 characters, no
//!   trailing dot. Internationalized names are written in their `xn--` form.
//! - **Numeric hosts.** An IPv4 host is a dotted quad (`127.0.0.1`) and an
//!   IPv6 host is bracketed (`[::1]`). Every other numeric spelling —
//!   `127.1`, `0x7f.0.0.1`, `2130706433`, `127.0.0.01` — is refused: a
//!   name whose last label is all digits (or hex) is read by resolvers as an
//!   address, which would let a grant name an address without looking like
//!   one.
//! - **Nothing else.** No user info (`user@host`), and for an origin no
//!   path, query or fragment ([`Origin::from_url`] takes a URL's origin and
//!   ignores them).
//!
//! Parsing is done by [`http::Uri`]; this module adds the rules above.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use serde::{Serialize, Serializer};

/// The value a tool declares in `needs.network-hosts` to mean "whatever
/// origins the caller grants" (for tools such as `http_get` that fetch
/// caller-chosen URLs). It is not an origin and never matches one by itself.
pub const ANY_ORIGIN: &str = "any";

/// Longest rendering of a refused value in an [`OriginError`], in bytes.
const MAX_SHOWN_BYTES: usize = 100;

/// Why a text is not an origin. Its message names the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a network origin: {reason}")]
pub struct OriginError {
    /// The text as given (clipped to 100 bytes, the cut marked with `…`).
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

/// A scheme the sandbox can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// 80 or 443.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// The host part of an origin.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    /// A literal address: the origin names it explicitly.
    Ip(IpAddr),
    /// `localhost`: loopback by definition (RFC 6761), never asked of DNS.
    Localhost,
    /// A DNS name (lowercase ASCII, no trailing dot).
    Name(String),
}

/// A network origin in canonical form. Equality, order and hashing are
/// those of the canonical text `scheme://host:port`.
#[derive(Debug, Clone)]
pub struct Origin {
    scheme: Scheme,
    host: Host,
    port: u16,
    text: Arc<str>,
}

impl Origin {
    /// Parses an origin: `scheme://host[:port]` with at most a trailing `/`
    /// (see the [module docs](self) for the grammar).
    pub fn parse(s: &str) -> Result<Origin, OriginError> {
        Origin::parse_inner(s, false)
    }

    /// The origin of a URL: like [`Origin::parse`] but ignores any path,
    /// query or fragment.
    pub fn from_url(s: &str) -> Result<Origin, OriginError> {
        Origin::parse_inner(s, true)
    }

    /// The origin a request goes to.
    pub fn of_uri(uri: &http::Uri) -> Result<Origin, OriginError> {
        Origin::from_uri(uri, true).map_err(|reason| OriginError {
            value: clip(&uri.to_string()),
            reason,
        })
    }

    fn parse_inner(s: &str, url: bool) -> Result<Origin, OriginError> {
        let bad = |reason: String| OriginError {
            value: clip(s),
            reason,
        };
        if !s.contains("://") {
            return Err(bad("expected scheme://host:port".into()));
        }
        let uri: http::Uri = s.parse().map_err(|e| bad(format!("{e}")))?;
        Origin::from_uri(&uri, url).map_err(bad)
    }

    fn from_uri(uri: &http::Uri, url: bool) -> Result<Origin, String> {
        let scheme = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") => Scheme::Http,
            Some(s) if s.eq_ignore_ascii_case("https") => Scheme::Https,
            Some(s) => {
                return Err(format!(
                    "scheme `{}` cannot be granted; the sandbox speaks only http and https",
                    clip(s)
                ))
            }
            None => return Err("expected scheme://host:port".into()),
        };
        let authority = uri
            .authority()
            .ok_or_else(|| "expected scheme://host:port".to_string())?;
        if !url {
            let path_ok = matches!(uri.path(), "" | "/");
            if !path_ok || uri.query().is_some() {
                return Err("an origin has no path, query or fragment".into());
            }
        }
        let authority = authority.as_str();
        if authority.contains('@') {
            return Err("user info is not allowed".into());
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (addr, after) = v6.split_once(']').ok_or("unclosed `[`")?;
            let ip: Ipv6Addr = addr.parse().map_err(|_| "bad IPv6 address")?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or("junk after `]`")?),
            };
            (Host::Ip(IpAddr::V6(ip)), port)
        } else {
            let (host, port) = match authority.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            };
            (parse_host(host)?, port)
        };
        let port = match port {
            None => scheme.default_port(),
            Some(p) => {
                if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
                    return Err("bad port".into());
                }
                match p.parse::<u16>() {
                    Ok(0) | Err(_) => return Err("port must be 1 to 65535".into()),
                    Ok(n) => n,
                }
            }
        };
        Ok(Origin::new(scheme, host, port))
    }

    fn new(scheme: Scheme, host: Host, port: u16) -> Origin {
        let host_text = match &host {
            Host::Ip(IpAddr::V6(ip)) => format!("[{ip}]"),
            Host::Ip(IpAddr::V4(ip)) => ip.to_string(),
            Host::Localhost => "localhost".into(),
            Host::Name(n) => n.clone(),
        };
        let text = Arc::from(format!("{}://{host_text}:{port}", scheme.as_str()));
        Origin {
            scheme,
            host,
            port,
            text,
        }
    }

    /// The canonical text, `scheme://host:port`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &str {
        self.scheme.as_str()
    }

    /// The scheme as a value.
    pub fn scheme_kind(&self) -> Scheme {
        self.scheme
    }

    /// The host as written in the canonical text (`[::1]` bracketed).
    pub fn host(&self) -> &str {
        let rest = &self.text[self.scheme.as_str().len() + 3..];
        rest.rsplit_once(':').map_or(rest, |(h, _)| h)
    }

    /// The host as a value: an address, `localhost` or a DNS name.
    pub fn host_kind(&self) -> &Host {
        &self.host
    }

    /// The port, explicit or the scheme's default.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// A host name or IPv4 literal (see the module docs for numeric hosts).
fn parse_host(host: &str) -> Result<Host, String> {
    let host = host.to_ascii_lowercase();
    if host.is_empty() {
        return Err("empty host".into());
    }
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(Host::Ip(IpAddr::V4(ip)));
    }
    if !host
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b".-".contains(&b))
    {
        return Err("bad host name (ASCII letters, digits, `.` and `-`)".into());
    }
    if host.len() > 253 {
        return Err("host name longer than 253 characters".into());
    }
    if host.ends_with('.') {
        return Err("host name with a trailing dot".into());
    }
    for label in host.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err("host name labels are 1 to 63 characters".into());
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("host name labels neither start nor end with `-`".into());
        }
    }
    let last = host.rsplit('.').next().unwrap_or("");
    if last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x") {
        return Err("a numeric host must be a dotted-quad IPv4 address (or [IPv6])".into());
    }
    if host == "localhost" {
        return Ok(Host::Localhost);
    }
    Ok(Host::Name(host))
}

fn clip(s: &str) -> String {
    crate::text::clip_bytes(s, MAX_SHOWN_BYTES).into_owned()
}

impl PartialEq for Origin {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Origin {}

impl Hash for Origin {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl PartialOrd for Origin {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Origin {
    fn cmp(&self, other: &Self) -> Ordering {
        self.text.cmp(&other.text)
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Origin {
    type Err = OriginError;
    fn from_str(s: &str) -> Result<Origin, OriginError> {
        Origin::parse(s)
    }
}

impl Serialize for Origin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        Origin::parse(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .to_string()
    }

    #[test]
    fn canonical_form_has_an_explicit_port() {
        for (input, expected) in [
            ("HTTP://Example.COM", "http://example.com:80"),
            ("https://example.com/", "https://example.com:443"),
            (
                "https://api.example.com:8443",
                "https://api.example.com:8443",
            ),
            ("http://127.0.0.1:8123", "http://127.0.0.1:8123"),
            ("http://[0:0::1]:80", "http://[::1]:80"),
            ("http://[::1]", "http://[::1]:80"),
            ("http://localhost:9", "http://localhost:9"),
            (
                "https://xn--bcher-kva.example",
                "https://xn--bcher-kva.example:443",
            ),
        ] {
            assert_eq!(canon(input), expected, "{input}");
        }
        let o = Origin::parse("http://[::1]:8080").unwrap();
        assert_eq!((o.scheme(), o.host(), o.port()), ("http", "[::1]", 8080));
        assert_eq!(o.host_kind(), &Host::Ip("::1".parse().unwrap()));
        assert_eq!(
            Origin::parse("http://localhost").unwrap().host_kind(),
            &Host::Localhost
        );
    }

    #[test]
    fn what_the_sandbox_cannot_honour_is_refused_naming_the_value() {
        for (bad, why) in [
            ("example.com", "expected scheme://host:port"),
            ("ws://example.com", "scheme `ws`"),
            ("wss://example.com:443", "scheme `wss`"),
            ("ftp://example.com:21", "scheme `ftp`"),
            ("http://example.com/path", "no path"),
            ("http://example.com/?q", "no path"),
            ("http://user@example.com", "user info"),
            ("http://example.com:0", "1 to 65535"),
            ("http://example.com:99999", ""),
            ("http://example.com:", "bad port"),
            ("http://127.1:80", "dotted-quad"),
            ("http://0x7f.0.0.1:80", "dotted-quad"),
            ("http://2130706433:80", "dotted-quad"),
            ("http://127.0.0.01", "dotted-quad"),
            ("https://api.example.com.", "trailing dot"),
            ("https://a..b", "1 to 63"),
            ("https://-a.example", "`-`"),
            ("https://a_b.example", "bad host name"),
            ("http://exa mple.com", ""),
            ("http://[::1", ""),
            ("http://[::g]:80", ""),
            ("http://", ""),
            ("https://bücher.example", ""),
        ] {
            let e = Origin::parse(bad).expect_err(bad);
            assert_eq!(e.value, bad, "{bad}");
            assert!(e.reason.contains(why), "{bad}: {e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("`{bad}` is not a network origin: ")),
                "{e}"
            );
        }
        let long = format!("ws://{}", "a".repeat(300));
        assert!(Origin::parse(&long).unwrap_err().value.len() <= 100 + "…".len());
    }

    #[test]
    fn urls_give_their_origin() {
        assert_eq!(
            Origin::from_url("HTTPS://api.EXAMPLE.com/v1/things?q=1")
                .unwrap()
                .as_str(),
            "https://api.example.com:443"
        );
        assert!(Origin::from_url("https://evil.com@api.example.com/").is_err());
        let uri: http::Uri = "http://[::1]:8080/x".parse().unwrap();
        assert_eq!(Origin::of_uri(&uri).unwrap().as_str(), "http://[::1]:8080");
    }

    #[test]
    fn equality_and_order_are_those_of_the_canonical_text() {
        let a = Origin::parse("https://a.example").unwrap();
        let b = Origin::parse("https://A.example:443/").unwrap();
        assert_eq!(a, b);
        let mut v = [
            Origin::parse("https://b.example").unwrap(),
            Origin::parse("http://[::1]:8080").unwrap(),
            a,
        ];
        v.sort();
        let texts: Vec<&str> = v.iter().map(Origin::as_str).collect();
        assert_eq!(
            texts,
            [
                "http://[::1]:8080",
                "https://a.example:443",
                "https://b.example:443"
            ]
        );
    }
}
