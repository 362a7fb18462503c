//! The first hour: `get-started`, `configure` (a wizard on a terminal, flags for scripts),
//! `credentials`, `config check` and `providers`. Parsing and printing only; every operation
//! is in `warrant_host::{get_started, providers, credentials, config_check}`.

use std::io::{BufRead as _, IsTerminal as _, Read as _, Write as _};
use std::path::Path;

use clap::{Subcommand, ValueEnum};
use warrant_host::providers::{ProviderKind, ProviderSetup, WriteLayer};

use crate::{Failure, pretty};

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
    if json {
        outln!("{}", pretty(&r));
    } else {
        outln!("Warrant in {}", r.workspace);
        for row in &r.rows {
            outln!(
                "{:<8} {:<12} {}",
                row.state.as_str(),
                row.area,
                crate::shown_inline(&row.evidence)
            );
            if let Some(next) = &row.next {
                outln!("{:<8} {:<12} next: {next}", "", "");
            }
        }
        if r.ready {
            outln!("All ready: warrant run \"<your task>\"");
        }
    }
    Ok(if r.ready { 0 } else { 1 })
}

fn read_value(what: &str) -> Result<String, Failure> {
    let unreadable =
        |e: std::io::Error| Failure::usage("W-CRED-003", format!("cannot read {what}: {e}"));
    let bytes = if std::io::stdin().is_terminal() {
        crate::requests::read_hidden(&format!("{what} (not shown): ")).map_err(unreadable)?
    } else {
        let mut buf = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut buf)
            .map_err(unreadable)?;
        buf
    };
    String::from_utf8(bytes)
        .map(|s| s.trim_end_matches(['\r', '\n']).to_owned())
        .map_err(|_| Failure::usage("W-CRED-003", format!("{what} is not UTF-8 text")))
}

fn print_area(done: &warrant_host::setup::Configured, json: bool) {
    if json {
        outln!("{}", pretty(done));
        return;
    }
    outln!("checked: {}", crate::shown_inline(&done.checked));
    for w in &done.wrote {
        outln!("wrote {w} to {}", done.path);
    }
}

fn interactive() -> bool {
    std::io::stdin().is_terminal()
}

