//! Programs in `exec` caveats: a bare name, looked up on the host's `PATH`
//! when a call runs, or a normalized absolute path. Matched exactly: a
//! token granting `cargo` does not grant `/usr/bin/cargo` by that spelling
//! (both resolve to the same file when a call runs, where the comparison
//! that decides what may start is made: see [`toolhost_exec`]).

use super::*;

/// Longest program name or path in a caveat, in bytes.
pub const MAX_PROGRAM_BYTES: usize = 4096;

/// One program of an `exec` caveat.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Program(String);

impl Program {
    /// Checks `s`: a bare name (no `/`, not `.` or `..`, no whitespace) or
    /// an absolute path without empty, `.` or `..` components; no control
    /// characters, no comma (the caveat's list separator), at most
    /// [`MAX_PROGRAM_BYTES`]. The error says what is wrong.
    pub fn parse(s: &str) -> Result<Program, String> {
        if s.is_empty() {
            return Err("a program name is empty".into());
        }
        if s.len() > MAX_PROGRAM_BYTES {
            return Err(format!(
                "a program name is longer than {MAX_PROGRAM_BYTES} bytes"
            ));
        }
        if s.chars().any(char::is_control) {
            return Err(format!("{s:?} contains a control character"));
        }
        if s.contains(',') {
            return Err(format!(
                "{s:?} contains a comma (one program per value; a path with a comma cannot be granted)"
            ));
        }
        if let Some(rest) = s.strip_prefix('/') {
            if rest
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == "..")
            {
                return Err(format!(
                    "{s:?} is not a normalized absolute path (no empty, `.` or `..` components)"
                ));
            }
            return Ok(Program(s.to_owned()));
        }
        if s.contains('/') {
            return Err(format!(
                "{s:?} is a relative path; name a program on PATH (`cargo`) or give an absolute path"
            ));
        }
        if s.chars().any(char::is_whitespace) {
            return Err(format!(
                "{s:?} contains whitespace: name one program, not a command line"
            ));
        }
        if s == "." || s == ".." {
            return Err(format!("{s:?} is not a program name"));
        }
        Ok(Program(s.to_owned()))
    }

    /// The name or path as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Program {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl FromStr for Program {
    type Err = CapError;
    fn from_str(s: &str) -> Result<Program, CapError> {
        Program::parse(s).map_err(malformed)
    }
}
