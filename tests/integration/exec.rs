//! The exec sandbox (`toolhost_exec`) with real programs in real bubblewrap
//! sandboxes: allow-lists checked before anything starts, what the program
//! can see and write, no network, deadlines, cancellation, process trees
//! that resist, fork bombs, huge and colored output.
//!
//! These tests need `bwrap` (`apt-get install bubblewrap`, done by
//! `.ci/run`) and a way to bound processes (a pids cgroup, or an
//! unprivileged user). Without them they fail, naming what is missing:
//! they never pass without running.
//!
//! Workspaces live in `CARGO_TARGET_TMPDIR` (under the repository), not in
//! `/tmp`: the sandbox has a private `/tmp`, so a secret under the host's
//! `/tmp` would be invisible for the wrong reason.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use toolhost_exec::{
    AllowedPrograms, Cancel, ExecConfig, ExecError, ExecMount, ExecOutcome, ExecRequest, Executor,
};

fn executor() -> &'static Executor {
    static EXEC: OnceLock<Executor> = OnceLock::new();
    let e = EXEC.get_or_init(Executor::default);
    if let Err(err) = e.probe() {
        panic!("the exec sandbox cannot run on this machine: {err}");
    }
    e
}

fn allow(names: &[&str]) -> AllowedPrograms {
    executor()
        .resolve_programs(names)
        .expect("programs resolve")
}

/// A request for `argv` allowing `programs`, cwd `/tmp`, 20 s.
fn request(argv: &[&str], programs: &[&str]) -> ExecRequest {
    let mut r = ExecRequest::new(argv.iter().copied());
    r.programs = allow(programs);
    r.timeout = Duration::from_secs(20);
    r
}

fn run(req: &ExecRequest) -> ExecOutcome {
    executor().run(req, None).expect("the run completes")
}

/// `sh -c SCRIPT` with `sh` (and `extra`) allowed.
fn sh(script: &str, extra: &[&str]) -> ExecRequest {
    let mut programs = vec!["sh"];
    programs.extend_from_slice(extra);
    request(&["sh", "-c", script], &programs)
}

/// A temporary directory outside `/tmp`.
fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir")
}

/// A number no other test in this run uses, for markers in command lines.
pub(crate) fn unique() -> u64 {
    static N: AtomicU64 = AtomicU64::new(1);
    u64::from(std::process::id()) * 1000 + N.fetch_add(1, Ordering::Relaxed)
}

/// Processes on the host whose command line contains `marker`.
pub(crate) fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                found.push(format!("{pid}: {cmd}"));
            }
        }
    }
    found
}

/// Zombies: (children of this test process, `bwrap`s with another parent).
/// A sandbox's init orphaned to pid 1 instead of reaped here is the second.
fn zombies() -> (Vec<String>, Vec<String>) {
    let me = std::process::id().to_string();
    let (mut ours, mut elsewhere) = (Vec::new(), Vec::new());
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let mut f = stat[close + 1..].split_whitespace();
        if let (Some("Z"), Some(ppid)) = (f.next(), f.next()) {
            let who = format!("{} ppid {ppid}", &stat[..close + 1]);
            if ppid == me {
                ours.push(who);
            } else if stat.contains("(bwrap)") {
                elsewhere.push(who);
            }
        }
    }
    (ours, elsewhere)
}

/// Asserts that nothing of a run is left: no process with `marker`, no
/// orphaned `bwrap` zombie, and (allowing a moment for a concurrent test's
/// own reaping) no zombie child.
pub(crate) fn assert_nothing_left(marker: &str) {
    let left = processes_with(marker);
    assert!(left.is_empty(), "processes left after the call: {left:?}");
    let (_, orphaned) = zombies();
    assert!(
        orphaned.is_empty(),
        "zombies left to another reaper: {orphaned:?}"
    );
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let (ours, _) = zombies();
        if ours.is_empty() {
            break;
        }
        assert!(Instant::now() < until, "zombie children: {ours:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Samples the number of processes with `marker` until `stop`; returns the
/// largest count seen.
fn watch(marker: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut max = 0;
        while !stop.load(Ordering::SeqCst) {
            max = max.max(processes_with(&marker).len());
            std::thread::sleep(Duration::from_millis(20));
        }
        max
    })
}

// ---- running, exit codes, streams ----

