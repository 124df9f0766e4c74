//! Outgoing HTTP for guests (`wasi:http/outgoing-handler`), behind a wall.
//!
//! A guest that imports `wasi:http` may ask for any URL; the host decides.
//! Every request passes `NetHooks::send_request`, which:
//!
//! 1. takes the request's origin (`scheme://host:port`, default ports 80
//!    and 443 made explicit, host lowercased) and refuses it with
//!    `http-request-denied` unless it is one of the call's granted origins,
//!    exactly: no DNS lookup happens for a refused origin, and with no
//!    granted origin every request is refused;
//! 2. finds the addresses to connect to: an IP literal is itself, `localhost`
//!    is `127.0.0.1` and `::1` (never asked of DNS), any other name is
//!    resolved by the host;
//! 3. refuses a *resolved name* whose addresses include a loopback, private,
//!    link-local, CGNAT, unspecified, multicast, reserved or cloud-metadata
//!    address (`destination-ip-prohibited`): a DNS name cannot smuggle a
//!    request into the host's own network (DNS rebinding). Only an origin
//!    granted with the literal address (`http://127.0.0.1:8123`,
//!    `http://[::1]:80`, `http://169.254.169.254:80`) or with `localhost`
//!    reaches those ranges;
//! 4. connects to the checked address itself (no second lookup), with TLS
//!    (webpki roots) for `https`, speaks HTTP/1.1 and never follows
//!    redirects: a 302 reaches the guest as a 302;
//! 5. bounds the whole exchange by the call's deadline: connect, first byte
//!    and every gap between body frames use the guest's request options,
//!    never more than the time left. Epoch interruption cannot stop a host
//!    call, so this is what keeps a guest blocked on a slow server from
//!    outliving its deadline;
//! 6. caps each response body at [`MAX_RESPONSE_BODY_BYTES`] (the guest then
//!    reads a `http-response-body-size` error) and each call at
//!    [`MAX_REQUESTS_PER_CALL`] requests.
//!
//! Every refusal is recorded (see `NetPolicy::denials`) so the call's
//! outcome can say what was refused and why, and every request let through
//! to a granted origin is recorded too (`NetPolicy::requested`: the URL,
//! without user info, as the guest asked for it): the call's observation
//! lists them as its network provenance, derived here, not from the plugin. Raw sockets (`wasi:sockets`
//! TCP/UDP) and `ip-name-lookup` stay denied in every sandbox; this module
//! is the only way out.
//!
//! Origins here are the wire format shared with capabilities and
//! descriptors: `scheme://host:port`. Only `http` and `https` can be granted.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use toolhost_base::origin::{Host, Origin, OriginError, Scheme};
use toolhost_base::text::clip_bytes;

pub use toolhost_base::origin::ANY_ORIGIN;

/// Largest response body a guest can read, per response.
pub const MAX_RESPONSE_BODY_BYTES: u64 = 8 << 20;

/// Most outgoing requests one call may start.
pub const MAX_REQUESTS_PER_CALL: usize = 64;

/// How long a response's connection driver may outlive the call's deadline.
const IO_GRACE: Duration = Duration::from_secs(2);

/// Longest URL recorded as a call's network provenance, in bytes.
const MAX_RECORDED_URL_BYTES: usize = 1024;

/// Most refusals kept per call (the rest are counted).
const MAX_RECORDED_DENIALS: usize = 16;

/// Normalizes an origin (`HTTP://Example.com` → `http://example.com:80`):
/// see [`toolhost_base::origin`] for the grammar. Only `http` and `https` origins
/// are accepted.
pub fn normalize_origin(s: &str) -> Result<String, OriginError> {
    Origin::parse(s).map(|o| o.to_string())
}

/// The origins a call may contact: the tool's declared `network_hosts`
/// intersected with the caller's `granted` origins, normalized, sorted and
/// without duplicates.
///
/// A tool that declares [`ANY_ORIGIN`] (`"any"`) gets every granted origin;
/// one that declares nothing gets none. `any` is a declaration only: on the
/// granted side it is no wildcard and grants no origin (every origin a
/// caller grants is named). Any other entry, on either side, that is not an
/// origin is an error naming it, never silently left out (descriptors and
/// capability tokens are checked with the same parser when they are loaded
/// or minted, so this only meets one from a hand-built scope).
pub fn net_grant(declared: &[String], granted: &[String]) -> Result<Vec<String>, OriginError> {
    let granted: Vec<Origin> = granted
        .iter()
        .filter(|g| *g != ANY_ORIGIN)
        .map(|g| Origin::parse(g))
        .collect::<Result<_, _>>()?;
    let any = declared.iter().any(|d| d == ANY_ORIGIN);
    let declared: Vec<Origin> = declared
        .iter()
        .filter(|d| *d != ANY_ORIGIN)
        .map(|d| Origin::parse(d))
        .collect::<Result<_, _>>()?;
    let mut out: Vec<Origin> = granted
        .into_iter()
        .filter(|g| any || declared.contains(g))
        .collect();
    out.sort();
    out.dedup();
    Ok(out.into_iter().map(|o| o.to_string()).collect())
}

