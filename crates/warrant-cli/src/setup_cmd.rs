//! The first hour: `get-started`, `configure` (a wizard on a terminal, flags for scripts),
//! `credentials`, `config check` and `providers`. Parsing and printing only; every operation
//! is in `warrant_host::{get_started, providers, credentials, config_check}`.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::Path;

use clap::{Subcommand, ValueEnum};
use warrant_core::RiskClass;
use warrant_host::providers::{self, ProviderKind, ProviderSetup, WriteLayer};
use warrant_host::setup;
use warrant_text::ops::setup as words;

use crate::{Failure, emit};

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum KindArg {
    /// Any OpenAI-compatible endpoint (base URL with /v1).
    Openai,
    Anthropic,
    Ollama,
}

impl From<KindArg> for ProviderKind {
    fn from(k: KindArg) -> Self {
        match k {
            KindArg::Openai => Self::Openai,
            KindArg::Anthropic => Self::Anthropic,
            KindArg::Ollama => Self::Ollama,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum LayerArg {
    /// `.warrant/config.toml` of this workspace.
    Project,
    /// `~/.config/warrant/config.toml`.
    User,
}

impl From<LayerArg> for WriteLayer {
    fn from(l: LayerArg) -> Self {
        match l {
            LayerArg::Project => Self::Project,
            LayerArg::User => Self::User,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum ConfigureCommand {
    /// The model provider: lists the models the endpoint offers, makes one call, and only then
    /// writes the layer (the key stored as a credential, referenced as `cred:NAME`).
    Provider {
        #[arg(long, value_enum)]
        kind: KindArg,
        /// The endpoint (OpenAI-compatible: with `/v1`; default: the provider's public one).
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
        /// Read the API key from standard input.
        #[arg(long)]
        key_from_stdin: bool,
        /// The credential the key is stored as (default: `<kind>-api-key`).
        #[arg(long, value_name = "NAME")]
        credential: Option<String>,
        /// The model runs use by default.
        #[arg(long)]
        model: Option<String>,
        #[arg(long, value_enum, default_value = "project")]
        layer: LayerArg,
        #[arg(long)]
        json: bool,
    },
    /// Your tenant and teams (`[identity]`); a field the managed layer locks is refused. On a
    /// terminal without flags, asks.
    Identity {
        #[arg(long)]
        tenant: Option<String>,
        /// A team (repeat for several).
        #[arg(long = "team", value_name = "TEAM")]
        teams: Vec<String>,
        #[arg(long, value_enum, default_value = "project")]
        layer: LayerArg,
        #[arg(long)]
        json: bool,
    },
    /// Who is asked and how (`[approvals] team`, `[risk.<class>] four_eyes`, `expiry`). On a
    /// terminal without flags, asks.
    Approvals {
        /// The team of the identity directory asked first for this project.
        #[arg(long)]
        team: Option<String>,
        /// A risk class whose approval must come from someone other than the run's person
        /// (repeat for several).
        #[arg(long = "four-eyes", value_name = "CLASS", value_enum)]
        four_eyes: Vec<ClassArg>,
        /// How long an approval stays valid (`15m`, `1h`) for the always-asked classes and
        /// the four-eyes ones.
        #[arg(long, value_name = "DURATION")]
        expiry: Option<String>,
        #[arg(long, value_enum, default_value = "project")]
        layer: LayerArg,
        #[arg(long)]
        json: bool,
    },
    /// An HTTP audit receiver (`[audit.sinks.NAME]`), saved only after it acknowledged a
    /// delivery. On a terminal without flags, asks.
    Sink {
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        url: Option<String>,
        /// `Header=cred:NAME` or `Header=env:VAR` (repeat for several); never a value.
        #[arg(long = "header", value_name = "NAME=REF")]
        headers: Vec<String>,
        #[arg(long, value_enum, default_value = "project")]
        layer: LayerArg,
        #[arg(long)]
        json: bool,
    },
}

/// The risk classes, as flags name them.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ClassArg {
    Read,
    Change,
    External,
    Destructive,
    Secret,
    Irreversible,
}

impl From<ClassArg> for warrant_core::RiskClass {
    fn from(c: ClassArg) -> Self {
        match c {
            ClassArg::Read => Self::Read,
            ClassArg::Change => Self::Change,
            ClassArg::External => Self::External,
            ClassArg::Destructive => Self::Destructive,
            ClassArg::Secret => Self::Secret,
            ClassArg::Irreversible => Self::Irreversible,
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum StoreArg {
    Auto,
    Keyring,
    Vault,
}

#[derive(Subcommand, Debug)]
pub enum CredentialsCommand {
    /// Store a credential: the value is read from standard input (hidden on a terminal).
    Set {
        name: String,
        /// Where: the OS keyring when one answers unlocked, else the encrypted vault (auto);
        /// `keyring` refuses when it does not.
        #[arg(long = "in", value_enum, default_value_t = StoreArg::Auto)]
        store_in: StoreArg,
        #[arg(long)]
        json: bool,
    },
    /// Names, where each is stored, when it was set, what refers to it; never values.
    List {
        #[arg(long)]
        json: bool,
    },
    Delete {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Open every stored credential and resolve every `cred:` reference of the configuration.
    Check {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Parse and merge every layer; findings with a code, layer, line and what to do.
    /// Exit 1 on an error (with --strict, on any finding).
    Check {
        #[arg(long)]
        strict: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ProvidersCommand {
    /// The configured providers, where each is reached and where its key comes from.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Ask the provider for its models with the configured key (with --call, one call too).
    Check {
        /// PROVIDER:MODEL (default: `[providers] model`).
        #[arg(long)]
        model: Option<String>,
        #[arg(long)]
        call: bool,
        #[arg(long)]
        json: bool,
    },
    /// Print the exact request a run with this task would send first, redacted; sends nothing.
    Request {
        #[arg(long)]
        model: Option<String>,
        prompt: String,
    },
}

pub fn get_started(ws: Option<&Path>, json: bool) -> Result<u8, Failure> {
    let r = warrant_host::get_started::get_started(&crate::at(ws), crate::notices())?;
    emit(json, &r, words::readiness);
    Ok(if r.ready { 0 } else { 1 })
}

/// A value typed hidden at a terminal, else all of standard input, without its line end.
fn read_value(what: &str) -> Result<String, Failure> {
    let bytes = crate::requests::read_value(&format!("{what} (not shown): "))
        .map_err(|e| Failure::usage("W-CRED-003", format!("cannot read {what}: {e}")))?;
    String::from_utf8(bytes)
        .map(|s| s.trim_end_matches(['\r', '\n']).to_owned())
        .map_err(|_| Failure::usage("W-CRED-003", format!("{what} is not UTF-8 text")))
}

fn interactive() -> bool {
    std::io::stdin().is_terminal()
}

/// `ask`, with an empty answer as none.
fn ask_some(prompt: &str) -> Result<Option<String>, Failure> {
    Ok(Some(ask(prompt, "")?).filter(|a| !a.is_empty()))
}

pub fn configure(ws: Option<&Path>, command: Option<ConfigureCommand>) -> Result<u8, Failure> {
    let at = crate::at(ws);
    let (done, json) = match command {
        None => return wizard(ws),
        Some(ConfigureCommand::Identity {
            mut tenant,
            mut teams,
            layer,
            json,
        }) => {
            if tenant.is_none() && teams.is_empty() && interactive() {
                tenant = ask_some("Tenant (your organisation)")?;
                teams = setup::words(&ask("Teams (comma-separated, empty for none)", "")?);
            }
            let layer = layer.into();
            (
                setup::identity(&at, tenant.as_deref(), &teams, layer)?,
                json,
            )
        }
        Some(ConfigureCommand::Approvals {
            mut team,
            four_eyes,
            mut expiry,
            layer,
            json,
        }) => {
            let mut classes: Vec<RiskClass> = four_eyes.into_iter().map(Into::into).collect();
            if team.is_none() && classes.is_empty() && expiry.is_none() && interactive() {
                team = ask_some("Team asked first (empty for none)")?;
                let named = ask(
                    "Classes needing four eyes (destructive, secret, irreversible, …; empty for none)",
                    "",
                )?;
                classes = setup::risk_classes(&setup::words(&named))?;
                expiry = ask_some("Approval expiry (15m, 1h; empty for the default)")?;
            }
            let (team, expiry, layer) = (team.as_deref(), expiry.as_deref(), layer.into());
            (setup::approvals(&at, team, &classes, expiry, layer)?, json)
        }
        Some(ConfigureCommand::Sink {
            name,
            url,
            mut headers,
            layer,
            json,
        }) => {
            let asking = (name.is_none() || url.is_none()) && interactive();
            let missing = |what| Failure::usage("W-SETUP-015", what);
            let name = match name {
                Some(n) => n,
                None if asking => ask("Sink name", "siem")?,
                None => return Err(missing("name the sink with --name")),
            };
            let url = match url {
                Some(u) => u,
                None if asking => ask("Receiver URL", "")?,
                None => return Err(missing("give the receiver with --url")),
            };
            if asking && headers.is_empty() {
                let typed = ask("Headers as NAME=cred:CREDENTIAL (empty for none)", "")?;
                headers = setup::words(&typed);
            }
            let pairs = setup::header_pairs(&headers)?;
            (setup::sink(&at, &name, &url, &pairs, layer.into())?, json)
        }
        Some(ConfigureCommand::Provider {
            kind,
            base_url,
            key_from_stdin,
            credential,
            model,
            layer,
            json,
        }) => {
            let kind = ProviderKind::from(kind);
            let key = if key_from_stdin {
                Some(read_value(&format!("the {} API key", kind.as_str()))?)
            } else {
                None
            };
            let layer = layer.into();
            let setup = ProviderSetup {
                kind,
                base_url,
                model,
                key,
                credential,
                layer,
            };
            let done = providers::configure(&at, &setup)?;
            emit(json, &done, words::provider_configured);
            return Ok(0);
        }
    };
    emit(json, &done, words::configured);
    Ok(0)
}

/// One line typed at the terminal, after `prompt` on standard error; `default` when empty.
fn ask(prompt: &str, default: &str) -> Result<String, Failure> {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{}", words::question(prompt, default));
    let _ = err.flush();
    let mut line = String::new();
    let n = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Failure::usage("W-SETUP-012", format!("cannot read the answer: {e}")))?;
    if n == 0 {
        return Err(Failure::usage(
            "W-SETUP-012",
            "standard input ended before the wizard did: nothing was written",
        ));
    }
    let line = line.trim();
    Ok(if line.is_empty() { default } else { line }.to_owned())
}

/// Asks until `understood` takes the answer; says `refusal` of each answer it does not.
fn ask_until<T>(
    prompt: &str,
    default: &str,
    understood: impl Fn(&str) -> Option<T>,
    refusal: impl Fn(&str) -> String,
) -> Result<T, Failure> {
    loop {
        let answer = ask(prompt, default)?;
        match understood(&answer) {
            Some(v) => return Ok(v),
            None => eprintln!("{}", refusal(&answer)),
        }
    }
}

/// `warrant configure` on a terminal: the provider, step by step, with the endpoint's own list
/// of models. What it writes is what `configure provider` writes.
fn wizard(ws: Option<&Path>) -> Result<u8, Failure> {
    if !interactive() {
        return Err(Failure::usage(
            "W-SETUP-012",
            "`warrant configure` asks its questions on a terminal; in a script use `warrant configure provider --kind openai --base-url URL --key-from-stdin --model M`",
        ));
    }
    eprintln!("{}", words::WIZARD_START);
    let kind = ask_until(
        "Provider (openai, anthropic, ollama)",
        "openai",
        ProviderKind::named,
        |other| format!("{other:?} is not one of openai, anthropic, ollama"),
    )?;
    let (base_url, key, offered) = loop {
        let base = ask("Base URL", kind.default_base_url())?;
        let base = match providers::normalize_base_url(kind, &base) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("error[{}]: {}", e.code, e.message);
                continue;
            }
        };
        let key = if kind.needs_key() {
            Some(read_value("API key")?)
        } else {
            None
        };
        match providers::discover(kind, &base, key.as_deref()) {
            Ok(models) => break (base, key, models),
            Err(e) => eprintln!("error[{}]: {}", e.code, e.message),
        }
    };
    for line in words::offered(&base_url, &offered) {
        eprintln!("{line}");
    }
    let first = offered.first().map_or("", String::as_str);
    let model = ask_until(
        "Model (number or name)",
        first,
        |typed| providers::pick_model(typed, &offered),
        |typed| format!("{typed:?} is not offered by {base_url}"),
    )?;
    let layer = ask_until(
        "Write it to the project or your user configuration",
        "project",
        WriteLayer::named,
        |other| format!("{other:?} is not project or user"),
    )?;
    eprintln!("Checking {model} with one call…");
    let setup = ProviderSetup {
        kind,
        base_url: Some(base_url),
        model: Some(model),
        key,
        credential: None,
        layer,
    };
    crate::lines(words::provider_configured(&providers::configure(
        &crate::at(ws),
        &setup,
    )?));
    eprintln!("{}", words::WIZARD_MORE);
    Ok(0)
}

pub fn credentials(ws: Option<&Path>, command: CredentialsCommand) -> Result<u8, Failure> {
    use warrant_host::credentials::{self as creds, Backend};
    let at = crate::at(ws);
    match command {
        CredentialsCommand::Set {
            name,
            store_in,
            json,
        } => {
            let backend = match store_in {
                StoreArg::Auto => Backend::Auto,
                StoreArg::Keyring => Backend::Keyring,
                StoreArg::Vault => Backend::Vault,
            };
            let value = read_value(&format!("the value of credential {name}"))?;
            let done = creds::set(&at, &name, &value, backend)?;
            if let Some(note) = done.note.as_deref().filter(|_| !json) {
                eprintln!("note: {note}");
            }
            emit(json, &done, |d| vec![words::credential_set(d)]);
        }
        CredentialsCommand::Delete { name, json } => {
            let done = creds::delete(&at, &name)?;
            emit(json, &done, |d| vec![words::credential_deleted(d)]);
        }
        CredentialsCommand::List { json } => {
            let list = creds::list(&at)?;
            emit(json, &list, words::credentials);
            if !json {
                eprintln!("note: {}", list.note);
            }
        }
        CredentialsCommand::Check { json } => {
            let c = creds::check(&at)?;
            emit(json, &c, words::credentials_checked);
            return Ok(if c.ok { 0 } else { 1 });
        }
    }
    Ok(0)
}

pub fn config(ws: Option<&Path>, command: ConfigCommand) -> Result<u8, Failure> {
    let ConfigCommand::Check { strict, json } = command;
    let r = warrant_host::config_check::check(&crate::at(ws), strict, crate::notices())?;
    emit(json, &r, words::config_report);
    Ok(if r.ok { 0 } else { 1 })
}

pub fn providers(ws: Option<&Path>, command: ProvidersCommand) -> Result<u8, Failure> {
    let at = crate::at(ws);
    match command {
        ProvidersCommand::List { json } => emit(json, &providers::list(&at)?, words::providers),
        ProvidersCommand::Check { model, call, json } => {
            let p = providers::check(&at, model.as_deref(), call)?;
            emit(json, &p, words::provider_probe);
            return Ok(if p.ok { 0 } else { 1 });
        }
        ProvidersCommand::Request { model, prompt } => {
            let host = warrant_host::Host::open(&at, crate::notices())?;
            let r = providers::request_preview(&host, model.as_deref(), &prompt)?;
            outln!("{}", crate::pretty(&r));
        }
    }
    Ok(0)
}
