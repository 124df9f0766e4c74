//! Descriptor rules: the tool's name, description, title, error codes,
//! limits, and the consistency of its side effect, needs and path
//! annotations (`tool_name`, `description`, `hidden_text`, `error_codes`,
//! `limits`, `needs_consistency`).

use std::collections::HashSet;

use super::{Linter, Rule, Severity, Target, DESCRIPTION_MAX_BYTES, DESCRIPTION_WARN_CHARS};
use crate::descriptor::{SideEffect, ToolDescriptor};
use crate::json::clip;
use crate::origin::{Origin, ANY_ORIGIN};
use crate::plugin::schema::{CompiledSchema, PathAccess};

impl Linter {
    pub(super) fn descriptor(&mut self, desc: &ToolDescriptor) {
        let d = Target::Descriptor;
        if !is_snake_name(&desc.name) {
            self.push(
                Rule::ToolName,
                Severity::Error,
                d,
                "/name",
                format!(
                    "name {:?} must match ^[a-z][a-z0-9_]{{0,63}}$ (verb_object, e.g. file_view)",
                    clip(&desc.name, 80)
                ),
            );
        } else if !desc.name.contains('_') {
            self.push(
                Rule::ToolName,
                Severity::Warning,
                d,
                "/name",
                format!(
                    "name {:?} is one word; use verb_object (e.g. file_view, grep_search) so the model can tell tools apart",
                    desc.name
                ),
            );
        }
        let text = desc.description.trim();
        if text.is_empty() {
            self.push(
                Rule::Description,
                Severity::Error,
                d,
                "/description",
                "description is empty; say when to use the tool, when not, its side effects and the size of what it returns",
            );
        } else if desc.description.len() > DESCRIPTION_MAX_BYTES {
            self.push(
                Rule::Description,
                Severity::Error,
                d,
                "/description",
                format!(
                    "description is {} bytes; the limit is {DESCRIPTION_MAX_BYTES} (it is paid for in every context)",
                    desc.description.len()
                ),
            );
        } else {
            let chars = desc.description.chars().count();
            if chars > DESCRIPTION_WARN_CHARS {
                self.push(
                    Rule::Description,
                    Severity::Warning,
                    d,
                    "/description",
                    format!(
                        "description is {chars} characters; keep it under {DESCRIPTION_WARN_CHARS} (it is paid for in every context)"
                    ),
                );
            }
        }
        self.hidden(d, "/description", &desc.description);
        if let Some(title) = &desc.title {
            self.hidden(d, "/title", title);
        }
        let mut seen = HashSet::new();
        for (i, code) in desc.error_codes.iter().enumerate() {
            let pointer = format!("/error_codes/{i}");
            if !is_snake_name(code) {
                self.push(
                    Rule::ErrorCodes,
                    Severity::Error,
                    d,
                    pointer,
                    format!(
                        "error code {:?} must match ^[a-z][a-z0-9_]{{0,63}}$",
                        clip(code, 80)
                    ),
                );
            } else if !seen.insert(code.as_str()) {
                self.push(
                    Rule::ErrorCodes,
                    Severity::Warning,
                    d,
                    pointer,
                    format!("error code {code:?} is listed twice"),
                );
            }
        }
        if desc.default_timeout_ms == 0 {
            self.push(
                Rule::Limits,
                Severity::Warning,
                d,
                "/default_timeout_ms",
                "default_timeout_ms is 0; give the tool a real wall-clock budget",
            );
        }
        if desc.max_output_bytes == 0 {
            self.push(
                Rule::Limits,
                Severity::Warning,
                d,
                "/max_output_bytes",
                "max_output_bytes is 0; declare the largest output the tool returns",
            );
        }
    }

    /// Reports invisible, bidirectional and control characters in `text`.
    pub(super) fn hidden(&mut self, target: Target, pointer: &str, text: &str) {
        if let Some(c) = text.chars().find(|&c| is_hidden_char(c)) {
            self.push(
                Rule::HiddenText,
                Severity::Error,
                target,
                pointer,
                format!(
                    "text contains the invisible or control character U+{:04X}; descriptions must read the same to people and models",
                    u32::from(c)
                ),
            );
        }
    }

    pub(super) fn needs(&mut self, desc: &ToolDescriptor, compiled: &CompiledSchema) {
        let d = Target::Descriptor;
        let read_only = desc.side_effect == SideEffect::ReadOnly;
        if read_only && desc.needs.fs_write {
            self.push(
                Rule::NeedsConsistency,
                Severity::Error,
                d,
                "/needs/fs_write",
                "a read-only tool cannot need fs_write; declare a side effect of idempotent or above, or drop fs_write",
            );
        }
        for field in compiled.path_fields() {
            match field.access {
                PathAccess::Write if read_only => self.push(
                    Rule::NeedsConsistency,
                    Severity::Error,
                    Target::InputSchema,
                    field.schema_pointer.clone(),
                    "a read-only tool declares a \"write\" path; mark it \"read\" or raise the side effect",
                ),
                PathAccess::Write if !desc.needs.fs_write => self.push(
                    Rule::NeedsConsistency,
                    Severity::Error,
                    Target::InputSchema,
                    field.schema_pointer.clone(),
                    "a \"write\" path field needs needs.fs_write = true, or the sandbox will never let the tool write it",
                ),
                PathAccess::Read if !desc.needs.fs_read && !desc.needs.fs_write => self.push(
                    Rule::NeedsConsistency,
                    Severity::Error,
                    Target::InputSchema,
                    field.schema_pointer.clone(),
                    "a \"read\" path field needs needs.fs_read = true, or the sandbox will never let the tool read it",
                ),
                _ => {}
            }
        }
        for (i, program) in desc.needs.exec.iter().enumerate() {
            if let Err(e) = crate::descriptor::check_program(program) {
                self.push(
                    Rule::NeedsConsistency,
                    Severity::Error,
                    d,
                    format!("/needs/exec/{i}"),
                    format!(
                        "program {e}; declare a program name such as cargo, an absolute path such as /usr/bin/make, or \"any\""
                    ),
                );
            }
        }
        for (i, host) in desc.needs.network_hosts.iter().enumerate() {
            // `any`: whatever origins the caller grants (see the WIT `needs`).
            if host == ANY_ORIGIN {
                continue;
            }
            if let Err(e) = Origin::parse(host) {
                self.push(
                    Rule::NeedsConsistency,
                    Severity::Error,
                    d,
                    format!("/needs/network_hosts/{i}"),
                    format!(
                        "network host {e}; declare an http or https origin such as https://api.example.com or http://127.0.0.1:8080, or \"any\""
                    ),
                );
            }
        }
    }
}

/// `^[a-z][a-z0-9_]{0,63}$`.
pub(super) fn is_snake_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

/// Characters that render invisibly or reorder text: C0/C1 controls (except
/// tab and newline), zero-width and bidirectional controls, the BOM, and
/// Unicode tag characters.
pub(super) fn is_hidden_char(c: char) -> bool {
    let u = u32::from(c);
    (c.is_control() && c != '\n' && c != '\t' && c != '\r')
        || (0x200B..=0x200F).contains(&u)
        || (0x202A..=0x202E).contains(&u)
        || (0x2060..=0x2064).contains(&u)
        || (0x2066..=0x2069).contains(&u)
        || u == 0xFEFF
        || u == 0x00AD
        || (0xE0000..=0xE007F).contains(&u)
}
