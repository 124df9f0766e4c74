//! bubblewrap: finding and checking it ([`probe`]) and the argument list of
//! one sandbox ([`args`]).
//!
//! The argument list, in order (`FD`s are descriptors passed to `bwrap`):
//!
//! ```text
//! --unshare-user --uid 1000 --gid 1000 [--disable-userns]
//! --unshare-pid --unshare-ipc --unshare-uts --unshare-net --unshare-cgroup-try
//! --hostname sandbox --die-with-parent [--new-session]       (if the host has a terminal)
//! --clearenv --setenv PATH /usr/local/bin:/usr/bin:/bin --setenv HOME /tmp/home
//!   --setenv LANG C.UTF-8 [--setenv NAME VALUE]…
//! --ro-bind /usr /usr
//! --symlink usr/bin /bin | --ro-bind /bin /bin          (likewise /sbin, /lib, /lib32, /lib64, /libx32)
//! --perms 0755 --dir /etc
//! --ro-bind-try /etc/F /etc/F                           (F in ETC_FILES)
//! --perms 0644 --ro-bind-data FD /etc/passwd            (and /etc/group, /etc/hosts)
//! --proc /proc --dev /dev
//! --perms 1777 --size S --tmpfs /dev/shm
//! --perms 1777 --size S --tmpfs /tmp --perms 0700 --dir /tmp/home
//! [--ro-bind-try P P]…                                  (ExecConfig::extra_ro_paths)
//! [--ro-bind PROGRAM PROGRAM]                           (a program outside those)
//! [--bind-fd FD TARGET | --ro-bind-fd FD TARGET]…       (the mounts, parents first)
//! --remount-ro /dev --remount-ro /
//! --chdir CWD --info-fd FD --block-fd FD --seccomp FD   (no symlinks: seccomp.rs)
//! -- PROGRAM ARG…
//! ```

use std::ffi::{OsStr, OsString};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::bound::{self, ProcessBound};
use super::program::{self, is_under, Plan};
use super::{ExecConfig, ExecRequest, INSTALL_HINT, SANDBOX_HOME, SANDBOX_PATH, SANDBOX_UID};

/// Host files of `/etc` a program may need, bound read-only when present.
/// Nothing secret, nothing that points outside (no `resolv.conf`: there is
/// no network).
pub(super) const ETC_FILES: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "nsswitch.conf",
    "alternatives",
    "localtime",
    "protocols",
    "services",
];

/// Top-level system directories besides `/usr`, mirrored as the host has
/// them: a symlink (merged `/usr`) or a read-only bind.
const SYSTEM_DIRS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

pub(super) const PASSWD: &str = "root:x:0:0:root:/root:/usr/sbin/nologin\n\
sandbox:x:1000:1000:sandbox:/tmp/home:/bin/sh\n\
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
pub(super) const GROUP: &str = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n";
pub(super) const HOSTS: &str =
    "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n";

/// One top-level system directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SystemDir {
    /// `path` is a symlink to `target` on the host.
    Symlink { path: PathBuf, target: PathBuf },
    /// `path` is a directory, bound read-only.
    Dir(PathBuf),
}

/// What the probe found out about bubblewrap and this host.
#[derive(Debug, Clone)]
pub struct BwrapInfo {
    /// The `bwrap` binary.
    pub path: PathBuf,
    /// Its `--version` line, e.g. `bubblewrap 0.8.0`.
    pub version: String,
    /// It has `--disable-userns` (bubblewrap ≥ 0.8).
    pub disable_userns: bool,
    /// How runs are bounded in processes.
    pub bound: ProcessBound,
    pub(super) system: Vec<SystemDir>,
}

fn system_dirs() -> Vec<SystemDir> {
    let mut out = Vec::new();
    for d in SYSTEM_DIRS {
        let path = PathBuf::from(d);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(&path) {
                    out.push(SystemDir::Symlink { path, target });
                }
            }
            Ok(m) if m.is_dir() => out.push(SystemDir::Dir(path)),
            _ => {}
        }
    }
    out
}

