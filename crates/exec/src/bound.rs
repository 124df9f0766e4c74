//! Resource bounds of one run: the process-count bound (a pids cgroup or
//! `RLIMIT_NPROC`) and the per-process rlimits.
//!
//! Both are applied from outside to the sandbox's first process while
//! bubblewrap holds it on `--block-fd`, before it starts the program, so
//! every process of the run inherits them and bubblewrap's own monitor
//! outside the sandbox does not.
//!
//! Why not simply `RLIMIT_NPROC` in the child before `exec(bwrap)`: that
//! limit is checked against every process of the uid, host-wide, for the
//! fork that creates the user namespace, and a root host is exempt from it
//! altogether. Set on the first process *inside* the new user namespace it
//! counts only that namespace's tasks (Linux ≥ 5.14 keeps the counts per
//! namespace) — for a non-root host. A root host needs the cgroup.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::process::{prlimit, Pid, Resource, Rlimit};

use super::ExecLimits;

/// Prefix of the cgroups this module creates.
const CGROUP_PREFIX: &str = "toolhost-exec-";

/// How the number of tasks of a run is bounded on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessBound {
    /// A pids cgroup per run, made under `parent` (cgroup `version` 1 or 2).
    Cgroup { parent: PathBuf, version: u8 },
    /// `RLIMIT_NPROC` in the sandbox's user namespace (non-root host).
    Rlimit,
}

/// One line of `/proc/self/mountinfo` we care about.
struct CgroupMount {
    mount_point: PathBuf,
    fstype: String,
    super_options: String,
}

/// Undoes mountinfo's octal escapes (`\040` for a space, …).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        let value = octal.map(|d| d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0')));
        if let (b'\\', Some(v @ 0..=255)) = (b[i], value) {
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn cgroup_mounts(mountinfo: &str) -> Vec<CgroupMount> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mount_point) = pre.split(' ').nth(4) else {
            continue;
        };
        let mut post = post.split(' ');
        let (Some(fstype), Some(_source), Some(opts)) = (post.next(), post.next(), post.next())
        else {
            continue;
        };
        if fstype == "cgroup" || fstype == "cgroup2" {
            out.push(CgroupMount {
                mount_point: PathBuf::from(unescape(mount_point)),
                fstype: fstype.to_owned(),
                super_options: opts.to_owned(),
            });
        }
    }
    out
}

/// The candidate parent directories for a run's cgroup, best first.
fn candidates(mountinfo: &str, self_cgroup: &str) -> Vec<(PathBuf, u8)> {
    let mounts = cgroup_mounts(mountinfo);
    let mut out = Vec::new();
    for line in self_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let rel = path.trim_start_matches('/');
        if id == "0" && controllers.is_empty() {
            for m in mounts.iter().filter(|m| m.fstype == "cgroup2") {
                out.insert(0, (m.mount_point.join(rel), 2));
            }
        } else if controllers.split(',').any(|c| c == "pids") {
            for m in mounts
                .iter()
                .filter(|m| m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == "pids"))
            {
                out.push((m.mount_point.join(rel), 1));
            }
        }
    }
    out
}

fn pid_alive(pid: i32) -> bool {
    match Pid::from_raw(pid) {
        Some(p) => !matches!(
            rustix::process::test_kill_process(p),
            Err(rustix::io::Errno::SRCH)
        ),
        None => false,
    }
}

/// Removes empty cgroups left by hosts that died mid-run.
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(CGROUP_PREFIX)) else {
            continue;
        };
        let pid = rest.split('-').next().and_then(|p| p.parse::<i32>().ok());
        if let Some(pid) = pid {
            if !pid_alive(pid) {
                let _ = std::fs::remove_dir(e.path());
            }
        }
    }
}

fn try_cgroup(parent: &Path, version: u8) -> bool {
    if version == 2 {
        // The pids controller must be enabled for our children.
        match std::fs::read_to_string(parent.join("cgroup.subtree_control")) {
            Ok(s) if s.split_whitespace().any(|c| c == "pids") => {}
            _ => return false,
        }
    }
    let probe = parent.join(format!("{CGROUP_PREFIX}{}-probe", std::process::id()));
    if std::fs::create_dir(&probe).is_err() {
        return false;
    }
    let usable = probe.join("pids.max").exists() && probe.join("cgroup.procs").exists();
    let _ = std::fs::remove_dir(&probe);
    if usable {
        remove_stale(parent);
    }
    usable
}

/// Finds how runs on this host can be bounded.
pub(super) fn detect() -> Result<ProcessBound, String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let self_cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for (parent, version) in candidates(&mountinfo, &self_cgroup) {
        if try_cgroup(&parent, version) {
            return Ok(ProcessBound::Cgroup { parent, version });
        }
    }
    if !rustix::process::geteuid().is_root() {
        return Ok(ProcessBound::Rlimit);
    }
    Err(
        "no way to bound the number of processes: toolhost runs as root, which the kernel \
         exempts from RLIMIT_NPROC, and no pids cgroup is writable here (mount the cgroup \
         `pids` controller, delegate it, or run toolhost as an unprivileged user)"
            .to_owned(),
    )
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// The pids cgroup of one run; removed on drop, once empty.
#[derive(Debug)]
pub(super) struct RunCgroup {
    dir: PathBuf,
}

