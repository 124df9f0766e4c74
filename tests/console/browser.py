#!/usr/bin/env python3
"""The operator's console in a real browser: headless Chromium, driven
through chromedriver's W3C WebDriver API (a small client on urllib, no
package), against `toolhost serve --http --console` and `toolhost` commands
run in other processes on the same record store.

Scenarios: a wrong token is refused at login and the right one accepted; a
call appears live within a second of its `toolhost call`; an approval
approved in the page lets the agent's retry run the call once, a denial
reaches it as `approval_declined`; an in-doubt record is settled; a child
token revoked from the page is refused on its next call; a POST without the
CSRF token or from another origin is refused; a secret read by a call
appears nowhere in the pages or the event stream. Each page is saved as a
PNG at 1280x800 (into docs/console/ with --screenshots).

Environment: TOOLHOST_BIN (the binary), CHROMEDRIVER, CHROMIUM, and
TOOLHOST_CONSOLE_STORE (a PostgreSQL URL; default: an SQLite file of its
own); exit 0 only when every check holds. Keys, ids and trajectories carry
a random suffix, so a store shared with other runs does not confuse them.
"""
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("TOOLHOST_BIN", os.path.join(ROOT, "target/debug/toolhost"))
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
EFFECTS = os.path.join(ROOT, "target/guests/wasm32-wasip2/release/tp_effects.wasm")
SHOTS = os.path.join(ROOT, "docs/console") if "--screenshots" in sys.argv else None
# A GitHub-token-shaped secret, planted in a workspace file that a call reads.
SECRET = "ghp_" + "Zq7XcV2bN9mK4pL8rT1wY6uE3sD5fG0hJ2aQ"

FAILED = []
RUN = os.urandom(4).hex()


