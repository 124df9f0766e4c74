//! HTML: escaping, the page frame with its navigation, and the responses
//! with the headers every console answer carries (a strict Content
//! Security Policy: scripts and styles only from the console itself, no
//! framing; no caching; no referrer beyond the console itself, which keeps `Origin` on its own POSTs).

use bytes::Bytes;
use http::{header, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::auth::{Session, COOKIE};
use crate::Body;

/// The stylesheet, served at `/console/app.css`.
pub const CSS: &str = include_str!("assets/app.css");
/// The script, served at `/console/app.js`.
pub const JS: &str = include_str!("assets/app.js");

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// `s` with `& < > " '` escaped, for text and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn builder(status: StatusCode, content_type: &str) -> http::response::Builder {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-store")
        .header("content-security-policy", CSP)
        .header("x-content-type-options", "nosniff")
        .header("x-frame-options", "DENY")
        .header("referrer-policy", "same-origin")
}

fn full(b: http::response::Builder, body: impl Into<Bytes>) -> Response<Body> {
    b.body(Full::new(body.into()).boxed())
        .expect("a valid response")
}

pub fn plain(status: StatusCode, message: &str) -> Response<Body> {
    full(
        builder(status, "text/plain; charset=utf-8"),
        message.to_string(),
    )
}

pub fn asset(content_type: &str, text: &'static str) -> Response<Body> {
    full(
        builder(StatusCode::OK, &format!("{content_type}; charset=utf-8")),
        text,
    )
}

pub fn html(status: StatusCode, page: String) -> Response<Body> {
    full(builder(status, "text/html; charset=utf-8"), page)
}

/// 303 to `to`.
pub fn redirect(to: &str) -> Response<Body> {
    full(
        builder(StatusCode::SEE_OTHER, "text/plain; charset=utf-8").header(header::LOCATION, to),
        "",
    )
}

/// 303 to `to`, ending the cookie.
pub fn redirect_clearing(to: &str) -> Response<Body> {
    let mut r = redirect(to);
    r.headers_mut().insert(
        header::SET_COOKIE,
        http::HeaderValue::from_str(&format!(
            "{COOKIE}=; HttpOnly; SameSite=Strict; Path=/console; Max-Age=0"
        ))
        .expect("a valid header"),
    );
    r
}

/// 303 to the live calls, setting the session cookie.
pub fn logged_in(sid: &str) -> Response<Body> {
    let mut r = redirect("/console/calls");
    r.headers_mut().insert(
        header::SET_COOKIE,
        http::HeaderValue::from_str(&format!(
            "{COOKIE}={sid}; HttpOnly; SameSite=Strict; Path=/console; Max-Age={}",
            crate::auth::SESSION_TTL.as_secs()
        ))
        .expect("a valid header"),
    );
    r
}

/// The pages of the navigation: path, title.
pub const NAV: [(&str, &str); 6] = [
    ("calls", "Live calls"),
    ("approvals", "Approvals"),
    ("doubt", "In doubt"),
    ("tokens", "Tokens"),
    ("plugins", "Plugins"),
    ("health", "Health"),
];

fn head(title: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · toolhost console</title>\
         <link rel=\"stylesheet\" href=\"/console/app.css\">\
         <script src=\"/console/app.js\" defer></script></head>",
        esc(title)
    )
}

/// A whole page: the navigation (`active` marked), the logout button and
/// `body`.
pub fn page(active: &str, title: &str, session: &Session, body: &str) -> String {
    let mut nav = String::new();
    for (path, name) in NAV {
        let current = if path == active {
            " aria-current=\"page\""
        } else {
            ""
        };
        nav.push_str(&format!("<a href=\"/console/{path}\"{current}>{name}</a>"));
    }
    format!(
        "{}<body><header><nav aria-label=\"Console\"><strong>toolhost</strong>{nav}</nav>\
         <form method=\"post\" action=\"/console/logout\" class=\"logout\">{}\
         <span class=\"who\">{}</span><button>Log out</button></form></header>\
         <main id=\"main\"><h1>{}</h1>{body}</main></body></html>",
        head(title),
        csrf_field(session),
        esc(&session.who),
        esc(title)
    )
}

/// The hidden CSRF field of a form.
pub fn csrf_field(session: &Session) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(&session.csrf)
    )
}

/// The login form, with `error` above it.
pub fn login_page(status: StatusCode, error: Option<&str>) -> Response<Body> {
    let error = error
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", esc(e)))
        .unwrap_or_default();
    html(
        status,
        format!(
            "{}<body><main id=\"main\" class=\"login\"><h1>toolhost console</h1>{error}\
             <form method=\"post\" action=\"/console/login\">\
             <label for=\"token\">Console token</label>\
             <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required autofocus>\
             <button id=\"login\">Log in</button></form>\
             <p class=\"hint\">A token from <code>toolhost cap mint --console</code>, or the text of \
             <code>--console-token-file</code>.</p></main></body></html>",
            head("Log in")
        ),
    )
}

/// A share in [0, 1] as a horizontal bar (inline SVG) with its label.
pub fn bar(share: f64, label: &str, class: &str) -> String {
    let w = (share.clamp(0.0, 1.0) * 100.0).round();
    format!(
        "<span class=\"bar {class}\"><svg viewBox=\"0 0 100 8\" width=\"120\" height=\"10\" \
         preserveAspectRatio=\"none\" aria-hidden=\"true\"><rect width=\"100\" height=\"8\" class=\"track\"/>\
         <rect width=\"{w}\" height=\"8\" class=\"fill\"/></svg> {}</span>",
        esc(label)
    )
}

/// Unix microseconds as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn time_us(us: i64) -> String {
    let s = toolhost::record::journal::format_us(us);
    s.get(..19).unwrap_or(&s).replace('T', " ")
}

/// Unix seconds as RFC 3339.
pub fn time_s(secs: u64) -> String {
    toolhost::policy::capability::format_rfc3339(secs)
}