#[test]
fn echo_exit_codes_and_signals_are_normal_outcomes() {
    let o = run(&request(&["echo", "hello", "world"], &["echo"]));
    assert_eq!(o.exit_code, Some(0));
    assert_eq!(o.signal, None);
    assert_eq!(o.stdout.text, "hello world\n");
    assert_eq!(o.stderr.text, "");
    assert!(!o.timed_out && !o.cancelled);

    let o = run(&request(&["false"], &["false"]));
    assert_eq!(o.exit_code, Some(1));

    let o = run(&sh("echo out; echo err >&2; exit 3", &[]));
    assert_eq!((o.exit_code, o.signal), (Some(3), None));
    assert_eq!(o.stdout.text, "out\n");
    assert_eq!(o.stderr.text, "err\n");

    let o = run(&sh("kill -TERM $$", &[]));
    assert_eq!((o.exit_code, o.signal), (None, Some(15)));

    let mut r = request(&["cat"], &["cat"]);
    r.stdin = b"from stdin\n".to_vec();
    let o = run(&r);
    assert_eq!(o.stdout.text, "from stdin\n");
    assert_eq!(o.exit_code, Some(0));

    // stdin is sealed: the program cannot use it to store data.
    let mut r = sh("cat; echo more >> /proc/self/fd/0 && echo WROTE", &[]);
    r.stdin = b"x\n".to_vec();
    let o = run(&r);
    assert_eq!(o.stdout.text, "x\n", "{}", o.stderr.text);
}

#[test]
fn the_program_runs_as_the_sandbox_user_with_a_cleared_environment() {
    let mut r = sh(
        "(: <>/dev/tty) 2>/dev/null && echo TTY; \
         id -u; id -g; cat /proc/sys/kernel/hostname; echo \"$HOME\"; env | cut -d= -f1 | sort",
        &[],
    );
    r.env = vec![("CI_FLAG".into(), "1".into())];
    r.env_allowed = BTreeSet::from(["CI_FLAG".to_owned(), "OTHER".to_owned()]);
    // The host's environment has plenty; none of it may leak.
    let o = run(&r);
    assert_eq!(o.exit_code, Some(0), "{}", o.stderr.text);
    let lines: Vec<&str> = o.stdout.text.lines().collect();
    assert_eq!(&lines[..4], ["1000", "1000", "sandbox", "/tmp/home"]);
    let names: BTreeSet<&str> = lines[4..].iter().copied().collect();
    let expected: BTreeSet<&str> = ["CI_FLAG", "HOME", "LANG", "PATH", "PWD"].into();
    assert_eq!(names, expected);

    // A variable outside the allow-list is refused before anything runs.
    r.env.push(("LD_PRELOAD".into(), "/x.so".into()));
    let e = executor().run(&r, None).unwrap_err();
    assert_eq!(e.code(), "denied");
    assert!(e.to_string().contains("LD_PRELOAD"), "{e}");
}

