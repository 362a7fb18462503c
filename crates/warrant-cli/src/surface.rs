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
