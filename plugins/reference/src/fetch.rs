//! `http_get`: one GET request through `wasi:http`, body returned as text.
//!
//! The guest asks; the host decides. Every request meets the host's origin
//! check (the call's granted origins, exactly) and address check (a DNS
//! name never reaches loopback, private, link-local or metadata addresses)
//! before anything is sent, so this tool never re-checks authorization: a
//! refusal comes back as the `wasi:http` error `http-request-denied` or
//! `destination-ip-prohibited`, reported as `denied_origin`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolhost_sdk::{json, Context, SideEffect, Tool, ToolError};

use wasip2::clocks::monotonic_clock;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, FutureIncomingResponse, IncomingResponse, Method, OutgoingRequest,
    RequestOptions, Scheme,
};
use wasip2::io::streams::StreamError;

/// Most response headers returned (after sorting by name).
const MAX_HEADERS: usize = 48;
/// Longest header value returned, in bytes; longer ones are clipped.
const MAX_HEADER_VALUE_BYTES: usize = 512;
/// Bytes asked of the body stream per read.
const READ_CHUNK: u64 = 64 * 1024;

const DESCRIPTION: &str = "\
Fetches one http(s) URL with a GET: status, headers and the body as UTF-8 text.
Use it to read a web page or API answer from an origin the caller granted. Not for workspace \
files (file_view), sending data, or binary content.
Other origins fail with denied_origin before connecting; names resolving to private addresses \
are refused unless granted literally. Redirects are returned, not followed; any HTTP status is \
a success (check status). Read-only. Body clipped to max_bytes.
Errors: denied_origin (the caller must grant it), invalid_url, timeout, connection_failed, \
not_text.";

/// Arguments of `http_get`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpGetArgs {
    /// Absolute http(s) URL, ASCII.
    #[schemars(length(min = 8, max = 2048), pattern(r"^https?://"), extend("format" = "uri"))]
    pub url: String,
    /// Most body bytes returned.
    #[serde(default = "default_max_bytes")]
    #[schemars(range(min = 1, max = 1_048_576))]
    pub max_bytes: u32,
    /// Budget for the whole exchange, ms.
    #[serde(default = "default_timeout_ms")]
    #[schemars(range(min = 100, max = 30_000))]
    pub timeout_ms: u32,
}

fn default_max_bytes() -> u32 {
    65_536
}

fn default_timeout_ms() -> u32 {
    10_000
}

/// The response to one GET.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HttpGetOutput {
    /// The URL fetched, without #fragment.
    pub url: String,
    /// HTTP status (redirects not followed).
    pub status: u16,
    /// Sorted by name, at most 48, values clipped at 512 bytes.
    pub headers: Vec<Header>,
    /// The first max_bytes bytes of the body.
    pub body: String,
    /// More body followed.
    pub body_truncated: bool,
    /// The content-type header, if any.
    pub content_type: Option<String>,
}

// One response header.
#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Header {
    /// Lowercase.
    pub name: String,
    /// Clipped at 512 bytes with a trailing `...`.
    pub value: String,
}

pub fn tool() -> Tool {
    Tool::new("http_get", http_get)
        .title("Fetch a URL (HTTP GET)")
        .description(DESCRIPTION)
        .keywords(&[
            "fetch",
            "download",
            "get",
            "http",
            "web page",
            "api",
            "request",
            "url",
            "call an api",
            "curl",
            "website",
            "endpoint",
        ])
        .examples(&[
            "fetch the release notes page",
            "download the JSON from the status endpoint",
            "call the weather API for today's forecast",
            "get the latest version number from the package registry",
            "check whether the website is up",
            "read the documentation page of the library",
        ])
        .side_effect(SideEffect::ReadOnly)
        .network_host("any")
        .error_codes(&[
            "denied_origin",
            "invalid_url",
            "timeout",
            "connection_failed",
            "not_text",
        ])
        .timeout_ms(35_000)
        .max_output_bytes(6 * 1_048_576 + 65_536)
}

/// A URL taken apart for `wasi:http`.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    https: bool,
    authority: String,
    path_with_query: String,
    /// The URL without its fragment.
    url: String,
}

fn invalid_url(why: &str) -> ToolError {
    ToolError::new("invalid_url", format!("url is not usable: {why}"))
        .field("/url")
        .correctable()
}

