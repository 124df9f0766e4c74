//! The checks made before anything starts: `argv`, the program and its
//! allow-list, the environment, mount points and the working directory.
//!
//! [`plan`] turns a valid [`ExecRequest`] into a [`Plan`] (the resolved
//! program, mounts in mount order) or refuses it; it runs no process and
//! touches the disk only to look the program up on `PATH`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::{AllowedPrograms, ExecError, ExecRequest, MountSource};

/// Paths of the sandbox itself, which no mount may cover or replace.
pub(super) const RESERVED: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev",
    "/tmp", "/sys", "/run",
];

/// Longest list of allowed programs quoted in a denial.
const MAX_LISTED: usize = 8;

/// A checked request.
#[derive(Debug)]
pub(super) struct Plan {
    /// `argv[0]` resolved: the absolute path that is executed (and passed
    /// as the program's `argv[0]`).
    pub program: PathBuf,
    /// Indices into `req.mounts`, parents before the mounts nested in them.
    pub mount_order: Vec<usize>,
}

/// Whether `s` is an absolute path with no `.`, `..`, empty segment or
/// trailing slash (the root `/` itself included).
pub(super) fn is_normalized_absolute(s: &str) -> bool {
    if s == "/" {
        return true;
    }
    s.starts_with('/')
        && !s.ends_with('/')
        && s[1..]
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}

/// Whether `path` is `prefix` or lies below it, by whole segment.
pub(super) fn is_under(path: &str, prefix: &str) -> bool {
    if prefix == "/" {
        return true;
    }
    path == prefix
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'/')
}

fn is_executable_file(p: &Path) -> bool {
    match std::fs::metadata(p) {
        Ok(m) if m.is_file() => rustix::fs::access(p, rustix::fs::Access::EXEC_OK).is_ok(),
        _ => false,
    }
}

/// Resolves a program name on `search_path` (like `execvp`, but only
/// absolute `PATH` entries count) or checks an absolute path. The result is
/// not symlink-resolved: it is the path that will be executed.
pub(super) fn resolve(name: &str, search_path: &OsStr) -> Result<PathBuf, ExecError> {
    let field = "argv[0]";
    if name.is_empty() {
        return Err(ExecError::invalid(field, "the program name is empty"));
    }
    if name.contains('\0') {
        return Err(ExecError::invalid(
            field,
            "the program name contains a NUL byte",
        ));
    }
    if name.contains('/') {
        if !name.starts_with('/') || !is_normalized_absolute(name) {
            return Err(ExecError::invalid(
                field,
                format!(
                    "`{name}` is neither a bare program name nor a normalized absolute path \
                     (no `.`, `..` or empty segments)"
                ),
            ));
        }
        let p = PathBuf::from(name);
        if is_executable_file(&p) {
            return Ok(p);
        }
        return Err(ExecError::invalid(
            field,
            format!("`{name}` is not an executable file"),
        ));
    }
    if name == "." || name == ".." {
        return Err(ExecError::invalid(
            field,
            format!("`{name}` is not a program"),
        ));
    }
    for dir in search_path.as_bytes().split(|&b| b == b':') {
        let dir = Path::new(OsStr::from_bytes(dir));
        if !dir.is_absolute() {
            continue; // empty or relative entries would depend on the cwd
        }
        let candidate = dir.join(name);
        if is_executable_file(&candidate) {
            return Ok(clean(&candidate));
        }
    }
    Err(ExecError::invalid(
        field,
        format!("program `{name}` was not found on PATH"),
    ))
}

