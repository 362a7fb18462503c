//! Standalone sandbox launcher: `warrant-sandbox <plan-json> -- <argv...>`. The `warrant` binary
//! offers the same entry point as the hidden `__sandbox` subcommand.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(warrant_exec::sandbox::sandbox_main(&args));
}