fn parse_url(url: &str) -> Result<Target, ToolError> {
    if let Some(c) = url
        .chars()
        .find(|c| !c.is_ascii() || c.is_ascii_control() || *c == ' ')
    {
        return Err(invalid_url(&format!(
            "it contains {c:?}; percent-encode spaces, control and non-ASCII characters"
        )));
    }
    let url = url.split('#').next().unwrap_or("");
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| invalid_url("expected http://host/path or https://host/path"))?;
    let https = match scheme.to_ascii_lowercase().as_str() {
        "http" => false,
        "https" => true,
        _ => return Err(invalid_url("only http and https URLs can be fetched")),
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.is_empty() {
        return Err(invalid_url("it has no host"));
    }
    if authority.contains('@') {
        return Err(invalid_url("user info (user@host) is not allowed"));
    }
    if authority.contains(['\\', '%', '<', '>', '"', '{', '}', '|', '^', '`']) {
        return Err(invalid_url(
            "the host contains characters a host cannot have",
        ));
    }
    let path_with_query = match tail {
        "" => "/".to_string(),
        t if t.starts_with('?') => format!("/{t}"),
        t => t.to_string(),
    };
    Ok(Target {
        https,
        authority: authority.to_string(),
        path_with_query,
        url: url.to_string(),
    })
}

fn http_get(_ctx: &Context, args: HttpGetArgs) -> Result<HttpGetOutput, ToolError> {
    let target = parse_url(&args.url)?;
    let timeout_ns = u64::from(args.timeout_ms) * 1_000_000;
    let deadline = monotonic_clock::now().saturating_add(timeout_ns);

    let headers = Fields::from_list(&[
        ("user-agent".to_string(), b"toolhost-http_get/0.1".to_vec()),
        ("accept".to_string(), b"*/*".to_vec()),
        ("accept-encoding".to_string(), b"identity".to_vec()),
    ])
    .map_err(|e| ToolError::new("connection_failed", format!("building headers: {e:?}")))?;
    let request = OutgoingRequest::new(headers);
    let scheme = if target.https {
        Scheme::Https
    } else {
        Scheme::Http
    };
    request
        .set_method(&Method::Get)
        .and_then(|()| request.set_scheme(Some(&scheme)))
        .map_err(|()| invalid_url("the scheme was refused"))?;
    request
        .set_authority(Some(&target.authority))
        .map_err(|()| invalid_url("the host or port is malformed"))?;
    request
        .set_path_with_query(Some(&target.path_with_query))
        .map_err(|()| invalid_url("the path or query is malformed"))?;
    let options = RequestOptions::new();
    // The host bounds these by the call's deadline too.
    let _ = options.set_connect_timeout(Some(timeout_ns));
    let _ = options.set_first_byte_timeout(Some(timeout_ns));
    let _ = options.set_between_bytes_timeout(Some(timeout_ns));

    let future = outgoing_handler::handle(request, Some(options))
        .map_err(|e| request_error(&e, &target, args.timeout_ms))?;
    let response = wait_response(&future, deadline, &target, args.timeout_ms)?;
    let status = response.status();
    let (headers, content_type) = response_headers(&response);
    let (bytes, body_truncated) = read_body(
        &response,
        args.max_bytes as usize,
        deadline,
        &target,
        args.timeout_ms,
    )?;
    let received = bytes.len();
    let body = match text_of(bytes, body_truncated) {
        Some(text) => text,
        None => {
            return Err(ToolError::new(
                "not_text",
                format!(
                    "the body of {} (status {status}, content type {}) is not UTF-8 text",
                    target.url,
                    content_type.as_deref().unwrap_or("unknown")
                ),
            )
            .details(json!({
                "status": status,
                "content_type": content_type,
                "received_bytes": received,
                "body_truncated": body_truncated,
            })))
        }
    };
    Ok(HttpGetOutput {
        url: target.url,
        status,
        headers,
        body,
        body_truncated,
        content_type,
    })
}

/// Waits for the response head, until `deadline`.
fn wait_response(
    future: &FutureIncomingResponse,
    deadline: u64,
    target: &Target,
    timeout_ms: u32,
) -> Result<IncomingResponse, ToolError> {
    loop {
        if let Some(ready) = future.get() {
            return match ready {
                Ok(Ok(response)) => Ok(response),
                Ok(Err(e)) => Err(request_error(&e, target, timeout_ms)),
                Err(()) => Err(ToolError::new(
                    "connection_failed",
                    "the response was already taken (a bug in http_get)",
                )),
            };
        }
        if monotonic_clock::now() >= deadline {
            return Err(timed_out(target, timeout_ms));
        }
        let ready = future.subscribe();
        let timer = monotonic_clock::subscribe_instant(deadline);
        wasip2::io::poll::poll(&[&ready, &timer]);
    }
}