/// Why an address may not be reached through a DNS name, if it may not.
pub(crate) fn special_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    let why = match o {
        [169, 254, 169, 254] => "cloud metadata",
        [0, ..] => "unspecified (0.0.0.0/8)",
        [127, ..] => "loopback",
        [10, ..] => "private (10.0.0.0/8)",
        [172, b, ..] if (16..32).contains(&b) => "private (172.16.0.0/12)",
        [192, 168, ..] => "private (192.168.0.0/16)",
        [169, 254, ..] => "link-local",
        [100, b, ..] if (64..128).contains(&b) => "shared address space (100.64.0.0/10)",
        [192, 0, 0, _] => "IETF protocol assignments (192.0.0.0/24)",
        [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] => "documentation",
        [198, b, ..] if b == 18 || b == 19 => "benchmarking (198.18.0.0/15)",
        [a, ..] if (224..240).contains(&a) => "multicast",
        [a, ..] if a >= 240 => "reserved (240.0.0.0/4)",
        _ => return None,
    };
    Some(why)
}

fn special_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some("cloud metadata");
    }
    // Addresses that carry an IPv4 address: judge the IPv4 address.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return special_v4(v4);
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return special_v4(v4);
    }
    let why = match s[0] {
        0 => "reserved (::/8, IPv4-compatible)",
        0x2002 => "6to4 (2002::/16)",
        0x2001 if s[1] == 0 => "Teredo (2001::/32)",
        0x2001 if s[1] == 0xdb8 => "documentation",
        0x100 if s[1..4] == [0, 0, 0] => "discard (100::/64)",
        x if x & 0xfe00 == 0xfc00 => "unique local (fc00::/7)",
        x if x & 0xffc0 == 0xfe80 => "link-local (fe80::/10)",
        x if x & 0xffc0 == 0xfec0 => "site-local (fec0::/10)",
        x if x & 0xff00 == 0xff00 => "multicast",
        _ => return None,
    };
    Some(why)
}

/// The network grant of one call, shared by its requests.
#[derive(Debug)]
pub(crate) struct NetPolicy {
    origins: Vec<Origin>,
    deadline: Instant,
    requests: AtomicUsize,
    denials: Mutex<Denials>,
    /// URLs of the requests let through, in order, without duplicates.
    requested: Mutex<Vec<String>>,
}

#[derive(Debug, Default)]
struct Denials {
    kept: Vec<String>,
    omitted: usize,
}

impl NetPolicy {
    /// A policy for granted `origins` that ends at `deadline`. A granted
    /// text that is not an origin grants nothing and is recorded as a
    /// refusal naming it (callers normally pass [`net_grant`]'s output,
    /// which holds none).
    pub(crate) fn new(origins: &[String], deadline: Instant) -> Arc<NetPolicy> {
        let mut parsed = Vec::with_capacity(origins.len());
        let mut refused = Vec::new();
        for o in origins {
            match Origin::parse(o) {
                Ok(origin) => parsed.push(origin),
                Err(e) => refused.push(format!("grant refused: {e}")),
            }
        }
        parsed.sort();
        parsed.dedup();
        let policy = Arc::new(NetPolicy {
            origins: parsed,
            deadline,
            requests: AtomicUsize::new(0),
            denials: Mutex::new(Denials::default()),
            requested: Mutex::new(Vec::new()),
        });
        for line in refused {
            policy.deny(line);
        }
        policy
    }

    /// No network at all (describe, benchmarks).
    pub(crate) fn none() -> Arc<NetPolicy> {
        NetPolicy::new(&[], Instant::now())
    }

    /// The refused requests, one line each, and how many more were refused.
    pub(crate) fn denials(&self) -> (Vec<String>, usize) {
        let d = self.denials.lock().unwrap_or_else(|e| e.into_inner());
        (d.kept.clone(), d.omitted)
    }