/// `p` without `.` segments or doubled slashes (from a `PATH` entry such as
/// `/usr/bin/`), lexically.
fn clean(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn denied_program(name: &str, resolved: Option<&Path>, allowed: &AllowedPrograms) -> ExecError {
    let shown = match resolved {
        Some(p) if p.as_os_str() != name => format!("`{name}` ({})", p.display()),
        _ => format!("`{name}`"),
    };
    let list = match allowed {
        AllowedPrograms::Any => String::new(),
        AllowedPrograms::Only(set) if set.is_empty() => "; no program is allowed".to_owned(),
        AllowedPrograms::Only(set) => {
            let mut names: Vec<String> = set
                .iter()
                .take(MAX_LISTED)
                .map(|p| p.display().to_string())
                .collect();
            if set.len() > MAX_LISTED {
                names.push(format!("and {} more", set.len() - MAX_LISTED));
            }
            format!("; allowed: {}", names.join(", "))
        }
    };
    ExecError::Denied {
        subject: name.to_owned(),
        message: format!("program {shown} is not allowed{list}"),
    }
}

fn valid_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'A'..=b'Z' | b'a'..=b'z' | b'_'))
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Checks `req` without starting anything.
pub(super) fn plan(req: &ExecRequest, search_path: &OsStr) -> Result<Plan, ExecError> {
    // argv
    let Some(name) = req.argv.first() else {
        return Err(ExecError::invalid(
            "argv",
            "argv is empty: give the program and its arguments as a list",
        ));
    };
    if let Some(i) = req.argv.iter().position(|a| a.contains('\0')) {
        return Err(ExecError::invalid(
            format!("argv[{i}]"),
            "an argument contains a NUL byte",
        ));
    }
    let program = match resolve(name, search_path) {
        Ok(p) if req.programs.allows(&p) => p,
        Ok(p) => return Err(denied_program(name, Some(&p), &req.programs)),
        Err(e @ ExecError::InvalidRequest { .. })
            if req.programs == AllowedPrograms::Any || !name_is_plausible(name) =>
        {
            return Err(e)
        }
        Err(_) => return Err(denied_program(name, None, &req.programs)),
    };

    // environment
    for (i, (k, v)) in req.env.iter().enumerate() {
        if !valid_env_name(k) {
            return Err(ExecError::invalid(
                format!("env[{i}]"),
                format!("`{k}` is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)"),
            ));
        }
        if v.contains('\0') {
            return Err(ExecError::invalid(
                format!("env[{i}]"),
                format!("the value of `{k}` contains a NUL byte"),
            ));
        }
        if req.env[..i].iter().any(|(k2, _)| k2 == k) {
            return Err(ExecError::invalid(
                format!("env[{i}]"),
                format!("`{k}` is set twice"),
            ));
        }
        if !req.env_allowed.contains(k) {
            let allowed = if req.env_allowed.is_empty() {
                "no variable may be set".to_owned()
            } else {
                let v: Vec<&str> = req.env_allowed.iter().map(String::as_str).collect();
                format!("allowed: {}", v.join(", "))
            };
            return Err(ExecError::Denied {
                subject: k.clone(),
                message: format!("environment variable `{k}` may not be set; {allowed}"),
            });
        }
    }

    // mounts
    for (i, m) in req.mounts.iter().enumerate() {
        let field = format!("mounts[{i}]");
        let t = m.target.as_str();
        if !is_normalized_absolute(t) || t == "/" {
            return Err(ExecError::invalid(
                field,
                format!("mount point `{t}` must be a normalized absolute path below `/`"),
            ));
        }
        if let Some(r) = RESERVED.iter().find(|r| is_under(t, r) || is_under(r, t)) {
            return Err(ExecError::invalid(
                field,
                format!("mount point `{t}` would cover the sandbox's own `{r}`"),
            ));
        }
        if req.mounts[..i].iter().any(|o| o.target == m.target) {
            return Err(ExecError::invalid(
                field,
                format!("mount point `{t}` is used twice"),
            ));
        }
        if let MountSource::Path(p) = &m.source {
            if !p.is_absolute() {
                return Err(ExecError::invalid(
                    field,
                    format!("host directory `{}` must be absolute", p.display()),
                ));
            }
        }
    }
    let mut mount_order: Vec<usize> = (0..req.mounts.len()).collect();
    mount_order
        .sort_by(|&a, &b| Path::new(&req.mounts[a].target).cmp(Path::new(&req.mounts[b].target)));

    // working directory
    let cwd = req.cwd.as_str();
    if !is_normalized_absolute(cwd) {
        return Err(ExecError::invalid(
            "cwd",
            format!("`{cwd}` must be a normalized absolute path inside the sandbox"),
        ));
    }
    if !is_under(cwd, "/tmp") && !req.mounts.iter().any(|m| is_under(cwd, &m.target)) {
        return Err(ExecError::invalid(
            "cwd",
            format!("`{cwd}` is not inside a mount (or /tmp)"),
        ));
    }

    Ok(Plan {
        program,
        mount_order,
    })
}