/// Reads at most `max` bytes of the body (and one more to know whether it
/// was cut), until `deadline`.
fn read_body(
    response: &IncomingResponse,
    max: usize,
    deadline: u64,
    target: &Target,
    timeout_ms: u32,
) -> Result<(Vec<u8>, bool), ToolError> {
    let body = response
        .consume()
        .map_err(|()| ToolError::new("connection_failed", "the response body was unavailable"))?;
    let stream = body
        .stream()
        .map_err(|()| ToolError::new("connection_failed", "the response body was unavailable"))?;
    let mut bytes: Vec<u8> = Vec::new();
    let truncated = loop {
        if bytes.len() > max {
            break true;
        }
        let want = ((max + 1 - bytes.len()) as u64).min(READ_CHUNK);
        match stream.read(want) {
            Ok(chunk) if chunk.is_empty() => {
                if monotonic_clock::now() >= deadline {
                    return Err(timed_out(target, timeout_ms));
                }
                let ready = stream.subscribe();
                let timer = monotonic_clock::subscribe_instant(deadline);
                wasip2::io::poll::poll(&[&ready, &timer]);
            }
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break false,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(match wasip2::http::types::http_error_code(&e) {
                    Some(code) => request_error(&code, target, timeout_ms),
                    None => body_error(&e.to_debug_string(), target, timeout_ms),
                })
            }
        }
    };
    bytes.truncate(max);
    Ok((bytes, truncated))
}

/// A body read error the host did not tag with a `wasi:http` error code
/// (wasmtime reports body errors as plain I/O errors): classified by text.
fn body_error(text: &str, target: &Target, timeout_ms: u32) -> ToolError {
    let lower = text.to_ascii_lowercase();
    if lower.contains("timeout") || lower.contains("timed out") {
        return timed_out(target, timeout_ms).details(json!({ "io_error": text }));
    }
    ToolError::new(
        "connection_failed",
        format!("reading the body of {} failed: {text}", target.url),
    )
    .details(json!({ "io_error": text }))
}

/// The headers, sorted by name and bounded, and the content type.
fn response_headers(response: &IncomingResponse) -> (Vec<Header>, Option<String>) {
    let fields = response.headers();
    let entries = fields.entries();
    drop(fields);
    select_headers(entries)
}

fn select_headers(entries: Vec<(String, Vec<u8>)>) -> (Vec<Header>, Option<String>) {
    let mut headers: Vec<Header> = entries
        .into_iter()
        .filter_map(|(name, value)| {
            let value = String::from_utf8(value).ok()?;
            Some(Header {
                name: name.to_ascii_lowercase(),
                value,
            })
        })
        .collect();
    headers.sort_by(|a, b| a.name.cmp(&b.name));
    let content_type = headers
        .iter()
        .find(|h| h.name == "content-type")
        .map(|h| clip(&h.value, MAX_HEADER_VALUE_BYTES));
    headers.truncate(MAX_HEADERS);
    for h in &mut headers {
        h.value = clip(&h.value, MAX_HEADER_VALUE_BYTES);
    }
    (headers, content_type)
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...", &s[..cut])
}

/// The body as text: UTF-8 without NUL bytes. A body cut at `max_bytes`
/// may end inside a character; that partial character is dropped.
fn text_of(mut bytes: Vec<u8>, truncated: bool) -> Option<String> {
    if bytes.contains(&0) {
        return None;
    }
    match std::str::from_utf8(&bytes) {
        Ok(_) => {}
        Err(e) if truncated && e.error_len().is_none() => bytes.truncate(e.valid_up_to()),
        Err(_) => return None,
    }
    String::from_utf8(bytes).ok()
}

fn timed_out(target: &Target, timeout_ms: u32) -> ToolError {
    ToolError::new(
        "timeout",
        format!(
            "{} did not answer in time (timeout_ms = {timeout_ms}, or the call's own deadline \
             if that came first)",
            target.url
        ),
    )
    .field("/timeout_ms")
    .correctable()
}