#[test]
fn limits_are_set_and_descriptors_do_not_leak() {
    let mut r = request(&["cat", "/proc/self/limits"], &["cat"]);
    r.limits.open_files = 77;
    r.limits.address_space_bytes = 3 << 30;
    let o = run(&r);
    let limits = o.stdout.text;
    let row = |name: &str| -> String {
        let line = limits
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {limits}"));
        line[name.len()..]
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(row("Max open files"), "77 77");
    assert_eq!(
        row("Max address space"),
        format!("{} {}", 3u64 << 30, 3u64 << 30)
    );
    assert_eq!(row("Max core file size"), "0 0");
    assert_eq!(row("Max cpu time"), "21 22");
    assert_eq!(row("Max processes"), "257 257");
    assert_eq!(
        row("Max file size"),
        format!("{} {}", 1u64 << 30, 1u64 << 30)
    );

    // Niceness 10: the host's own work comes first.
    let o = run(&request(&["cat", "/proc/self/stat"], &["cat"]));
    let after_comm = &o.stdout.text[o.stdout.text.rfind(')').unwrap() + 1..];
    let nice = after_comm.split_whitespace().nth(16).unwrap();
    assert_eq!(nice, "10", "{}", o.stdout.text);

    // Only stdin, stdout, stderr (and ls's own directory handle).
    let o = run(&request(&["ls", "/proc/self/fd"], &["ls"]));
    let fds: BTreeSet<&str> = o.stdout.text.split_whitespace().collect();
    assert!(fds.is_subset(&["0", "1", "2", "3"].into()), "{fds:?}");
}

// ---- the allow-list ----

#[test]
fn a_program_outside_the_allow_list_is_denied_before_it_starts() {
    let ws = tempdir();
    let marker = ws.path().join("marker");
    let mut r = request(&["touch", "/workspace/marker"], &["echo", "ls"]);
    r.mounts
        .push(ExecMount::path(ws.path(), "/workspace", true));
    r.cwd = "/workspace".into();
    let e = executor().run(&r, None).unwrap_err();
    assert!(
        matches!(e, ExecError::Denied { ref subject, .. } if subject == "touch"),
        "{e}"
    );
    assert_eq!(e.code(), "denied");
    assert!(e.to_string().contains("`touch`"), "{e}");
    assert!(!marker.exists(), "a denied program ran");

    // By absolute path it is the same program, and still denied.
    r.argv[0] = "/usr/bin/touch".into();
    assert_eq!(executor().run(&r, None).unwrap_err().code(), "denied");
    assert!(!marker.exists());

    // The same request with the program allowed does run.
    r.programs = allow(&["touch"]);
    assert_eq!(run(&r).exit_code, Some(0));
    assert!(marker.exists());
}

#[test]
fn sh_c_is_denied_unless_sh_is_allowed() {
    let ws = tempdir();
    let marker = ws.path().join("m");
    let mut r = request(&["sh", "-c", "touch /workspace/m"], &["touch"]);
    r.mounts
        .push(ExecMount::path(ws.path(), "/workspace", true));
    let e = executor().run(&r, None).unwrap_err();
    assert_eq!(e.code(), "denied");
    assert!(e.to_string().contains("`sh`"), "{e}");
    assert!(!marker.exists());
    r.programs = allow(&["sh", "touch"]);
    assert_eq!(run(&r).exit_code, Some(0));
    assert!(marker.exists());
}

// ---- what the program can see and write ----

#[test]
fn nothing_of_the_host_is_visible_beyond_the_mounts() {
    let root = tempdir();
    let ws = root.path().join("ws");
    let secret = root.path().join("secret");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("key.txt"), "TOP SECRET").unwrap();
    std::fs::write(ws.join("mine.txt"), "visible").unwrap();
    std::os::unix::fs::symlink(secret.join("key.txt"), ws.join("link")).unwrap();
    std::os::unix::fs::symlink(&secret, ws.join("dirlink")).unwrap();

    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let repo = env!("CARGO_MANIFEST_DIR");
    let probes = [
        "/etc/shadow".to_owned(),
        "/etc/gshadow".to_owned(),
        "/etc/ssh".to_owned(),
        "/root".to_owned(),
        home.clone(),
        "/home".to_owned(),
        "/var".to_owned(),
        "/sys".to_owned(),
        "/run".to_owned(),
        "/work".to_owned(),
        repo.to_owned(),
        secret.display().to_string(),
        secret.join("key.txt").display().to_string(),
        ws.display().to_string(),
    ];
    let script = format!(
        "for p in {}; do [ -e \"$p\" ] && echo \"VISIBLE $p\"; done; \
         cat /workspace/link 2>/dev/null && echo 'VISIBLE via link'; \
         ls /workspace/dirlink/ 2>/dev/null && echo 'VISIBLE via dirlink'; \
         cat /workspace/mine.txt; echo; cat /proc/1/comm; ls /proc | grep -c '^[0-9]'",
        probes
            .iter()
            .map(|p| format!("'{p}'"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut r = sh(&script, &[]);
    r.mounts.push(ExecMount::path(&ws, "/workspace", false));
    let o = run(&r);
    assert!(!o.stdout.text.contains("VISIBLE"), "{}", o.stdout.text);
    assert!(!o.stdout.text.contains("TOP SECRET"), "{}", o.stdout.text);
    let lines: Vec<&str> = o.stdout.text.lines().collect();
    assert_eq!(lines[0], "visible");
    // The PID namespace: its init is bwrap, and only a handful of pids.
    assert_eq!(lines[1], "bwrap");
    let pids: usize = lines[2].parse().unwrap();
    assert!(pids <= 5, "{pids} processes visible in /proc");
    // /etc holds only the minimal set.
    let o = run(&request(&["ls", "-A", "/etc"], &["ls"]));
    for name in o.stdout.text.split_whitespace() {
        assert!(
            [
                "alternatives",
                "group",
                "hosts",
                "ld.so.cache",
                "ld.so.conf",
                "ld.so.conf.d",
                "localtime",
                "nsswitch.conf",
                "passwd",
                "protocols",
                "services"
            ]
            .contains(&name),
            "unexpected /etc/{name}"
        );
    }
}

#[test]
fn writes_fail_under_a_read_only_mount_and_succeed_under_a_writable_one() {
    let ws = tempdir();
    std::fs::create_dir_all(ws.path().join("out")).unwrap();
    std::fs::write(ws.path().join("src.txt"), "source").unwrap();
    let mut r = sh(
        "echo x > /workspace/new.txt; echo \"ro=$?\"; \
         echo more >> /workspace/src.txt; echo \"append=$?\"; \
         rm /workspace/src.txt; echo \"rm=$?\"; \
         echo y > /workspace/out/new.txt; echo \"rw=$?\"; \
         echo t > /tmp/t && echo \"tmp=$?\"; echo r > /r 2>/dev/null; echo \"root=$?\"",
        &[],
    );
    r.mounts
        .push(ExecMount::path(ws.path(), "/workspace", false));
    r.mounts.push(ExecMount::path(
        ws.path().join("out"),
        "/workspace/out",
        true,
    ));
    let o = run(&r);
    let s = &o.stdout.text;
    assert!(s.contains("ro=2") || s.contains("ro=1"), "{s}");
    assert!(!s.contains("append=0") && !s.contains("rm=0"), "{s}");
    assert!(s.contains("rw=0") && s.contains("tmp=0"), "{s}");
    assert!(!s.contains("root=0"), "{s}");
    assert!(
        o.stderr.text.contains("Read-only file system"),
        "{}",
        o.stderr.text
    );
    assert!(!ws.path().join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src.txt")).unwrap(),
        "source"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out/new.txt")).unwrap(),
        "y\n"
    );
}

#[test]
fn a_program_cannot_leave_a_symbolic_link() {
    let ws = tempdir();
    let mut r = sh(
        "cd /workspace; ln -s /etc/passwd x; echo \"ln=$?\"; \
         perl -e 'symlink(\"/etc/passwd\", \"y\") or print \"perl=\", $!+0, \"\\n\"'; \
         echo data > f; echo \"write=$?\"; ln f g; echo \"hard=$?\"; ls -A",
        &["ln", "perl", "ls"],
    );
    r.mounts
        .push(ExecMount::path(ws.path(), "/workspace", true));
    let o = run(&r);
    let s = &o.stdout.text;
    assert!(s.contains("ln=1"), "{s} {}", o.stderr.text);
    assert!(
        o.stderr.text.contains("Operation not permitted"),
        "{}",
        o.stderr.text
    );
    // symlink(2) itself, not only symlinkat(2): EPERM is 1.
    assert!(s.contains("perl=1"), "{s}");
    assert!(s.contains("write=0") && s.contains("hard=0"), "{s}");
    for name in ["x", "y"] {
        assert!(
            std::fs::symlink_metadata(ws.path().join(name)).is_err(),
            "{name} was left"
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.path().join("g")).unwrap(),
        "data\n"
    );
}

#[test]
fn a_descriptor_mount_binds_the_opened_directory_not_what_its_path_became() {
    let root = tempdir();
    let dir = root.path().join("grant");
    let secret = root.path().join("secret");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(dir.join("f.txt"), "granted").unwrap();
    std::fs::write(secret.join("f.txt"), "TOP SECRET").unwrap();
    let fd: OwnedFd = std::fs::File::open(&dir).unwrap().into();
    // Swap the path for a symlink to the secret after the grant was opened.
    std::fs::rename(&dir, root.path().join("moved")).unwrap();
    std::os::unix::fs::symlink(&secret, &dir).unwrap();

    let mut r = request(&["cat", "/workspace/f.txt"], &["cat"]);
    r.mounts.push(ExecMount::fd(fd, "/workspace", false));
    let o = run(&r);
    assert_eq!(o.stdout.text, "granted");

    // A descriptor of a file, not a directory, is refused.
    let file: OwnedFd = std::fs::File::open(secret.join("f.txt")).unwrap().into();
    let mut r = request(&["true"], &["true"]);
    r.mounts.push(ExecMount::fd(file, "/workspace", false));
    assert_eq!(
        executor().run(&r, None).unwrap_err().code(),
        "invalid_arguments"
    );
}

#[test]
fn there_is_no_network() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "if exec 3<>/dev/tcp/127.0.0.1/{port}; then echo CONNECTED; fi; \
         if exec 4<>/dev/tcp/1.1.1.1/80; then echo CONNECTED-OUT; fi; \
         cat /proc/net/dev | tail -n +3 | cut -d: -f1; \
         tail -n +2 /proc/net/route | wc -l"
    );
    let mut r = request(&["bash", "-c", &script], &["bash"]);
    r.timeout = Duration::from_secs(10);
    let o = run(&r);
    assert!(!o.stdout.text.contains("CONNECTED"), "{}", o.stdout.text);
    assert!(
        o.stderr.text.contains("Connection refused"),
        "{}",
        o.stderr.text
    );
    assert!(o.stderr.text.contains("unreachable"), "{}", o.stderr.text);
    let lines: Vec<&str> = o.stdout.text.lines().map(str::trim).collect();
    assert_eq!(lines, ["lo", "0"], "interfaces, then routes");
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the host listener was reached: {other:?}"),
    }
}

