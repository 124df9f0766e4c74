//! `toolhost lint` and the lint reports of the reference tools.

use crate::support::*;

#[test]
fn reference_tools_pass_the_lint_without_errors() {
    let h = reference_host();
    let names = loaded_tool_names(h);
    assert_eq!(
        names,
        [
            "file_delete",
            "file_edit",
            "file_view",
            "grep_search",
            "http_get",
            "run_command"
        ]
    );
    for t in h.catalog().tools() {
        assert!(!t.report.refused, "{}", t.report);
        // Every file tool annotates its path fields, so the host checks them.
        let needs = &t.descriptor.needs;
        assert_eq!(
            t.input.has_path_fields(),
            needs.fs_read || needs.fs_write,
            "{}",
            t.descriptor.name
        );
    }
}