fn output_of(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("cannot run it: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// Finds bubblewrap, checks its features and the process bound (the trial
/// run that follows is [`super::run::trial_run`]). The error says what to
/// install or change.
pub(super) fn probe(cfg: &ExecConfig, search_path: &OsStr) -> Result<BwrapInfo, String> {
    let path = match &cfg.bwrap {
        Some(p) => p.clone(),
        None => program::resolve("bwrap", search_path).map_err(|_| {
            format!("bubblewrap (`bwrap`) is not installed or not on PATH; install it with `{INSTALL_HINT}`")
        })?,
    };
    if !path.is_file() {
        return Err(format!(
            "bubblewrap was not found at {}; install it with `{INSTALL_HINT}`",
            path.display()
        ));
    }
    let version = output_of(Command::new(&path).arg("--version").env_clear())
        .map_err(|e| format!("{}: {e}", path.display()))?
        .trim()
        .to_owned();
    let help = output_of(Command::new(&path).arg("--help").env_clear())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    for needed in [
        "--ro-bind-fd",
        "--size",
        "--block-fd",
        "--info-fd",
        "--perms",
        "--seccomp",
    ] {
        if !help.contains(needed) {
            return Err(format!(
                "{version} at {} lacks `{needed}`; toolhost needs bubblewrap ≥ 0.10 \
                 (or Debian 12's 0.8.0-2+deb12u1, which has --ro-bind-fd): `{INSTALL_HINT}`",
                path.display()
            ));
        }
    }
    if !Path::new("/usr").is_dir() {
        return Err("this host has no /usr to give the sandbox".to_owned());
    }
    let info = BwrapInfo {
        disable_userns: help.contains("--disable-userns"),
        path,
        version,
        bound: bound::detect()?,
        system: system_dirs(),
    };
    Ok(info)
}

/// Descriptor numbers the sandbox is given.
#[derive(Debug, Clone)]
pub(super) struct Fds {
    pub info: RawFd,
    pub block: RawFd,
    pub passwd: RawFd,
    pub group: RawFd,
    pub hosts: RawFd,
    /// The seccomp filter ([`super::seccomp`]).
    pub seccomp: RawFd,
    /// One per mount, in `plan.mount_order`.
    pub mounts: Vec<RawFd>,
    /// Start a new session: the host has a controlling terminal the
    /// program must not reach.
    pub new_session: bool,
}

/// Whether `p` is visible in every sandbox (system directories and the
/// configured extra paths).
fn visible(info: &BwrapInfo, cfg: &ExecConfig, p: &Path) -> bool {
    let s = p.to_string_lossy();
    is_under(&s, "/usr")
        || info.system.iter().any(|d| match d {
            SystemDir::Symlink { path, .. } | SystemDir::Dir(path) => {
                is_under(&s, &path.to_string_lossy())
            }
        })
        || cfg
            .extra_ro_paths
            .iter()
            .any(|e| is_under(&s, &e.to_string_lossy()))
}

/// The full `bwrap` argument list of one run.
pub(super) fn args(
    info: &BwrapInfo,
    cfg: &ExecConfig,
    req: &ExecRequest,
    plan: &Plan,
    fds: &Fds,
) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::with_capacity(96);
    let mut push = |items: &[&dyn AsRef<OsStr>]| {
        a.extend(items.iter().map(|i| i.as_ref().to_owned()));
    };
    let uid = SANDBOX_UID.to_string();
    let scratch = req.limits.scratch_bytes.to_string();

    push(&[&"--unshare-user", &"--uid", &uid, &"--gid", &uid]);
    if info.disable_userns {
        push(&[&"--disable-userns"]);
    }
    push(&[
        &"--unshare-pid",
        &"--unshare-ipc",
        &"--unshare-uts",
        &"--unshare-net",
        &"--unshare-cgroup-try",
        &"--hostname",
        &"sandbox",
        &"--die-with-parent",
    ]);
    if fds.new_session {
        push(&[&"--new-session"]);
    }

    // A cleared environment; allowed variables may override the defaults.
    push(&[&"--clearenv"]);
    for (k, v) in [
        ("PATH", SANDBOX_PATH),
        ("HOME", SANDBOX_HOME),
        ("LANG", "C.UTF-8"),
    ] {
        if !req.env.iter().any(|(name, _)| name == k) {
            push(&[&"--setenv", &k, &v]);
        }
    }
    for (k, v) in &req.env {
        push(&[&"--setenv", k, v]);
    }

    // System directories, read-only.
    push(&[&"--ro-bind", &"/usr", &"/usr"]);
    for d in &info.system {
        match d {
            SystemDir::Symlink { path, target } => push(&[&"--symlink", target, path]),
            SystemDir::Dir(path) => push(&[&"--ro-bind", path, path]),
        }
    }

    // A minimal /etc.
    push(&[&"--perms", &"0755", &"--dir", &"/etc"]);
    for f in ETC_FILES {
        let p = format!("/etc/{f}");
        push(&[&"--ro-bind-try", &p, &p]);
    }
    for (fd, name) in [
        (fds.passwd, "/etc/passwd"),
        (fds.group, "/etc/group"),
        (fds.hosts, "/etc/hosts"),
    ] {
        push(&[
            &"--perms",
            &"0644",
            &"--ro-bind-data",
            &fd.to_string(),
            &name,
        ]);
    }

    // Kernel interfaces and scratch space.
    push(&[&"--proc", &"/proc", &"--dev", &"/dev"]);
    push(&[
        &"--perms",
        &"1777",
        &"--size",
        &scratch,
        &"--tmpfs",
        &"/dev/shm",
    ]);
    push(&[
        &"--perms", &"1777", &"--size", &scratch, &"--tmpfs", &"/tmp",
    ]);
    push(&[&"--perms", &"0700", &"--dir", &SANDBOX_HOME]);

    for p in &cfg.extra_ro_paths {
        push(&[&"--ro-bind-try", p, p]);
    }
    if !visible(info, cfg, &plan.program) {
        push(&[&"--ro-bind", &plan.program, &plan.program]);
    }

    // The grants, exactly as the Wasm preopens: parents first.
    for (&i, fd) in plan.mount_order.iter().zip(&fds.mounts) {
        let m = &req.mounts[i];
        let op = if m.writable {
            "--bind-fd"
        } else {
            "--ro-bind-fd"
        };
        push(&[&op, &fd.to_string(), &m.target]);
    }

    // Nothing else may be written: not the root, not /dev.
    push(&[&"--remount-ro", &"/dev", &"--remount-ro", &"/"]);
    push(&[
        &"--chdir",
        &req.cwd,
        &"--info-fd",
        &fds.info.to_string(),
        &"--block-fd",
        &fds.block.to_string(),
        &"--seccomp",
        &fds.seccomp.to_string(),
    ]);
    push(&[&"--", &plan.program]);
    for arg in &req.argv[1..] {
        push(&[arg]);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ExecMount, ExecRequest};

    fn info() -> BwrapInfo {
        BwrapInfo {
            path: "/usr/bin/bwrap".into(),
            version: "bubblewrap 0.8.0".into(),
            disable_userns: true,
            bound: ProcessBound::Rlimit,
            system: vec![
                SystemDir::Symlink {
                    path: "/bin".into(),
                    target: "usr/bin".into(),
                },
                SystemDir::Dir("/lib64".into()),
            ],
        }
    }

    fn fds(n: usize) -> Fds {
        Fds {
            info: 10,
            block: 11,
            passwd: 12,
            group: 13,
            hosts: 14,
            seccomp: 15,
            mounts: (0..n).map(|i| 20 + i as RawFd).collect(),
            new_session: true,
        }
    }

    fn strings(a: &[OsString]) -> Vec<String> {
        a.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    fn has(a: &[String], seq: &[&str]) -> bool {
        a.windows(seq.len())
            .any(|w| w.iter().zip(seq).all(|(x, y)| x == y))
    }

    #[test]
    fn argument_list_is_deny_by_default() {
        let mut req = ExecRequest::new(["/usr/bin/env", "-0"]);
        req.mounts = vec![
            ExecMount::path("/srv/ws/src", "/workspace/src", true),
            ExecMount::path("/srv/ws", "/workspace", false),
        ];
        req.cwd = "/workspace/src".into();
        req.env = vec![
            ("LANG".into(), "fr_FR.UTF-8".into()),
            ("CI".into(), "1".into()),
        ];
        let plan = Plan {
            program: "/usr/bin/env".into(),
            mount_order: vec![1, 0],
        };
        let a = strings(&args(&info(), &ExecConfig::default(), &req, &plan, &fds(2)));
        println!("{}", a.join(" "));
        for seq in [
            &[
                "--unshare-user",
                "--uid",
                "1000",
                "--gid",
                "1000",
                "--disable-userns",
            ][..],
            &[
                "--unshare-pid",
                "--unshare-ipc",
                "--unshare-uts",
                "--unshare-net",
            ],
            &["--die-with-parent", "--new-session", "--clearenv"],
            &["--setenv", "PATH", SANDBOX_PATH],
            &["--setenv", "HOME", "/tmp/home"],
            &["--setenv", "LANG", "fr_FR.UTF-8"],
            &["--setenv", "CI", "1"],
            &["--ro-bind", "/usr", "/usr"],
            &["--symlink", "usr/bin", "/bin"],
            &["--ro-bind", "/lib64", "/lib64"],
            &["--perms", "0644", "--ro-bind-data", "12", "/etc/passwd"],
            &[
                "--ro-bind-fd",
                "20",
                "/workspace",
                "--bind-fd",
                "21",
                "/workspace/src",
            ],
            &["--remount-ro", "/dev", "--remount-ro", "/"],
            &[
                "--chdir",
                "/workspace/src",
                "--info-fd",
                "10",
                "--block-fd",
                "11",
                "--seccomp",
                "15",
            ],
            &["--", "/usr/bin/env", "-0"],
        ] {
            assert!(has(&a, seq), "missing {seq:?} in {a:?}");
        }
        // Without a terminal on the host there is no session to leave.
        let no_tty = Fds {
            new_session: false,
            ..fds(2)
        };
        let b = strings(&args(&info(), &ExecConfig::default(), &req, &plan, &no_tty));
        assert!(!b.iter().any(|s| s == "--new-session"));
        assert_eq!(b.len() + 1, a.len());
        // The default LANG gave way to the allowed one.
        assert!(!has(&a, &["--setenv", "LANG", "C.UTF-8"]));
        // Nothing of the host's /etc, home or root besides the listed files.
        for s in &a {
            assert!(
                !s.contains("shadow") && !s.starts_with("/root") && !s.starts_with("/home"),
                "{s}"
            );
        }
        let etc: Vec<&String> = a.iter().filter(|s| s.starts_with("/etc/")).collect();
        assert!(etc.iter().all(|s| {
            ETC_FILES.iter().any(|f| s.as_str() == format!("/etc/{f}"))
                || ["/etc/passwd", "/etc/group", "/etc/hosts"].contains(&s.as_str())
        }));
        // The program is visible through /usr: no extra bind for it.
        assert_eq!(a.iter().filter(|s| s.as_str() == "/usr/bin/env").count(), 1);
    }

    #[test]
    fn a_program_outside_the_system_directories_is_bound_alone() {
        let req = ExecRequest::new(["/opt/tool/bin/x"]);
        let plan = Plan {
            program: "/opt/tool/bin/x".into(),
            mount_order: vec![],
        };
        let a = strings(&args(&info(), &ExecConfig::default(), &req, &plan, &fds(0)));
        assert!(has(
            &a,
            &["--ro-bind", "/opt/tool/bin/x", "/opt/tool/bin/x"]
        ));
        let cfg = ExecConfig {
            extra_ro_paths: vec!["/opt/tool".into()],
            ..ExecConfig::default()
        };
        let a = strings(&args(&info(), &cfg, &req, &plan, &fds(0)));
        assert!(has(&a, &["--ro-bind-try", "/opt/tool", "/opt/tool"]));
        assert!(!has(&a, &["--ro-bind", "/opt/tool/bin/x"]));
        // Through a symlinked system directory it is visible too.
        let plan = Plan {
            program: "/bin/sh".into(),
            mount_order: vec![],
        };
        let a = strings(&args(&info(), &ExecConfig::default(), &req, &plan, &fds(0)));
        assert!(!has(&a, &["--ro-bind", "/bin/sh"]));
    }
}
