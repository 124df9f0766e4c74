//! The command-line reference page (`docs/reference/cli.md`), generated
//! from the clap definitions so it cannot drift from the binary: a test
//! compares the page with what this module renders and fails when they
//! differ (`TOOLHOST_WRITE_REFERENCE=1 cargo test -p toolhost-cli
//! reference` rewrites it).

use clap::Command;

/// The page for `cmd` and every subcommand under it, depth first, each with
/// its `--help` text. Environment values are never shown, so the page is the
/// same on every machine.
pub fn markdown(cmd: Command) -> String {
    let mut cmd = cmd.term_width(0);
    cmd.build();
    let mut out = String::from(
        "# Command-line reference\n\n\
         Generated from the binary's own definitions; `toolhost COMMAND --help` prints \
         this text and the global options, which every command takes and which are listed once, under \
         [`toolhost`](#toolhost).\n",
    );
    let mut contents = String::new();
    let mut sections = String::new();
    walk(&mut cmd, "", 0, &mut contents, &mut sections);
    out.push_str("\n## Commands\n\n");
    out.push_str(&contents);
    out.push_str(&sections);
    out
}

fn walk(cmd: &mut Command, parent: &str, depth: usize, contents: &mut String, out: &mut String) {
    let path = if parent.is_empty() {
        cmd.get_name().to_string()
    } else {
        format!("{parent} {}", cmd.get_name())
    };
    let anchor = path.replace(' ', "-");
    let about = cmd
        .get_about()
        .map(|a| a.to_string())
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end_matches('.')
        .to_string();
    contents.push_str(&format!(
        "{}- [`{path}`](#{anchor}){}\n",
        "  ".repeat(depth),
        if about.is_empty() {
            String::new()
        } else {
            format!(": {about}")
        }
    ));
    // Below the top, the global options are left out: `toolhost`'s own
    // section lists them once.
    let mut shown = cmd.clone().bin_name(&path).mut_args(|a| {
        let hide = (depth > 0 && a.is_global_set()) || a.is_hide_set();
        a.hide_env_values(true).hide(hide)
    });
    let help = shown.render_long_help().to_string();
    out.push_str(&format!("\n## `{path}`\n\n```text\n"));
    for line in help.lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push_str("```\n");
    let names: Vec<String> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        let sub = cmd.find_subcommand_mut(&name).expect("listed above");
        walk(sub, &path, depth + 1, contents, out);
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_cli_reference_page_is_current() {
        let page = super::markdown(crate::Cli::command());
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reference/cli.md");
        if std::env::var_os("TOOLHOST_WRITE_REFERENCE").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &page).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == page,
            "docs/reference/cli.md is not what the binary's definitions render; run \
             TOOLHOST_WRITE_REFERENCE=1 cargo test -p toolhost-cli reference and commit it"
        );
    }

    #[test]
    fn every_command_is_on_the_page_and_no_environment_value_leaks() {
        let page = super::markdown(crate::Cli::command());
        for cmd in [
            "## `toolhost call`",
            "## `toolhost cap mint`",
            "## `toolhost serve`",
        ] {
            assert!(page.contains(cmd), "{cmd} missing");
        }
        for var in ["TOOLHOST_ROOT_KEY", "TOOLHOST_TOKEN"] {
            if let Some(value) = std::env::var_os(var).filter(|v| v.len() > 3) {
                assert!(
                    !page.contains(value.to_str().unwrap()),
                    "{var}'s value leaked"
                );
            }
        }
    }
}