// ---- deadlines, cancellation, process trees ----

#[test]
fn a_long_sleep_ends_at_the_deadline_with_nothing_left() {
    let n = unique();
    let arg = format!("30.{n:09}");
    let mut r = request(&["sleep", &arg], &["sleep"]);
    r.timeout = Duration::from_secs(1);
    let start = Instant::now();
    let o = run(&r);
    let elapsed = start.elapsed();
    assert!(o.timed_out, "{o:?}");
    assert_eq!((o.exit_code, o.signal), (None, Some(9)));
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
    assert!(o.duration >= Duration::from_secs(1));
    assert_nothing_left(&arg);
}

#[test]
fn a_tree_that_ignores_sigterm_and_forks_is_killed_whole() {
    let n = unique();
    let mark = format!("30.{n:09}");
    // Children that ignore TERM, one detached into its own session, a
    // double fork that reparents to the sandbox's init; then the parent
    // loops forever ignoring TERM too.
    let script = format!(
        "trap '' TERM HUP INT; \
         for i in 1 2 3; do (trap '' TERM; exec sleep {mark}) & done; \
         setsid sh -c \"trap '' TERM; sleep {mark}\" & \
         (sh -c \"sleep {mark}\" &) ; \
         echo started; while :; do sleep 1; done # {mark}"
    );
    let mut r = sh(&script, &[]);
    r.timeout = Duration::from_millis(1500);
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch(mark.clone(), stop.clone());
    let start = Instant::now();
    let o = run(&r);
    let elapsed = start.elapsed();
    stop.store(true, Ordering::SeqCst);
    let seen = watcher.join().unwrap();
    assert!(o.timed_out);
    assert_eq!(o.stdout.text, "started\n");
    assert!(
        seen >= 5,
        "only {seen} processes of the tree were seen running"
    );
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    assert_nothing_left(&mark);
}