    /// The URLs of the requests let through to a granted origin.
    pub(crate) fn requested(&self) -> Vec<String> {
        self.requested
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records a request let through: `origin` and the URI's path and
    /// query (clipped; at most [`MAX_REQUESTS_PER_CALL`] get this far).
    fn record(&self, origin: &Origin, uri: &http::Uri) {
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let url = clip_bytes(&format!("{origin}{path}"), MAX_RECORDED_URL_BYTES).into_owned();
        let mut r = self.requested.lock().unwrap_or_else(|e| e.into_inner());
        if !r.contains(&url) {
            r.push(url);
        }
    }

    fn deny(&self, line: String) {
        let mut d = self.denials.lock().unwrap_or_else(|e| e.into_inner());
        if d.kept.len() < MAX_RECORDED_DENIALS {
            d.kept.push(line);
        } else {
            d.omitted += 1;
        }
    }

    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// The per-call `wasi:http` hooks.
pub(crate) struct NetHooks {
    policy: Arc<NetPolicy>,
}

impl NetHooks {
    pub(crate) fn new(policy: Arc<NetPolicy>) -> NetHooks {
        NetHooks { policy }
    }
}

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

fn refused(err: HttpError) -> SendFuture {
    Box::new(async move { Err(err) })
}

impl WasiHttpHooks for NetHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        let policy = &self.policy;
        let method = request.method().clone();
        let origin = match Origin::of_uri(request.uri()) {
            Ok(o) => o,
            Err(e) => {
                policy.deny(format!("{method} request refused: {}", e.reason));
                return refused(HttpError::HttpRequestDenied);
            }
        };
        if policy.requests.fetch_add(1, Ordering::SeqCst) >= MAX_REQUESTS_PER_CALL {
            policy.deny(format!(
                "{method} {origin} refused: more than {MAX_REQUESTS_PER_CALL} requests in one call"
            ));
            return refused(HttpError::HttpRequestDenied);
        }
        if !policy.origins.contains(&origin) {
            let granted = if policy.origins.is_empty() {
                "no origin is granted".to_string()
            } else {
                let list: Vec<String> = policy.origins.iter().map(|o| o.to_string()).collect();
                format!("granted: {}", list.join(", "))
            };
            policy.deny(format!(
                "{method} {origin} refused: origin not granted ({granted})"
            ));
            return refused(HttpError::HttpRequestDenied);
        }
        policy.record(&origin, request.uri());
        let policy = self.policy.clone();
        Box::new(send_checked(
            policy,
            origin,
            request,
            options.unwrap_or_default(),
        ))
    }
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Resolves, checks, connects and sends one request to a granted origin.
async fn send_checked(
    policy: Arc<NetPolicy>,
    origin: Origin,
    mut request: http::Request<WasiBody>,
    options: RequestOptions,
) -> Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    HttpError,
> {
    let deadline = tokio::time::Instant::from_std(policy.deadline);
    let bounded = |d: Option<Duration>| d.unwrap_or(Duration::MAX).min(policy.remaining());
    let connect_timeout = bounded(options.connect_timeout);

    // Addresses, checked.
    let addrs: Vec<IpAddr> = match origin.host_kind() {
        Host::Ip(ip) => vec![*ip],
        Host::Localhost => vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ],
        Host::Name(name) => {
            let lookup = tokio::net::lookup_host((name.as_str(), origin.port()));
            let found: Vec<IpAddr> = match tokio::time::timeout(connect_timeout, lookup).await {
                Err(_) => return Err(HttpError::DnsTimeout),
                Ok(Err(e)) => {
                    return Err(HttpError::DnsError {
                        rcode: Some(clip_bytes(&e.to_string(), 200).into_owned()),
                        info_code: None,
                    })
                }
                Ok(Ok(found)) => found.map(|a| a.ip()).collect(),
            };
            if found.is_empty() {
                return Err(HttpError::DestinationNotFound);
            }
            if let Some((ip, why)) = found
                .iter()
                .find_map(|ip| special_range(*ip).map(|why| (*ip, why)))
            {
                policy.deny(format!(
                    "{} {origin} refused: `{name}` resolves to {ip} ({why}); only an origin \
                     granted with that literal address may reach it",
                    request.method()
                ));
                return Err(HttpError::DestinationIpProhibited);
            }
            found
        }
    };