fn words(s: &str) -> Vec<String> {
    s.split([',', ' '])
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

pub fn configure(ws: Option<&Path>, command: Option<ConfigureCommand>) -> Result<u8, Failure> {
    let at = crate::at(ws);
    match command {
        None => wizard(ws),
        Some(ConfigureCommand::Identity {
            mut tenant,
            mut teams,
            layer,
            json,
        }) => {
            if tenant.is_none() && teams.is_empty() && interactive() {
                tenant = Some(ask("Tenant (your organisation)", "")?).filter(|t| !t.is_empty());
                teams = words(&ask("Teams (comma-separated, empty for none)", "")?);
            }
            let done = warrant_host::setup::identity(&at, tenant.as_deref(), &teams, layer.into())?;
            print_area(&done, json);
            Ok(0)
        }
        Some(ConfigureCommand::Approvals {
            mut team,
            mut four_eyes,
            mut expiry,
            layer,
            json,
        }) => {
            if team.is_none() && four_eyes.is_empty() && expiry.is_none() && interactive() {
                team =
                    Some(ask("Team asked first (empty for none)", "")?).filter(|t| !t.is_empty());
                for w in words(&ask(
                    "Classes needing four eyes (destructive, secret, irreversible, …; empty for none)",
                    "",
                )?) {
                    match ClassArg::from_str(&w, true) {
                        Ok(c) => four_eyes.push(c),
                        Err(_) => {
                            return Err(Failure::usage(
                                "W-SETUP-014",
                                format!("{w:?} is not a risk class: nothing was written"),
                            ));
                        }
                    }
                }
                expiry = Some(ask("Approval expiry (15m, 1h; empty for the default)", "")?)
                    .filter(|e| !e.is_empty());
            }
            let classes: Vec<warrant_core::RiskClass> =
                four_eyes.into_iter().map(Into::into).collect();
            let done = warrant_host::setup::approvals(
                &at,
                team.as_deref(),
                &classes,
                expiry.as_deref(),
                layer.into(),
            )?;
            print_area(&done, json);
            Ok(0)
        }
        Some(ConfigureCommand::Sink {
            name,
            url,
            mut headers,
            layer,
            json,
        }) => {
            let asking = (name.is_none() || url.is_none()) && interactive();
            let name = match name {
                Some(n) => n,
                None if asking => ask("Sink name", "siem")?,
                None => return Err(Failure::usage("W-SETUP-015", "name the sink with --name")),
            };
            let url = match url {
                Some(u) => u,
                None if asking => ask("Receiver URL", "")?,
                None => {
                    return Err(Failure::usage(
                        "W-SETUP-015",
                        "give the receiver with --url",
                    ));
                }
            };
            if asking && headers.is_empty() {
                headers = words(&ask(
                    "Headers as NAME=cred:CREDENTIAL (empty for none)",
                    "",
                )?);
            }
            let mut pairs = Vec::new();
            for h in headers {
                let Some((k, v)) = h.split_once('=') else {
                    return Err(Failure::usage(
                        "W-SETUP-015",
                        format!("--header {h:?} is not NAME=REFERENCE"),
                    ));
                };
                pairs.push((k.trim().to_owned(), v.trim().to_owned()));
            }
            let done = warrant_host::setup::sink(&at, &name, &url, &pairs, layer.into())?;
            print_area(&done, json);
            Ok(0)
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
            let done = warrant_host::providers::configure(
                &crate::at(ws),
                &ProviderSetup {
                    kind,
                    base_url,
                    model,
                    key,
                    credential,
                    layer: layer.into(),
                },
            )?;
            print_configured(&done, json);
            Ok(0)
        }
    }
}

fn print_configured(done: &warrant_host::providers::ProviderConfigured, json: bool) {
    if json {
        outln!("{}", pretty(done));
        return;
    }
    if done.initialized {
        outln!("initialized .warrant/ in this workspace");
    }
    outln!(
        "{} at {} offers {} model(s); {} answered: {}",
        done.kind.as_str(),
        done.base_url,
        done.models_offered.len(),
        done.model,
        crate::shown_inline(&done.check_answer)
    );
    if let Some(c) = &done.credential {
        outln!(
            "key stored as credential {c} (never in the configuration; `warrant credentials list` says where)"
        );
    }
    outln!(
        "wrote [providers] model = \"{}\" to {}",
        done.model_spec,
        done.path.display()
    );
    outln!("next: {}", done.next);
}

/// One line typed at the terminal, after `prompt` on standard error; `default` when empty.
fn ask(prompt: &str, default: &str) -> Result<String, Failure> {
    let mut err = std::io::stderr().lock();
    if default.is_empty() {
        let _ = write!(err, "{prompt}: ");
    } else {
        let _ = write!(err, "{prompt} [{default}]: ");
    }
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

/// `warrant configure` on a terminal: the provider, step by step, with the endpoint's own list
/// of models. What it writes is what `configure provider` writes.
fn wizard(ws: Option<&Path>) -> Result<u8, Failure> {
    if !std::io::stdin().is_terminal() {
        return Err(Failure::usage(
            "W-SETUP-012",
            "`warrant configure` asks its questions on a terminal; in a script use `warrant configure provider --kind openai --base-url URL --key-from-stdin --model M`",
        ));
    }
    eprintln!("Set up the model provider. Nothing is written until the endpoint has answered.");
    let kind = loop {
        match ask("Provider (openai, anthropic, ollama)", "openai")?.as_str() {
            "openai" => break ProviderKind::Openai,
            "anthropic" => break ProviderKind::Anthropic,
            "ollama" => break ProviderKind::Ollama,
            other => eprintln!("{other:?} is not one of openai, anthropic, ollama"),
        }
    };
    let (base_url, key, offered) = loop {
        let base = ask("Base URL", kind.default_base_url())?;
        let base = match warrant_host::providers::normalize_base_url(kind, &base) {
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
        match warrant_host::providers::discover(kind, &base, key.as_deref()) {
            Ok(models) => break (base, key, models),
            Err(e) => eprintln!("error[{}]: {}", e.code, e.message),
        }
    };
    eprintln!("{base_url} offers:");
    for (i, m) in offered.iter().enumerate() {
        eprintln!("  {:>3}. {m}", i + 1);
    }
    let model = loop {
        let answer = ask(
            "Model (number or name)",
            offered.first().map_or("", String::as_str),
        )?;
        let picked = answer
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| offered.get(i).cloned())
            .unwrap_or(answer);
        if offered.contains(&picked) {
            break picked;
        }
        eprintln!("{picked:?} is not offered by {base_url}");
    };
    let layer = loop {
        match ask(
            "Write it to the project or your user configuration",
            "project",
        )?
        .as_str()
        {
            "project" => break WriteLayer::Project,
            "user" => break WriteLayer::User,
            other => eprintln!("{other:?} is not project or user"),
        }
    };
    eprintln!("Checking {model} with one call…");
    let done = warrant_host::providers::configure(
        &crate::at(ws),
        &ProviderSetup {
            kind,
            base_url: Some(base_url),
            model: Some(model),
            key,
            credential: None,
            layer,
        },
    )?;
    print_configured(&done, false);
    eprintln!(
        "More to set up when you need it: `warrant configure identity` (tenant, teams), `warrant configure approvals` (team, four eyes, expiry), `warrant configure sink` (an audit receiver). `warrant get-started` shows what is ready."
    );
    Ok(0)
}

pub fn credentials(ws: Option<&Path>, command: CredentialsCommand) -> Result<u8, Failure> {
    let at = crate::at(ws);
    match command {
        CredentialsCommand::Set {
            name,
            store_in,
            json,
        } => {
            use warrant_host::credentials::Backend;
            let backend = match store_in {
                StoreArg::Auto => Backend::Auto,
                StoreArg::Keyring => Backend::Keyring,
                StoreArg::Vault => Backend::Vault,
            };
            let value = read_value(&format!("the value of credential {name}"))?;
            let done = warrant_host::credentials::set(&at, &name, &value, backend)?;
            if let Some(note) = done.note.as_deref().filter(|_| !json) {
                eprintln!("note: {note}");
            }
            if json {
                outln!("{}", pretty(&done));
            } else {
                outln!(
                    "{} credential {} in the {} ({}); refer to it as {}",
                    done.outcome,
                    done.name,
                    done.stored_in,
                    done.path,
                    done.reference
                );
            }
            Ok(0)
        }
        CredentialsCommand::Delete { name, json } => {
            let done = warrant_host::credentials::delete(&at, &name)?;
            if json {
                outln!("{}", pretty(&done));
            } else {
                outln!("deleted credential {} from {}", done.name, done.path);
            }
            Ok(0)
        }
        CredentialsCommand::List { json } => {
            let list = warrant_host::credentials::list(&at)?;
            if json {
                outln!("{}", pretty(&list));
            } else {
                if list.credentials.is_empty() {
                    outln!("no credentials stored; `warrant credentials set NAME` stores one");
                }
                for c in &list.credentials {
                    outln!(
                        "{:<24} {:<16}{} set {:<25} used by {}",
                        c.name,
                        c.stored_in,
                        if c.readable { "" } else { " (locked)" },
                        c.set_at.as_deref().unwrap_or("(unknown)"),
                        if c.used_by.is_empty() {
                            "nothing".to_owned()
                        } else {
                            c.used_by.join(", ")
                        }
                    );
                }
                eprintln!("note: {}", list.note);
            }
            Ok(0)
        }
        CredentialsCommand::Check { json } => {
            let c = warrant_host::credentials::check(&at)?;
            if json {
                outln!("{}", pretty(&c));
            } else {
                for r in c.stored.iter().chain(&c.references) {
                    outln!(
                        "{:<4} {} {}: {}",
                        if r.ok { "ok" } else { "FAIL" },
                        if r.setting.is_empty() {
                            "stored"
                        } else {
                            &r.setting
                        },
                        r.reference,
                        r.detail
                    );
                }
            }
            Ok(if c.ok { 0 } else { 1 })
        }
    }
}

pub fn config(ws: Option<&Path>, command: ConfigCommand) -> Result<u8, Failure> {
    match command {
        ConfigCommand::Check { strict, json } => {
            let r = warrant_host::config_check::check(&crate::at(ws), strict, crate::notices())?;
            if json {
                outln!("{}", pretty(&r));
            } else {
                for l in &r.layers {
                    outln!(
                        "layer {:<8} {} {}",
                        l.layer,
                        l.path,
                        if l.parsed { "parsed" } else { "NOT PARSED" }
                    );
                }
                for f in &r.findings {
                    let at = match (&f.path, f.line) {
                        (Some(p), Some(l)) => format!("{p}:{l}"),
                        (Some(p), None) => p.clone(),
                        _ => f.layer.clone(),
                    };
                    outln!(
                        "{}[{}] {}: {}",
                        match f.severity {
                            warrant_host::config_check::Severity::Error => "error",
                            warrant_host::config_check::Severity::Warning => "warning",
                        },
                        f.code,
                        at,
                        crate::shown_inline(&f.message)
                    );
                    outln!("  fix: {}", f.fix);
                }
                if r.findings.is_empty() {
                    outln!("no findings");
                }
            }
            Ok(if r.ok { 0 } else { 1 })
        }
    }
}

pub fn providers(ws: Option<&Path>, command: ProvidersCommand) -> Result<u8, Failure> {
    let at = crate::at(ws);
    match command {
        ProvidersCommand::List { json } => {
            let l = warrant_host::providers::list(&at)?;
            if json {
                outln!("{}", pretty(&l));
            } else {
                outln!(
                    "default model: {}",
                    l.model.as_deref().unwrap_or("(none: `warrant configure`)")
                );
                for p in &l.providers {
                    outln!(
                        "{:<10} {:<11} {:<40} key {}",
                        p.kind.as_str(),
                        if p.default {
                            "default"
                        } else if p.configured {
                            "configured"
                        } else {
                            "-"
                        },
                        p.base_url,
                        match (&p.key_source, p.key_present) {
                            (None, _) => "not needed".to_owned(),
                            (Some(s), true) => format!("from {s}"),
                            (Some(s), false) => format!("missing ({s} unset)"),
                        }
                    );
                }
            }
            Ok(0)
        }
        ProvidersCommand::Check { model, call, json } => {
            let p = warrant_host::providers::check(&at, model.as_deref(), call)?;
            if json {
                outln!("{}", pretty(&p));
            } else {
                outln!(
                    "{:<4} {}: {}",
                    if p.ok { "ok" } else { "FAIL" },
                    p.model_spec,
                    crate::shown_inline(&p.detail)
                );
                if let Some(a) = &p.answer {
                    outln!("     answered: {}", crate::shown_inline(a));
                }
            }
            Ok(if p.ok { 0 } else { 1 })
        }
        ProvidersCommand::Request { model, prompt } => {
            let host = warrant_host::Host::open(&at, crate::notices())?;
            let r = warrant_host::providers::request_preview(&host, model.as_deref(), &prompt)?;
            outln!("{}", pretty(&r));
            Ok(0)
        }
    }
}
