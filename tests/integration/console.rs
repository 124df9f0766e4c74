//! The operator's console at the HTTP level, on real server processes
//! over raw sockets: off without `--console`, the login (console tokens
//! only), the cookie, CSRF and same-origin on every POST, console tokens
//! refused on `/mcp` and unable to call tools. The scenarios in a real
//! browser are `tests/console/browser.py` (run by `.ci/run`).

use std::io::{Read, Write};

use crate::mcp::{mint, HttpServer, Response, Setup};

/// One request with these headers (`Host` is the server's own unless
/// given) and body: the whole response.
fn request(
    server: &HttpServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut s = server.connect();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: 127.0.0.1:{}\r\n", server.port));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    Response::parse(&raw)
}

/// `toolhost cap …` with the setup's key and store: its output.
fn cap(setup: &Setup, args: &[&str]) -> std::process::Output {
    setup.cap(args)
}

fn minted(setup: &Setup, args: &[&str]) -> String {
    let out = cap(setup, args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The value of the hidden field `name` in `html`.
fn field(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let at = html.find(&marker).expect("the field") + marker.len();
    html[at..].split('"').next().unwrap().to_string()
}

#[test]
fn console_is_off_without_the_flag() {
    let setup = Setup::new(&[]);
    let server = HttpServer::start(&setup, &[]);
    for path in ["/console", "/console/login", "/console/calls"] {
        let r = request(&server, "GET", path, &[], "");
        assert_eq!(r.status, 404, "{path}: {}", r.body);
        assert!(r.body.contains("--console"), "{}", r.body);
    }
}

#[test]
fn console_tokens_open_the_console_and_nothing_else() {
    // --console mints the right alone.
    let setup = Setup::new(&[]);
    let refused = cap(&setup, &["mint", "--console", "--tool", "file_view"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("nothing else"),
        "{refused:?}"
    );
    let mixed = cap(&setup, &["mint", "--right", "console", "--tool", "*"]);
    assert!(!mixed.status.success(), "{mixed:?}");
    let token = minted(&setup, &["mint", "--console"]);
    let key = setup.state.path().join("root.key");
    let ordinary = mint(
        &key,
        &["--tool", "*", "--read", "pub", "--right", "metrics"],
    );
    let server = HttpServer::start(&setup, &["--console"]);
    let origin = format!("http://127.0.0.1:{}", server.port);

    // A console token is refused on /mcp.
    let r = request(
        &server,
        "GET",
        "/mcp",
        &[("Authorization", &format!("Bearer {token}"))],
        "",
    );
    assert_eq!(r.status, 401, "{}", r.body);

    // Anonymous: the login.
    let r = request(&server, "GET", "/console/calls", &[], "");
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/console/login"));
    let r = request(&server, "GET", "/console/login", &[], "");
    assert_eq!(r.status, 200);
    let csp = r.header("content-security-policy").unwrap_or("");
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );

    let login = |token: &str, origin: Option<&str>| {
        let body = format!("token={}", token.replace('+', "%2B").replace('=', "%3D"));
        let headers: Vec<(&str, &str)> = origin.map(|o| ("Origin", o)).into_iter().collect();
        request(&server, "POST", "/console/login", &headers, &body)
    };
    assert_eq!(login("not-a-token", Some(&origin)).status, 401);
    assert_eq!(login(&ordinary, Some(&origin)).status, 401);
    // The right token, but from another origin or none.
    assert_eq!(login(&token, Some("http://evil.example")).status, 403);
    assert_eq!(login(&token, None).status, 403);
    let r = login(&token, Some(&origin));
    assert_eq!(r.status, 303, "{}", r.body);
    let cookie = r.header("set-cookie").expect("a cookie").to_string();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(!cookie.contains(&token), "{cookie}");
    let cookie = cookie.split(';').next().unwrap().to_string();

    // The pages: the console token by id, never its text.
    let id: String = serde_json::from_str::<serde_json::Value>(&String::from_utf8_lossy(
        &cap(&setup, &["inspect", &token]).stdout,
    ))
    .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let page = request(
        &server,
        "GET",
        "/console/tokens",
        &[("Cookie", &cookie)],
        "",
    );
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains(&id), "{}", page.body);
    assert!(page.body.contains("open the console"), "{}", page.body);
    assert!(!page.body.contains(&token));
    for path in [
        "/console/calls",
        "/console/approvals",
        "/console/doubt",
        "/console/plugins",
        "/console/health",
    ] {
        let r = request(&server, "GET", path, &[("Cookie", &cookie)], "");
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert!(r.body.contains("name=\"csrf\""), "{path}");
    }
    let csrf = field(&page.body, "csrf");

    // Every POST needs the CSRF token and the console's own origin.
    let post = |body: &str, origin: Option<&str>| {
        let mut headers = vec![("Cookie", cookie.as_str())];
        if let Some(o) = origin {
            headers.push(("Origin", o));
        }
        request(&server, "POST", "/console/tokens/revoke", &headers, body)
    };
    let ask = format!("id={id}");
    assert_eq!(post(&ask, Some(&origin)).status, 403);
    assert_eq!(
        post(&format!("{ask}&csrf=wrong"), Some(&origin)).status,
        403
    );
    let with = format!("{ask}&csrf={csrf}");
    assert_eq!(post(&with, Some("http://evil.example")).status, 403);
    assert_eq!(post(&with, Some("http://localhost:1")).status, 403);
    assert_eq!(post(&with, None).status, 403);
    // Both: the confirmation page, nothing revoked yet.
    let r = post(&with, Some(&origin));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("id=\"confirm\""), "{}", r.body);
    let list = String::from_utf8_lossy(&cap(&setup, &["list"]).stdout).to_string();
    assert!(!list.contains("\"revoked\""), "{list}");

    // Revoking the console's own token ends the session.
    let r = post(&format!("{with}&confirm=yes"), Some(&origin));
    assert_eq!(r.status, 303, "{}", r.body);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let r = request(&server, "GET", "/console/calls", &[("Cookie", &cookie)], "");
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(login(&token, Some(&origin)).status, 401);
}

#[test]
fn console_token_file_opens_the_console() {
    let setup = Setup::new(&[]);
    let file = setup.state.path().join("console.txt");
    std::fs::write(&file, "short\n").unwrap();
    let mut child = setup
        .command(&[
            "--http",
            "127.0.0.1:0",
            "--console",
            "--console-token-file",
            file.to_str().unwrap(),
        ])
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "a short console secret is refused");
    let words = "a-long-enough-console-passphrase-0123";
    std::fs::write(&file, format!("{words}\n")).unwrap();
    let server = HttpServer::start(
        &setup,
        &["--console", "--console-token-file", file.to_str().unwrap()],
    );
    let origin = format!("http://127.0.0.1:{}", server.port);
    let r = request(
        &server,
        "POST",
        "/console/login",
        &[("Origin", &origin)],
        &format!("token={words}"),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let r = request(
        &server,
        "POST",
        "/console/login",
        &[("Origin", &origin)],
        &format!("token={}", words.replace("0123", "0124")),
    );
    assert_eq!(r.status, 401, "{}", r.body);
}