#[test]
fn cancellation_kills_the_run_promptly() {
    let n = unique();
    let arg = format!("30.{n:09}");
    let mut r = request(&["sleep", &arg], &["sleep"]);
    r.timeout = Duration::from_secs(30);
    let cancel = Cancel::new();
    let c2 = cancel.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        c2.cancel();
    });
    let start = Instant::now();
    let o = executor().run(&r, Some(&cancel)).unwrap();
    canceller.join().unwrap();
    assert!(o.cancelled && !o.timed_out, "{o:?}");
    assert_eq!(o.signal, Some(9));
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
    assert_nothing_left(&arg);
}

#[test]
fn a_fork_bomb_is_bounded_and_the_host_stays_responsive() {
    let n = unique();
    let mark = format!("{n}");
    let script = format!("bomb() {{ bomb | bomb & }}; bomb; sleep 2 # {mark}");
    let mut r = sh(&script, &[]);
    r.limits.processes = 32;
    r.timeout = Duration::from_secs(4);

    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch(mark.clone(), stop.clone());
    // While the bomb runs, time host work: starting a process and a short
    // sleep. A bomb that got out would make both crawl (pid exhaustion,
    // a run queue thousands deep).
    let stop2 = stop.clone();
    let prober = std::thread::spawn(move || {
        let mut worst = Duration::ZERO;
        std::thread::sleep(Duration::from_millis(200));
        while !stop2.load(Ordering::SeqCst) {
            let t = Instant::now();
            let ok = std::process::Command::new("true")
                .status()
                .map(|s| s.success());
            std::thread::sleep(Duration::from_millis(10));
            worst = worst.max(t.elapsed());
            assert!(
                matches!(ok, Ok(true)),
                "the host could not start a process: {ok:?}"
            );
        }
        worst
    });
    let o = run(&r);
    stop.store(true, Ordering::SeqCst);
    let seen = watcher.join().unwrap();
    let worst = prober.join().unwrap();
    eprintln!(
        "fork bomb: peak {:?} tasks, {seen} seen from the host, worst host probe {worst:?}, {:?}",
        o.peak_processes, o.duration
    );
    let err = o.stderr.text.to_lowercase();
    assert!(
        err.contains("fork"),
        "the bound was never hit: {}",
        o.stderr.text
    );
    if let Some(peak) = o.peak_processes {
        assert!(peak <= 33, "peak {peak} tasks");
    }
    assert!(seen <= 33, "{seen} bomb processes seen at once");
    assert!(worst < Duration::from_secs(1), "host probe took {worst:?}");
    assert_nothing_left(&mark);
}