def check(cond, what):
    print(("console: PASS " if cond else "console: FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)
    return cond


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, headers=None):
    """(status, headers, body text); no redirects followed."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode("utf-8", "replace")


class WebDriver:
    """The few W3C WebDriver commands the scenarios need."""

    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": CHROMIUM,
                        "args": [
                            "--headless=new",
                            "--no-sandbox",
                            "--disable-gpu",
                            "--disable-dev-shm-usage",
                            "--window-size=1280,800",
                            "--hide-scrollbars",
                        ],
                    },
                }
            }
        }
        self.sid = self.cmd("POST", "/session", caps)["sessionId"]
        self.viewport(1280, 800)

    def viewport(self, width, height):
        """Sizes the window so that the page itself is width x height."""
        self.cmd("POST", f"/session/{self.sid}/window/rect", {"width": width, "height": height})
        inner = self.script("return [window.innerWidth, window.innerHeight];")
        self.cmd("POST", f"/session/{self.sid}/window/rect",
                 {"width": 2 * width - inner[0], "height": 2 * height - inner[1]})

    def cmd(self, method, path, payload=None):
        data = json.dumps(payload).encode() if payload is not None else None
        if method == "POST" and data is None:
            data = b"{}"
        req = urllib.request.Request(
            self.base + path, data=data, method=method,
            headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read())["value"]
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"webdriver {method} {path}: {e.code} {e.read()[:500]!r}")

    def s(self, path):
        return f"/session/{self.sid}{path}"

    def get(self, url):
        self.cmd("POST", self.s("/url"), {"url": url})

    def url(self):
        return self.cmd("GET", self.s("/url"))

    def source(self):
        return self.cmd("GET", self.s("/source"))

    def find(self, css):
        found = self.cmd("POST", self.s("/elements"), {"using": "css selector", "value": css})
        return [list(e.values())[0] for e in found]

    def one(self, css):
        found = self.find(css)
        if not found:
            raise RuntimeError(f"no element {css} on {self.url()}")
        return found[0]

    def fill(self, css, text):
        """Types into the element `css`, found again while a navigation
        replaces the page."""
        for attempt in range(50):
            try:
                el = self.one(css)
                self.cmd("POST", self.s(f"/element/{el}/clear"))
                self.cmd("POST", self.s(f"/element/{el}/value"), {"text": text})
                return
            except RuntimeError:
                if attempt == 49:
                    raise
                time.sleep(0.1)

    def press(self, css):
        """Clicks the element `css` and waits for the page it loads."""
        before = self.script("return window.performance.timeOrigin;")
        self.cmd("POST", self.s(f"/element/{self.one(css)}/click"))
        end = time.time() + 10
        while time.time() < end:
            try:
                if (self.script("return window.performance.timeOrigin;") != before
                        and self.script("return document.readyState;") == "complete"):
                    return
            except RuntimeError:
                pass
            time.sleep(0.05)

    def click(self, el):
        self.cmd("POST", self.s(f"/element/{el}/click"))

    def text(self, el):
        return self.cmd("GET", self.s(f"/element/{el}/text"))

    def script(self, js, *args):
        return self.cmd("POST", self.s("/execute/sync"), {"script": js, "args": list(args)})

    def cookies(self):
        return self.cmd("GET", self.s("/cookie"))

    def screenshot(self, name):
        png = base64.b64decode(self.cmd("GET", self.s("/screenshot")))
        out = os.path.join(SHOTS or os.path.join(tempfile.gettempdir(), "console-shots"), name)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as f:
            f.write(png)

    def quit(self):
        try:
            self.cmd("DELETE", f"/session/{self.sid}")
        except Exception:
            pass


def main():
    state = tempfile.mkdtemp(prefix="toolhost-console-")
    ws = os.path.join(state, "ws")
    os.makedirs(os.path.join(ws, "data"))
    for name, text in [("old.txt", "a\n"), ("keep.txt", "b\n"), ("notes.txt", "hello\n"),
                       ("secret.env", f"GITHUB_TOKEN={SECRET}\n")]:
        with open(os.path.join(ws, name), "w") as f:
            f.write(text)
    env = dict(os.environ)
    env.update({
        "TOOLHOST_ROOT_KEY": "ab" * 32,
        "TOOLHOST_STORE": os.environ.get("TOOLHOST_CONSOLE_STORE")
        or os.path.join(state, "records.sqlite"),
        "TOOLHOST_CACHE_DIR": os.path.join(ROOT, "target/test-compile-cache"),
        "USER": "agent",
        "NO_COLOR": "1",
    })
    env.pop("TOOLHOST_TOKEN", None)

    def toolhost(*args, extra=None):
        argv = [BIN]
        if extra:
            argv += extra
        return subprocess.run(argv + list(args), cwd=ws, env=env, capture_output=True, text=True,
                              timeout=120)

    def obs(out):
        try:
            return json.loads(out.stdout)
        except ValueError:
            raise RuntimeError(f"not JSON: {out.stdout!r} {out.stderr!r}")

    console_token = toolhost("cap", "mint", "--console").stdout.strip()
    check(console_token.count(".") >= 1 or len(console_token) > 40, "a console token is minted")
    # An ordinary token opens no console; a console token calls no tool.
    ordinary = toolhost("cap", "mint", "--tool", "file_view", "--read", ".").stdout.strip()
    refused = toolhost("call", "file_view", '{"path":"notes.txt"}', "--token", console_token)
    check(refused.returncode != 0 and SECRET not in refused.stdout,
          "a console token calls no tool")

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [BIN, "--plugin", EFFECTS, "serve", "--http", f"127.0.0.1:{port}", "--console",
         "--workspace", ws, "--allow-read", "."],
        cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(state, "serve.log"), "w"))
    driver_port = free_port()
    chromedriver = subprocess.Popen([CHROMEDRIVER, f"--port={driver_port}"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    driver = None
    try:
        deadline = time.time() + 60
        while True:
            try:
                if http("GET", base + "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or server.poll() is not None:
                raise RuntimeError("the server did not start: " +
                                   open(os.path.join(state, "serve.log")).read()[-2000:])
            time.sleep(0.1)
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{driver_port}/status", timeout=2)
                break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("chromedriver did not start")
                time.sleep(0.1)
        driver = WebDriver(driver_port)
        run(driver, base, toolhost, obs, console_token, ordinary, ws)
    finally:
        if driver:
            driver.quit()
        chromedriver.terminate()
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log = open(os.path.join(state, "serve.log")).read()
        check("panicked" not in log, "the server did not panic")
        shutil.rmtree(state, ignore_errors=True)
    if FAILED:
        print(f"console: {len(FAILED)} check(s) failed", file=sys.stderr)
        return 1
    print("console: every check holds")
    return 0


def wait_for(pred, timeout, step=0.05):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


def run(d, base, toolhost, obs, console_token, ordinary, ws):
    seen_html = []

    def page(path, shot=None):
        d.get(base + path)
        wait_for(lambda: d.url().endswith(path)
                 and d.script("return document.readyState;") == "complete", 5)
        src = d.source()
        seen_html.append(src)
        if shot:
            d.screenshot(shot)
        return src

    # Login: refused, then accepted.
    d.get(base + "/console")
    check(d.url().endswith("/console/login"), "an anonymous visit goes to the login")
    d.screenshot("login.png")
    d.fill("#token", "not-a-token")
    d.press("#login")
    src = d.source()
    if not check("refused" in src and d.url().endswith("/console/login"),
                 "a wrong token is refused at login"):
        print(d.url(), src[:2000])
    d.fill("#token", ordinary)
    d.press("#login")
    check("refused" in d.source(), "an ordinary token opens no console")
    d.fill("#token", console_token)
    d.press("#login")
    check(d.url().endswith("/console/calls"), "the console token is accepted")
    cookies = d.cookies()
    cookie = next((c for c in cookies if c["name"] == "toolhost_console"), None)
    check(cookie is not None and cookie.get("httpOnly") and cookie.get("sameSite") == "Strict"
          and cookie.get("path") == "/console" and console_token not in cookie["value"],
          "the session cookie is HttpOnly, SameSite=Strict, Path=/console and not the token")

    # Live: a call in another process shows up within a second.
    d.get(base + "/console/calls")
    wait_for(lambda: "Live:" in d.text(d.one("#live-state")), 5)
    out = toolhost("call", "file_view", '{"path":"secret.env"}', "--allow-read", ".",
                   "--trajectory", f"watch-{RUN}", "--turn", "1", "--call-id", f"watch-{RUN}")
    ended = time.time()
    check(out.returncode == 0, "the secret file is read by a call")
    row = wait_for(lambda: d.script(
        "for (const r of document.querySelectorAll('#calls tbody tr'))"
        " if (r.textContent.includes('watch-" + RUN + "')) return r.id; return null;"), 5, 0.02)
    lag = time.time() - ended
    check(bool(row) and lag <= 1.0, f"the call appears live ({lag:.2f} s after it ended)")
    for i in range(3):
        toolhost("call", "file_view", '{"path":"notes.txt"}', "--allow-read", ".",
                 "--trajectory", f"t{i}-{RUN}", "--turn", "1", "--call-id", f"n{i}-{RUN}")
    toolhost("call", "file_view", '{"path":"missing.txt"}', "--allow-read", ".",
             "--trajectory", f"missing-{RUN}", "--turn", "1", "--call-id", f"missing-{RUN}")
    time.sleep(1)
    d.screenshot("calls.png")
    seen_html.append(d.source())
    if row:
        d.press(f"#{row} a")
        src = d.source()
        seen_html.append(src)
        check("secret.env" in src and "file_view" in src, "a row opens its journal entry")
        d.screenshot("call.png")

    # Approvals: approve in the page, the retry runs once; a denial is
    # approval_declined.
    def delete(path, key, approval=None):
        argv = ["call", "file_delete", json.dumps({"path": path}), "--allow-write", ".",
                "--idempotency-key", key]
        if approval:
            argv += ["--approval", approval]
        return toolhost(*argv)

    first = obs(delete("old.txt", f"k1-{RUN}"))
    aid = first.get("error", {}).get("details", {}).get("approval_id")
    check(first.get("error", {}).get("code") == "approval_pending" and bool(aid),
          "a deletion waits for a person")
    second = obs(delete("keep.txt", f"k2-{RUN}"))
    aid2 = second.get("error", {}).get("details", {}).get("approval_id")
    src = page("/console/approvals", "approvals.png")
    if not check("delete keep.txt" in src and "lines removed" in src,
                 "the approvals page shows the plans' summaries and changes"):
        print(d.url(), src[-3000:])
    d.fill(f"#note-{aid}", "looks right")
    d.press(f"#a-{aid} button.approve")
    check(d.url().endswith("/console/approvals") and not d.find(f"#a-{aid}"),
          "the approval leaves the pending list")
    retry = delete("old.txt", f"k1-{RUN}", aid)
    check(retry.returncode == 0 and not os.path.exists(os.path.join(ws, "old.txt")),
          "the approved call runs on the agent's retry")
    again = obs(delete("old.txt", f"k1-{RUN}", aid))
    check(again.get("effects", {}).get("replayed") is True,
          f"a second retry replays the result instead of running again ({again.get('effects')})")
    log = json.loads(toolhost("log", "--json").stdout)
    ran = [e for e in log if e["tool"] == "file_delete" and e["status"] == "ok"
           and e["args_summary"].get("args", {}).get("path") == "old.txt"]
    deciders = [e["args_summary"].get("approval", {}).get("decided_by", "") for e in log
                if isinstance(e["args_summary"].get("approval"), dict)]
    check(len(ran) >= 1 and any(by.startswith("console:") for by in deciders),
          f"the journal names the console as the decider ({deciders})")
    d.fill(f"#note-{aid2}", "not this one")
    d.press(f"#a-{aid2} button.deny")
    declined = obs(delete("keep.txt", f"k2-{RUN}", aid2))
    check(declined.get("error", {}).get("code") == "approval_declined"
          and os.path.exists(os.path.join(ws, "keep.txt")),
          "a denial reaches the agent as approval_declined")
    page("/console/approvals")

    # In doubt: a call stopped after its effect, settled from the page.
    stopped = obs(toolhost("call", "append_line_no_probe",
                           json.dumps({"path": "data/log.txt", "line": "x", "hold_ms": 60000}),
                           "--allow-write", "data", "--timeout-ms", "300",
                           "--idempotency-key", f"doubt-{RUN}", extra=["--plugin", EFFECTS]))
    check(stopped.get("status") == "unknown", "a stopped call leaves a record in doubt")
    src = page("/console/doubt", "doubt.png")
    check(f"doubt-{RUN}" in src, "the in-doubt record is listed")
    row = d.script("for (const f of document.querySelectorAll('#doubt form'))"
                   " if (f.key.value === arguments[0]) return f.id; return null;", f"doubt-{RUN}")
    if row:
        d.press(f"#{row} button[value=not_done]")
    records = json.loads(toolhost("records", "--state", "in_doubt").stdout)
    check(not any(r["key"] == f"doubt-{RUN}" for r in records)
          and f"doubt-{RUN}" not in d.source(),
          "the record is settled from the page")

    # Tokens: a child revoked from the page is refused on its next call.
    parent = toolhost("cap", "mint", "--tool", "file_view", "--read", ".", "--max-calls", "20"
                      ).stdout.strip()
    child = toolhost("cap", "attenuate", parent, "--tool", "file_view").stdout.strip()
    child_id = json.loads(toolhost("cap", "inspect", child).stdout)["id"]
    ok = toolhost("call", "file_view", '{"path":"notes.txt"}', "--token", child)
    check(ok.returncode == 0, "the child token calls")
    src = page("/console/tokens", "tokens.png")
    if not check(f"t-{child_id}" in src and "of 20 calls" in src,
                 "the tokens page shows the child under its parent with its budget"):
        print(child_id, src[-3000:])
    d.press(f"#t-{child_id} > .token button")
    check(len(d.find("#confirm")) == 1, "revoking asks for a confirmation")
    d.press("#confirm")
    time.sleep(1.2)  # revocations are seen within a second
    refused = obs(toolhost("call", "file_view", '{"path":"notes.txt"}', "--token", child))
    check(refused.get("status") != "ok", "the revoked child's next call is refused")
    src = page("/console/tokens")
    check("s-revoked" in src, "the page shows the token revoked")

    page("/console/plugins", "plugins.png")
    page("/console/health", "health.png")

    # CSRF and origin.
    sid = next(c["value"] for c in d.cookies() if c["name"] == "toolhost_console")
    src = d.source()
    marker = 'name="csrf" value="'
    csrf = src[src.index(marker) + len(marker):].split('"')[0]
    headers = {"Cookie": f"toolhost_console={sid}",
               "Content-Type": "application/x-www-form-urlencoded"}
    form = f"id={'0' * 32}&decision=approve"
    status = http("POST", base + "/console/approvals", form.encode(),
                  dict(headers, Origin=base))[0]
    check(status == 403, f"a POST without the CSRF token is refused ({status})")
    status = http("POST", base + "/console/approvals", f"{form}&csrf={csrf}".encode(),
                  dict(headers, Origin="http://evil.example"))[0]
    check(status == 403, f"a POST from another origin is refused ({status})")
    status = http("POST", base + "/console/approvals", f"{form}&csrf={csrf}".encode(),
                  dict(headers, Origin=base, **{"Sec-Fetch-Site": "cross-site"}))[0]
    check(status == 403, f"a cross-site POST is refused ({status})")
    status = http("POST", base + "/console/approvals", f"{form}&csrf={csrf}".encode(),
                  headers)[0]
    check(status == 403, f"a POST without Origin is refused ({status})")
    status = http("POST", base + "/console/approvals", f"{form}&csrf={csrf}".encode(),
                  dict(headers, Origin=base))[0]
    check(status == 404, f"the same POST with both passes the checks ({status})")
    status = http("GET", base + "/console/tokens")[0]
    check(status == 303, "a page without the cookie sends to the login")
    status = http("POST", base + "/mcp", b"{}", {"Authorization": f"Bearer {console_token}",
                                                  "Content-Type": "application/json"})[0]
    check(status == 401, "a console token is refused on /mcp")

    # The secret: nowhere in the pages or the event stream.
    stream = b""
    req = urllib.request.Request(base + "/console/events", headers={"Cookie": f"toolhost_console={sid}"})
    with urllib.request.urlopen(req, timeout=3) as r:
        end = time.time() + 2
        while time.time() < end:
            try:
                chunk = r.read1(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            stream += chunk
            if f"watch-{RUN}".encode() in stream and f"missing-{RUN}".encode() in stream:
                break
    check(f"watch-{RUN}".encode() in stream, "the event stream carries the calls")
    for path in ["/console/calls", "/console/approvals", "/console/doubt", "/console/tokens",
                 "/console/plugins", "/console/health"]:
        page(path)
    everything = "\n".join(seen_html) + stream.decode("utf-8", "replace")
    check(SECRET not in everything and SECRET[:12] not in everything,
          "the secret appears nowhere in the pages or the event stream")
    check(console_token not in everything and ordinary not in everything,
          "no token text appears in the pages")

    # Phone width: the pages still render (nothing wider than the screen
    # but the scrolling tables).
    d.viewport(400, 800)
    d.get(base + "/console/tokens")
    wide = d.script("return document.documentElement.scrollWidth;")
    check(wide <= 420, f"the tokens page fits a phone ({wide} px)")
    d.viewport(1280, 800)

    # Logout ends the session.
    d.get(base + "/console/calls")
    d.press(".logout button")
    check(d.url().endswith("/console/login"), "logging out returns to the login")
    status = http("GET", base + "/console/calls", headers={"Cookie": f"toolhost_console={sid}"})[0]
    check(status == 303, "the old session no longer opens pages")


if __name__ == "__main__":
    sys.exit(main())