impl RunCgroup {
    /// Makes a cgroup under `parent` allowing `max` tasks.
    pub(super) fn create(parent: &Path, max: u64) -> io::Result<RunCgroup> {
        let name = format!(
            "{CGROUP_PREFIX}{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let dir = parent.join(name);
        std::fs::create_dir(&dir)?;
        let cg = RunCgroup { dir };
        std::fs::write(cg.dir.join("pids.max"), max.to_string())?;
        Ok(cg)
    }

    /// Moves process `pid` (and so its future children) into the cgroup.
    pub(super) fn attach(&self, pid: i32) -> io::Result<()> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
    }

    /// Most tasks the cgroup held at once, where the kernel reports it.
    pub(super) fn peak(&self) -> Option<u64> {
        std::fs::read_to_string(self.dir.join("pids.peak"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        // Empty by now (the sandbox's init was reaped before this runs);
        // the kernel may take a moment to release the last task.
        let until = Instant::now() + Duration::from_secs(2);
        while let Err(e) = std::fs::remove_dir(&self.dir) {
            if e.raw_os_error() != Some(rustix::io::Errno::BUSY.raw_os_error())
                || Instant::now() >= until
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Per-process limits of a run, as (resource, soft, hard).
pub(super) fn rlimits(limits: &ExecLimits, timeout: Duration) -> Vec<(Resource, u64, u64)> {
    let cpu = limits.cpu_time.unwrap_or(timeout + Duration::from_secs(1));
    let cpu = cpu.as_secs() + u64::from(cpu.subsec_nanos() > 0);
    let cpu = cpu.max(1);
    vec![
        (Resource::Cpu, cpu, cpu + 1),
        (
            Resource::As,
            limits.address_space_bytes,
            limits.address_space_bytes,
        ),
        (
            Resource::Fsize,
            limits.file_size_bytes,
            limits.file_size_bytes,
        ),
        (Resource::Nofile, limits.open_files, limits.open_files),
        (Resource::Core, 0, 0),
        // The sandbox's init counts too.
        (Resource::Nproc, limits.processes + 1, limits.processes + 1),
    ]
}

/// Sets the limits on process `pid` (the sandbox's first process).
pub(super) fn apply_rlimits(pid: Pid, limits: &[(Resource, u64, u64)]) -> io::Result<()> {
    for &(resource, soft, hard) in limits {
        prlimit(
            Some(pid),
            resource,
            Rlimit {
                current: Some(soft),
                maximum: Some(hard),
            },
        )?;
    }
    Ok(())
}

/// Lowers the scheduling priority of process `pid` to `nice` (0–19), or
/// to the host's own niceness if that is lower still.
pub(super) fn apply_nice(pid: Pid, nice: i32) -> io::Result<()> {
    let own = rustix::process::getpriority_process(None)?;
    rustix::process::setpriority_process(Some(pid), nice.clamp(0, 19).max(own))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
25 30 0:23 / /sys rw,nosuid - sysfs sysfs rw
33 25 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
40 33 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 33 0:36 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
42 33 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
43 33 0:38 / /mnt/with\\040space rw - cgroup2 cgroup2 rw
";

    #[test]
    fn finds_v2_before_v1_pids() {
        let cg = "8:pids:/a/b\n4:memory:/m\n0::/user.slice/x\n";
        let c = candidates(MOUNTINFO, cg);
        assert_eq!(
            c,
            vec![
                (PathBuf::from("/mnt/with space/user.slice/x"), 2),
                (PathBuf::from("/sys/fs/cgroup/unified/user.slice/x"), 2),
                (PathBuf::from("/sys/fs/cgroup/pids/a/b"), 1),
            ]
        );
        // v1 only, at the root.
        let c = candidates(MOUNTINFO, "8:pids:/\n");
        assert_eq!(c, vec![(PathBuf::from("/sys/fs/cgroup/pids/"), 1)]);
        assert!(candidates("", "0::/\n").is_empty());
    }

    #[test]
    fn cpu_limit_rounds_up_and_follows_the_timeout() {
        let l = ExecLimits::default();
        let r = rlimits(&l, Duration::from_millis(1500));
        assert_eq!(r[0], (Resource::Cpu, 3, 4));
        let l = ExecLimits {
            cpu_time: Some(Duration::from_millis(1)),
            processes: 10,
            ..ExecLimits::default()
        };
        let r = rlimits(&l, Duration::from_secs(100));
        assert_eq!(r[0], (Resource::Cpu, 1, 2));
        assert!(r.contains(&(Resource::Nproc, 11, 11)));
        assert!(r.contains(&(Resource::Core, 0, 0)));
    }
}
