//! The surface a shell sees: completion scripts (`clap_complete`, generated from the same
//! parser, so they cannot drift), and the test that pins every command's help.

use clap::CommandFactory;

use crate::{Cli, CompletionShell, Failure};

pub fn completions(shell: CompletionShell) -> Result<u8, Failure> {
    let mut command = Cli::command();
    let mut out = std::io::stdout().lock();
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(shell, &mut command, "warrant", &mut out);
    Ok(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Every command's path and its `--help`, walked from the parser itself, so a command
    /// added without a snapshot fails here.
    fn helps(command: &mut clap::Command, path: &str, out: &mut Vec<(String, String)>) {
        let help = command.render_long_help().to_string();
        out.push((path.to_owned(), help));
        // clap's own `help` subcommands repeat what each `--help` says.
        for sub in command
            .get_subcommands_mut()
            .filter(|s| s.get_name() != "help")
        {
            let name = format!("{path} {}", sub.get_name());
            helps(sub, &name, out);
        }
    }

    /// The surface, pinned: each command's help is a golden snapshot
    /// (`src/snapshots/warrant_cli__surface__tests__help@*.snap`); a changed help fails until
    /// its snapshot is reviewed (`cargo insta review`).
    #[test]
    fn every_commands_help_is_pinned() {
        let mut command = Cli::command().term_width(100);
        command.build();
        let mut all = Vec::new();
        helps(&mut command, "warrant", &mut all);
        assert!(all.len() > 30, "only {} commands found", all.len());
        for (path, help) in all {
            let name = path.replace(' ', "-");
            insta::with_settings!({snapshot_suffix => name, description => path.clone(), prepend_module_to_snapshot => true}, {
                insta::assert_snapshot!("help", help);
            });
        }
    }
}