/// A name worth reporting as "not allowed" rather than malformed.
fn name_is_plausible(name: &str) -> bool {
    !name.is_empty()
        && !name.contains('\0')
        && (!name.contains('/') || is_normalized_absolute(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ExecMount, ExecRequest};
    use std::collections::BTreeSet;
    use std::os::unix::fs::PermissionsExt;

    fn bin_dir() -> (tempfile::TempDir, std::ffi::OsString) {
        let d = tempfile::tempdir().unwrap();
        for (name, mode) in [("tool", 0o755), ("data", 0o644)] {
            let p = d.path().join(name);
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::fs::create_dir(d.path().join("adir")).unwrap();
        let path = format!("relative/bin::{}/:/nonexistent", d.path().display());
        (d, path.into())
    }

    fn only(paths: &[&Path]) -> AllowedPrograms {
        AllowedPrograms::Only(paths.iter().map(|p| p.to_path_buf()).collect())
    }

    #[test]
    fn normalized_absolute_paths() {
        for ok in ["/", "/workspace", "/workspace/src", "/a/b.c/d"] {
            assert!(is_normalized_absolute(ok), "{ok}");
        }
        for bad in [
            "",
            "workspace",
            "/workspace/",
            "//x",
            "/a/./b",
            "/a/../b",
            "/a//b",
            "/..",
        ] {
            assert!(!is_normalized_absolute(bad), "{bad}");
        }
        assert!(is_under("/workspace/src", "/workspace"));
        assert!(is_under("/workspace", "/workspace"));
        assert!(!is_under("/workspace2", "/workspace"));
        assert!(is_under("/anything", "/"));
    }

    #[test]
    fn resolves_on_path_skipping_relative_entries_and_non_executables() {
        let (d, path) = bin_dir();
        let tool = resolve("tool", &path).unwrap();
        assert_eq!(tool, d.path().join("tool"));
        assert!(!tool.to_string_lossy().contains("//"));
        for missing in ["data", "adir", "nope"] {
            let e = resolve(missing, &path).unwrap_err();
            assert_eq!(e.code(), "invalid_arguments", "{missing}: {e}");
            assert!(e.to_string().contains("not found on PATH"), "{e}");
        }
        // A relative PATH entry is never searched, even if it would match.
        let rel = std::ffi::OsString::from(".");
        assert!(resolve("tool", &rel).is_err());
    }

    #[test]
    fn absolute_program_paths_must_be_normalized_executables() {
        let (d, path) = bin_dir();
        let abs = d.path().join("tool");
        assert_eq!(resolve(abs.to_str().unwrap(), &path).unwrap(), abs);
        let dotted = format!(
            "{}/../{}/tool",
            d.path().display(),
            d.path().file_name().unwrap().to_str().unwrap()
        );
        assert!(resolve(&dotted, &path).is_err());
        assert!(resolve("./tool", &path).is_err());
        assert!(resolve("bin/tool", &path).is_err());
        assert!(resolve(d.path().join("data").to_str().unwrap(), &path).is_err());
        assert!(resolve("", &path).is_err());
        assert!(resolve("a\0b", &path).is_err());
    }

    #[test]
    fn plan_denies_programs_outside_the_allow_list() {
        let (d, path) = bin_dir();
        let tool = d.path().join("tool");

        let mut req = ExecRequest::new(["tool", "x"]);
        let e = plan(&req, &path).unwrap_err();
        assert_eq!(e.code(), "denied");
        assert!(e.to_string().contains("`tool`"), "{e}");
        assert!(e.to_string().contains("no program is allowed"), "{e}");

        req.programs = only(&[&tool]);
        assert_eq!(plan(&req, &path).unwrap().program, tool);
        // The absolute path of an allowed program is the same program.
        req.argv[0] = tool.to_string_lossy().into_owned();
        assert!(plan(&req, &path).is_ok());

        // Another program, existing or not, is denied and named.
        req.programs = only(&[Path::new("/usr/bin/cargo")]);
        req.argv[0] = "tool".into();
        let e = plan(&req, &path).unwrap_err();
        assert_eq!(e.code(), "denied");
        assert!(e.to_string().contains("tool"), "{e}");
        assert!(e.to_string().contains("/usr/bin/cargo"), "{e}");
        req.argv[0] = "nope".into();
        assert_eq!(plan(&req, &path).unwrap_err().code(), "denied");

        // With `Any`, a missing program is a correctable mistake.
        req.programs = AllowedPrograms::Any;
        assert_eq!(plan(&req, &path).unwrap_err().code(), "invalid_arguments");
        // A malformed name is malformed whatever the list.
        req.programs = AllowedPrograms::none();
        req.argv[0] = "../tool".into();
        assert_eq!(plan(&req, &path).unwrap_err().code(), "invalid_arguments");
        req.argv.clear();
        assert_eq!(plan(&req, &path).unwrap_err().code(), "invalid_arguments");
    }

    #[test]
    fn a_shell_is_just_a_program() {
        let search = std::ffi::OsString::from("/usr/bin:/bin");
        let Ok(sh) = resolve("sh", &search) else {
            panic!("no sh on /usr/bin:/bin");
        };
        let echo = resolve("echo", &search).unwrap();
        let mut req = ExecRequest::new(["sh", "-c", "echo hi"]);
        req.programs = only(&[&echo]);
        let e = plan(&req, &search).unwrap_err();
        assert_eq!(e.code(), "denied");
        assert!(e.to_string().contains("`sh`"), "{e}");
        req.programs = only(&[&echo, &sh]);
        assert!(plan(&req, &search).is_ok());
    }

    #[test]
    fn plan_checks_environment_names_against_the_allow_list() {
        let (d, path) = bin_dir();
        let mut req = ExecRequest::new(["tool"]);
        req.programs = only(&[&d.path().join("tool")]);
        req.env = vec![("RUST_LOG".into(), "debug".into())];
        let e = plan(&req, &path).unwrap_err();
        assert_eq!(e.code(), "denied");
        assert!(e.to_string().contains("RUST_LOG"), "{e}");
        req.env_allowed = BTreeSet::from(["RUST_LOG".to_owned()]);
        assert!(plan(&req, &path).is_ok());
        req.env.push(("RUST_LOG".into(), "x".into()));
        assert_eq!(plan(&req, &path).unwrap_err().code(), "invalid_arguments");
        req.env = vec![("1BAD".into(), String::new())];
        assert_eq!(plan(&req, &path).unwrap_err().code(), "invalid_arguments");
        req.env = vec![("RUST_LOG".into(), "a\0b".into())];
        assert_eq!(plan(&req, &path).unwrap_err().code(), "invalid_arguments");
    }

    #[test]
    fn plan_checks_mount_points_and_cwd() {
        let (d, path) = bin_dir();
        let mut req = ExecRequest::new(["tool"]);
        req.programs = only(&[&d.path().join("tool")]);
        for bad in [
            "/",
            "/usr",
            "/usr/local",
            "/etc",
            "/tmp/x",
            "/proc",
            "workspace",
            "/w/../x",
        ] {
            req.mounts = vec![ExecMount::path("/srv", bad, false)];
            let e = plan(&req, &path).unwrap_err();
            assert_eq!(e.code(), "invalid_arguments", "{bad}: {e}");
        }
        req.mounts = vec![
            ExecMount::path("/srv/a", "/workspace/src", true),
            ExecMount::path("/srv", "/workspace", false),
            ExecMount::path("/srv/b", "/workspace-b", false),
        ];
        req.cwd = "/workspace/src".into();
        let p = plan(&req, &path).unwrap();
        let order: Vec<&str> = p
            .mount_order
            .iter()
            .map(|&i| req.mounts[i].target.as_str())
            .collect();
        assert_eq!(order, ["/workspace", "/workspace/src", "/workspace-b"]);
        for bad_cwd in [
            "/elsewhere",
            "/workspacex",
            "workspace",
            "/workspace/../etc",
        ] {
            req.cwd = bad_cwd.into();
            assert_eq!(
                plan(&req, &path).unwrap_err().code(),
                "invalid_arguments",
                "{bad_cwd}"
            );
        }
        req.cwd = "/tmp".into();
        assert!(plan(&req, &path).is_ok());
        req.mounts
            .push(ExecMount::path("/srv/c", "/workspace", true));
        assert_eq!(plan(&req, &path).unwrap_err().code(), "invalid_arguments");
        req.mounts = vec![ExecMount::path("relative", "/workspace", true)];
        assert_eq!(plan(&req, &path).unwrap_err().code(), "invalid_arguments");
    }
}