    // Connect to the checked addresses, in order, within the connect budget.
    let connect = async {
        let mut last = None;
        for ip in &addrs {
            match TcpStream::connect(SocketAddr::new(*ip, origin.port())).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no address to connect to")))
    };
    let tcp = match tokio::time::timeout(connect_timeout, connect).await {
        Err(_) => return Err(HttpError::ConnectionTimeout),
        Ok(Err(e)) => return Err(HttpError::Connect(e)),
        Ok(Ok(s)) => s,
    };
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Stream> = match origin.scheme_kind() {
        Scheme::Http => Box::new(tcp),
        Scheme::Https => {
            let name = match origin.host_kind() {
                Host::Ip(ip) => rustls::pki_types::ServerName::IpAddress((*ip).into()),
                Host::Localhost => server_name("localhost")?,
                Host::Name(n) => server_name(n)?,
            };
            let connector = tokio_rustls::TlsConnector::from(tls_config()?);
            let tls = tokio::time::timeout(
                bounded(options.connect_timeout),
                connector.connect(name, tcp),
            )
            .await
            .map_err(|_| HttpError::ConnectionTimeout)?
            .map_err(HttpError::Tls)?;
            Box::new(tls)
        }
    };
    let (mut sender, conn) = tokio::time::timeout(
        bounded(options.connect_timeout),
        hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| HttpError::ConnectionTimeout)??;

    // The request line carries only the path: the authority is in `Host`.
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| HttpError::HttpRequestUriInvalid)?;

    let first_byte = bounded(options.first_byte_timeout);
    let between_bytes = options.between_bytes_timeout.unwrap_or(Duration::MAX);
    let mut conn = Box::pin(conn);
    let mut conn_done = false;
    let send = tokio::time::timeout(first_byte, sender.send_request(request));
    let mut send = std::pin::pin!(send);
    // Drive the connection while waiting for the response head.
    let response = std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = send.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        if !conn_done {
            if let Poll::Ready(r) = conn.as_mut().poll(cx) {
                conn_done = true;
                if let Err(e) = r {
                    return Poll::Ready(Ok(Err(e)));
                }
                return send.as_mut().poll(cx);
            }
        }
        Poll::Pending
    })
    .await
    .map_err(|_| HttpError::ConnectionReadTimeout)?
    .map_err(HttpError::Hyper)?;

    let response = response.map(|incoming| {
        CheckedBody::new(incoming, between_bytes, deadline, MAX_RESPONSE_BODY_BYTES).boxed_unsync()
    });
    // The connection driver outlives the deadline a little, so that a stall
    // is reported by the body's own timer (a timeout), not as a connection
    // cut under it; dropping the store at the end of the call aborts it.
    let io: Box<dyn Future<Output = Result<(), HttpError>> + Send> = Box::new(async move {
        if conn_done {
            return Ok(());
        }
        match tokio::time::timeout_at(deadline + IO_GRACE, conn).await {
            Ok(r) => r.map_err(HttpError::Hyper),
            Err(_) => Err(HttpError::HttpResponseTimeout),
        }
    });
    Ok((response, io))
}

fn server_name(name: &str) -> Result<rustls::pki_types::ServerName<'static>, HttpError> {
    rustls::pki_types::ServerName::try_from(name.to_string()).map_err(|_| HttpError::DnsError {
        rcode: Some("invalid DNS name".into()),
        info_code: None,
    })
}

/// One TLS client configuration for the process: ring, webpki roots.
static TLS: LazyLock<Result<Arc<rustls::ClientConfig>, String>> = LazyLock::new(|| {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
        .map_err(|e| e.to_string())
});

fn tls_config() -> Result<Arc<rustls::ClientConfig>, HttpError> {
    match &*TLS {
        Ok(c) => Ok(c.clone()),
        Err(e) => Err(HttpError::InternalError(Some(format!("TLS setup: {e}")))),
    }
}

/// A response body bounded in time (the gap between frames and the call's
/// deadline) and in size.
struct CheckedBody {
    inner: hyper::body::Incoming,
    between: Duration,
    deadline: tokio::time::Instant,
    timer: Pin<Box<tokio::time::Sleep>>,
    received: u64,
    cap: u64,
    failed: bool,
}

impl CheckedBody {
    fn new(
        inner: hyper::body::Incoming,
        between: Duration,
        deadline: tokio::time::Instant,
        cap: u64,
    ) -> CheckedBody {
        let timer = Box::pin(tokio::time::sleep_until(next_wake(between, deadline)));
        CheckedBody {
            inner,
            between,
            deadline,
            timer,
            received: 0,
            cap,
            failed: false,
        }
    }
}

fn next_wake(between: Duration, deadline: tokio::time::Instant) -> tokio::time::Instant {
    match tokio::time::Instant::now().checked_add(between) {
        Some(t) if t < deadline => t,
        _ => deadline,
    }
}

