//! `warrant web [--bind ADDR] [--public] [--open]`: one call into `warrant-web`, which prints
//! nothing itself; the address with its token goes to standard output, the rest to stderr.

use std::io::Write as _;
use std::path::Path;

use warrant_text::features::servers;

use crate::Failure;

pub fn web(
    ws: Option<&Path>,
    bind: std::net::SocketAddr,
    public: bool,
    open: bool,
) -> Result<u8, Failure> {
    let options = warrant_web::Options { bind, public };
    warrant_web::serve(crate::at(ws), crate::notices, options, |launched| {
        if let Some(warning) = &launched.warning {
            eprintln!("warning: {warning}");
        }
        eprintln!("{}", servers::WEB_OPEN);
        outln!("{}", launched.url);
        let _ = std::io::stdout().flush();
        // The browser is the person's; a failure to start it is only said.
        if open
            && let Err(e) = std::process::Command::new("xdg-open")
                .arg(&launched.url)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
        {
            eprintln!("{}", servers::web_no_browser(&e));
        }
    })?;
    Ok(0)
}