/// Maps a `wasi:http` error code to this tool's error codes.
fn request_error(code: &ErrorCode, target: &Target, timeout_ms: u32) -> ToolError {
    let wasi_error = format!("{code:?}");
    let wasi_error = wasi_error.trim_start_matches("ErrorCode::").to_string();
    let origin = format!(
        "{}://{}",
        if target.https { "https" } else { "http" },
        target.authority
    );
    match code {
        ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => ToolError::new(
            "denied_origin",
            format!(
                "the host refused to let this call reach {origin} ({wasi_error}); the caller \
                 must grant that exact origin (scheme://host:port) for it to work"
            ),
        )
        .field("/url")
        .details(json!({ "origin": origin, "wasi_error": wasi_error })),
        ErrorCode::DnsTimeout
        | ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::ConnectionWriteTimeout
        | ErrorCode::HttpResponseTimeout => timed_out(target, timeout_ms)
            .details(json!({ "origin": origin, "wasi_error": wasi_error })),
        ErrorCode::HttpRequestUriInvalid | ErrorCode::HttpRequestUriTooLong => {
            invalid_url(&format!("the host could not use it ({wasi_error})"))
        }
        _ => ToolError::new(
            "connection_failed",
            format!("fetching {} failed: {wasi_error}", target.url),
        )
        .details(json!({ "origin": origin, "wasi_error": wasi_error })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_taken_apart() {
        let t = parse_url("http://127.0.0.1:8123").unwrap();
        assert_eq!(
            (t.https, t.authority.as_str(), t.path_with_query.as_str()),
            (false, "127.0.0.1:8123", "/")
        );
        let t = parse_url("HTTPS://Example.com/a/b?x=1#frag").unwrap();
        assert!(t.https);
        assert_eq!(t.authority, "Example.com");
        assert_eq!(t.path_with_query, "/a/b?x=1");
        assert_eq!(t.url, "HTTPS://Example.com/a/b?x=1");
        assert_eq!(parse_url("http://h?q").unwrap().path_with_query, "/?q");
        for bad in [
            "ftp://x/",
            "http:///path",
            "http://user@host/",
            "http://host/a b",
            "http://höst/",
            "example.com/",
        ] {
            let e = parse_url(bad).unwrap_err();
            assert_eq!(e.code, "invalid_url", "{bad}");
            assert!(e.correctable);
            assert_eq!(e.field.as_deref(), Some("/url"));
        }
    }

    #[test]
    fn headers_are_sorted_and_bounded() {
        let mut entries: Vec<(String, Vec<u8>)> = vec![
            ("X-B".into(), b"2".to_vec()),
            ("Content-Type".into(), b"text/plain".to_vec()),
            ("x-a".into(), vec![b'v'; 600]),
            ("bin".into(), vec![0xff]),
        ];
        for i in 0..60 {
            entries.push((format!("z-{i:02}"), b"z".to_vec()));
        }
        let (headers, ct) = select_headers(entries);
        assert_eq!(ct.as_deref(), Some("text/plain"));
        assert_eq!(headers.len(), MAX_HEADERS);
        assert_eq!(headers[0].name, "content-type");
        assert_eq!(headers[1].name, "x-a");
        assert_eq!(headers[1].value.len(), MAX_HEADER_VALUE_BYTES + 3);
        assert_eq!(
            headers[2],
            Header {
                name: "x-b".into(),
                value: "2".into()
            }
        );
        assert!(headers.iter().all(|h| h.name != "bin"));
    }

    #[test]
    fn text_detection() {
        assert_eq!(text_of(b"hello".to_vec(), false).as_deref(), Some("hello"));
        assert_eq!(text_of(b"a\0b".to_vec(), false), None);
        assert_eq!(text_of(vec![0xff, 0xfe], false), None);
        // "é" is two bytes; a cut after the first is not an error.
        assert_eq!(text_of(vec![b'a', 0xc3], true).as_deref(), Some("a"));
        assert_eq!(text_of(vec![b'a', 0xc3], false), None);
    }

    #[test]
    fn schema_bounds() {
        let schema = tool().input_schema();
        let url = &schema["properties"]["url"];
        assert_eq!(url["maxLength"], 2048);
        assert_eq!(url["pattern"], "^https?://");
        assert_eq!(url["format"], "uri");
        assert_eq!(schema["properties"]["max_bytes"]["maximum"], 1_048_576);
        assert_eq!(schema["properties"]["timeout_ms"]["minimum"], 100);
        assert_eq!(schema["required"], json!(["url"]));
    }
}