// ---- output ----

#[test]
fn three_megabytes_of_output_are_clipped_with_the_omitted_count() {
    let mut r = sh(
        "yes 'a line of build output' | head -c 1500000; echo; \
         echo 'error: the one line that matters'; \
         yes 'more output' | head -c 1500000",
        &[],
    );
    r.max_stdout_bytes = 16 * 1024;
    let o = run(&r);
    assert_eq!(o.exit_code, Some(0));
    let total = 1_500_000 + 1 + "error: the one line that matters\n".len() as u64 + 1_500_000;
    assert_eq!(o.stdout.total_bytes, total);
    assert!(
        o.stdout.omitted_bytes > total - 16 * 1024,
        "{}",
        o.stdout.omitted_bytes
    );
    assert!(
        o.stdout.text.len() < 16 * 1024 + 200,
        "{}",
        o.stdout.text.len()
    );
    assert!(o.stdout.text.starts_with("a line of build output\n"));
    assert!(o.stdout.text.ends_with("more output\n"));
    assert!(o
        .stdout
        .text
        .contains("\nerror: the one line that matters\n"));
    assert!(o.stdout.text.contains(" bytes omitted …]\n"));
    assert_eq!(o.stdout.key_lines, 1);
}

#[test]
fn ansi_escapes_and_progress_rewrites_are_stripped() {
    let o = run(&sh(
        r"printf '\033[1;31mred\033[0m plain\n10%%\r50%%\r100%%\nab\bc\n\033]0;title\007done\n'",
        &[],
    ));
    assert_eq!(o.stdout.text, "red plain\n100%\nac\ndone\n");
}

// ---- failures of the request or the host ----

#[test]
fn a_missing_working_directory_is_a_setup_error() {
    let ws = tempdir();
    let mut r = request(&["true"], &["true"]);
    r.mounts
        .push(ExecMount::path(ws.path(), "/workspace", false));
    r.cwd = "/workspace/does-not-exist".into();
    let e = executor().run(&r, None).unwrap_err();
    assert!(matches!(e, ExecError::Setup(_)), "{e}");
    assert!(e.to_string().contains("does-not-exist"), "{e}");
}

#[test]
fn without_bubblewrap_exec_is_unavailable_and_checks_still_apply() {
    let e = Executor::new(ExecConfig {
        bwrap: Some(PathBuf::from("/nonexistent/bwrap")),
        ..ExecConfig::default()
    });
    let mut r = ExecRequest::new(["true"]);
    r.programs = e.resolve_programs(["true"]).unwrap();
    let err = e.run(&r, None).unwrap_err();
    assert_eq!(err.code(), "exec_unavailable");
    assert!(
        err.to_string().contains("apt-get install bubblewrap"),
        "{err}"
    );
    // A denied request is still denied, before any bwrap question.
    r.programs = AllowedPrograms::none();
    assert_eq!(e.run(&r, None).unwrap_err().code(), "denied");

    // Not on PATH at all.
    let e = Executor::new(ExecConfig {
        search_path: Some("/nonexistent".into()),
        ..ExecConfig::default()
    });
    let err = e.probe().unwrap_err();
    assert!(
        err.to_string().contains("apt-get install bubblewrap"),
        "{err}"
    );
}
