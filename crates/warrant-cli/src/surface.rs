//! The surface a shell and a script see: completion scripts (`clap_complete`, generated from
//! the same parser, so they cannot drift) and `capabilities` (the host's view).

use clap::CommandFactory;

use crate::{Cli, CompletionShell, Failure, pretty};

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

pub fn capabilities(_ws: Option<&std::path::Path>, json: bool) -> Result<u8, Failure> {
    let caps = warrant_host::capabilities::capabilities();
    if json {
        outln!("{}", pretty(&caps));
        return Ok(0);
    }
    outln!("warrant {}", caps.version);
    let names: Vec<&str> = caps.tools.iter().map(|t| t.name.as_str()).collect();
    outln!("tools      {}", names.join(", "));
    let providers: Vec<&str> = caps.providers.iter().map(|p| p.form).collect();
    outln!("providers  {}", providers.join(", "));
    let stores: Vec<&str> = caps.stores.iter().map(|s| s.name).collect();
    outln!("stores     {}", stores.join(", "));
    let catalogs: Vec<&str> = caps.catalogs.iter().map(|s| s.name).collect();
    outln!("catalogs   {} (read-only)", catalogs.join(", "));
    if let Some(e) = &caps.probe_error {
        outln!("sandbox    could not probe: {e}");
    }
    for row in &caps.sandbox {
        outln!(
            "sandbox    {:<22} {}  {}",
            row.mechanism,
            if row.available { "yes" } else { "no " },
            row.detail
        );
    }
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