impl Body for CheckedBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        if self.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => {
                self.failed = true;
                Poll::Ready(Some(Err(HttpError::Hyper(e))))
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.received += data.len() as u64;
                    if self.received > self.cap {
                        self.failed = true;
                        return Poll::Ready(Some(Err(HttpError::HttpResponseBodySize(Some(
                            self.cap,
                        )))));
                    }
                }
                let wake = next_wake(self.between, self.deadline);
                self.timer.as_mut().reset(wake);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => match self.timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.failed = true;
                    Poll::Ready(Some(Err(HttpError::ConnectionReadTimeout)))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn origins_normalize() {
        let n = |s: &str| normalize_origin(s);
        assert_eq!(n("HTTP://Example.COM").unwrap(), "http://example.com:80");
        assert_eq!(
            n("https://example.com/").unwrap(),
            "https://example.com:443"
        );
        assert_eq!(n("http://127.0.0.1:8123").unwrap(), "http://127.0.0.1:8123");
        assert_eq!(n("http://[0:0::1]:80").unwrap(), "http://[::1]:80");
        assert_eq!(n("http://localhost:9").unwrap(), "http://localhost:9");
        for bad in [
            "example.com",
            "ftp://example.com:21",
            "http://example.com/path",
            "http://user@example.com",
            "http://example.com:0",
            "http://example.com:99999",
            "http://127.1:80",
            "http://0x7f.0.0.1:80",
            "http://2130706433:80",
            "http://exa mple.com",
            "http://[::1",
            "http://",
        ] {
            assert!(n(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn grant_is_the_intersection() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let granted = s(&["https://api.example.com", "http://127.0.0.1:8123"]);
        assert_eq!(
            net_grant(&s(&["any"]), &granted).unwrap(),
            ["http://127.0.0.1:8123", "https://api.example.com:443"]
        );
        assert_eq!(
            net_grant(&s(&["https://api.example.com:443"]), &granted).unwrap(),
            ["https://api.example.com:443"]
        );
        assert!(net_grant(&[], &granted).unwrap().is_empty());
        assert!(net_grant(&s(&["any"]), &[]).unwrap().is_empty());
        assert!(net_grant(&s(&["http://127.0.0.1:8124"]), &granted)
            .unwrap()
            .is_empty());
        // `any` granted is no wildcard: it grants nothing.
        assert!(net_grant(&s(&["any"]), &s(&["any"])).unwrap().is_empty());
        // Nothing is silently dropped: a value that is not an origin, on
        // either side, is an error naming it.
        let e = net_grant(&s(&["any"]), &s(&["https://a.example", "bogus"])).unwrap_err();
        assert_eq!(e.value, "bogus");
        let e = net_grant(&s(&["wss://a.example"]), &granted).unwrap_err();
        assert_eq!(e.value, "wss://a.example");
        assert!(e.to_string().contains("scheme `wss`"), "{e}");
    }

    #[test]
    fn special_ranges() {
        for (a, special) in [
            ("127.0.0.1", true),
            ("127.255.0.9", true),
            ("10.1.2.3", true),
            ("172.16.0.1", true),
            ("172.31.255.255", true),
            ("172.32.0.1", false),
            ("192.168.1.1", true),
            ("169.254.169.254", true),
            ("169.254.1.1", true),
            ("100.64.0.1", true),
            ("100.128.0.1", false),
            ("0.0.0.0", true),
            ("224.0.0.1", true),
            ("255.255.255.255", true),
            ("8.8.8.8", false),
            ("93.184.216.34", false),
            ("::1", true),
            ("::", true),
            ("fc00::1", true),
            ("fd00:ec2::254", true),
            ("fe80::1", true),
            ("ff02::1", true),
            ("::ffff:127.0.0.1", true),
            ("::ffff:10.0.0.1", true),
            ("64:ff9b::a00:1", true),
            ("2606:4700::1111", false),
        ] {
            assert_eq!(special_range(ip(a)).is_some(), special, "{a}");
        }
        assert_eq!(special_range(ip("169.254.169.254")), Some("cloud metadata"));
        assert_eq!(special_range(ip("fd00:ec2::254")), Some("cloud metadata"));
    }

    #[test]
    fn request_origin_fills_default_ports() {
        let uri: http::Uri = "https://Example.com/x?y".parse().unwrap();
        assert_eq!(
            Origin::of_uri(&uri).unwrap().to_string(),
            "https://example.com:443"
        );
        let uri: http::Uri = "http://[::1]:8080/".parse().unwrap();
        assert_eq!(
            Origin::of_uri(&uri).unwrap().to_string(),
            "http://[::1]:8080"
        );
    }
}
