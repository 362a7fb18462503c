//! Model providers as a person sets them up: discovery of the models an endpoint offers
//! (`/v1/models`, Anthropic's `/v1/models`, Ollama's `/api/tags`), one end-to-end call through
//! the same provider code a run uses, and `warrant configure provider`, which writes the
//! chosen layer only after both answered (the key stored as a credential, referenced as
//! `cred:NAME`). `providers list|check|request` read what is configured; `request` builds the
//! exact first request body of a run, redacted, and sends nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use warrant_core::Coded as _;
use warrant_core::config::{Layer, LayerKind, Settings};
use warrant_llm::{
    AnthropicProvider, Conversation, Message, ModelSpec, OpenAiProvider, anthropic_settings_from,
    ollama_settings_from, openai_settings_from,
};

use crate::install::{self, Paths};
use crate::{HostError, Result, Where};

/// The kinds of provider a person can configure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Any OpenAI-compatible chat-completions endpoint (base URL with `/v1`).
    Openai,
    Anthropic,
    /// Ollama (base URL without `/v1`); no key.
    Ollama,
}

impl ProviderKind {
    pub const ALL: [Self; 3] = [Self::Openai, Self::Anthropic, Self::Ollama];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
            Self::Ollama => "ollama",
        }
    }

    /// Whether the endpoint wants a key.
    pub fn needs_key(self) -> bool {
        match self {
            Self::Openai | Self::Anthropic => true,
            Self::Ollama => false,
        }
    }

    /// The base URL used when none is given.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::Openai => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com",
            Self::Ollama => "http://localhost:11434",
        }
    }

    /// The kind a person named (`openai`, `anthropic`, `ollama`).
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The credential name a key is stored under unless told otherwise.
    pub fn default_credential(self) -> &'static str {
        match self {
            Self::Openai => "openai-api-key",
            Self::Anthropic => "anthropic-api-key",
            Self::Ollama => "ollama-api-key",
        }
    }
}

/// The layer `configure` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteLayer {
    /// `.warrant/config.toml` of the workspace.
    Project,
    /// `~/.config/warrant/config.toml` (every workspace of this person).
    User,
}

impl WriteLayer {
    /// The layer a person named (`project`, `user`).
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "project" => Some(Self::Project),
            "user" => Some(Self::User),
            _ => None,
        }
    }
}

/// The model a person picked from those an endpoint offers: by its number (from 1) or its
/// name; `None` when the endpoint does not offer it.
pub fn pick_model(typed: &str, offered: &[String]) -> Option<String> {
    let picked = typed
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| offered.get(i))
        .map_or(typed, String::as_str);
    offered.iter().find(|m| *m == picked).cloned()
}

const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(PROBE_TIMEOUT))
            .http_status_as_error(false)
            .build(),
    )
}

/// The base URL as the provider code expects it: no trailing `/`; `/v1` kept for OpenAI,
/// dropped for Anthropic and Ollama.
pub fn normalize_base_url(kind: ProviderKind, url: &str) -> Result<String> {
    let url = url.trim().trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() <= "https://".len()
    {
        return Err(HostError::usage(
            "W-SETUP-001",
            format!("{url:?} is not a base URL: write http://HOST[:PORT]/… or https://…"),
        ));
    }
    Ok(match kind {
        ProviderKind::Openai => url.to_owned(),
        ProviderKind::Anthropic | ProviderKind::Ollama => {
            url.strip_suffix("/v1").unwrap_or(url).to_owned()
        }
    })
}

/// `text` with `key` cut out, so a server that echoes it does not put it on a screen.
fn scrub(text: &str, key: Option<&str>) -> String {
    let mut t: String = text.chars().take(300).collect();
    if let Some(k) = key.filter(|k| k.len() >= 4) {
        t = t.replace(k, "[REDACTED]");
    }
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The models `base_url` offers, asked the way its kind documents. Every failure names the
/// URL and what to do; the key never appears.
pub fn discover(kind: ProviderKind, base_url: &str, key: Option<&str>) -> Result<Vec<String>> {
    let url = match kind {
        ProviderKind::Openai => format!("{base_url}/models"),
        ProviderKind::Anthropic => format!("{base_url}/v1/models"),
        ProviderKind::Ollama => format!("{base_url}/api/tags"),
    };
    let mut request = agent().get(&url);
    if let Some(k) = key {
        request = match kind {
            ProviderKind::Anthropic => request
                .header("x-api-key", k)
                .header("anthropic-version", "2023-06-01"),
            ProviderKind::Openai | ProviderKind::Ollama => {
                request.header("Authorization", format!("Bearer {k}"))
            }
        };
    }
    let mut response = request.call().map_err(|e| {
        HostError::usage(
            "W-SETUP-002",
            format!(
                "cannot reach {url}: {}; check the base URL and that the server is running",
                scrub(&e.to_string(), key)
            ),
        )
    })?;
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().unwrap_or_default();
    if status == 401 || status == 403 {
        return Err(HostError::usage(
            "W-SETUP-003",
            format!(
                "{url} refused the key (HTTP {status}: {}); check the key, or store the right one with --key-from-stdin",
                scrub(&body, key)
            ),
        ));
    }
    let v1_hint = match kind {
        ProviderKind::Openai if !base_url.ends_with("/v1") => {
            " (an OpenAI-compatible base URL usually ends in /v1)"
        }
        ProviderKind::Openai | ProviderKind::Anthropic | ProviderKind::Ollama => "",
    };
    if !(200..300).contains(&status) {
        return Err(HostError::usage(
            "W-SETUP-004",
            format!(
                "{url} answered HTTP {status}, not a list of models: is this a{} server{v1_hint}? It said: {}",
                match kind {
                    ProviderKind::Openai => "n OpenAI-compatible",
                    ProviderKind::Anthropic => "n Anthropic",
                    ProviderKind::Ollama => "n Ollama",
                },
                scrub(&body, key)
            ),
        ));
    }
    let not_models = || {
        HostError::usage(
            "W-SETUP-004",
            format!(
                "{url} does not answer like a{} server{v1_hint} (no {} list): {}",
                match kind {
                    ProviderKind::Openai => "n OpenAI-compatible",
                    ProviderKind::Anthropic => "n Anthropic",
                    ProviderKind::Ollama => "n Ollama",
                },
                match kind {
                    ProviderKind::Ollama => "`models`",
                    ProviderKind::Openai | ProviderKind::Anthropic => "`data`",
                },
                scrub(&body, key)
            ),
        )
    };
    let doc: Value = serde_json::from_str(&body).map_err(|_| not_models())?;
    let (list, field) = match kind {
        ProviderKind::Ollama => (doc.get("models"), "name"),
        ProviderKind::Openai | ProviderKind::Anthropic => (doc.get("data"), "id"),
    };
    let list = list.and_then(Value::as_array).ok_or_else(not_models)?;
    let mut models: Vec<String> = list
        .iter()
        .filter_map(|m| m.get(field).and_then(Value::as_str).map(str::to_owned))
        .collect();
    models.sort();
    models.dedup();
    Ok(models)
}

/// Refuses a model the endpoint does not offer, naming what it does offer.
pub fn check_model(base_url: &str, model: &str, offered: &[String]) -> Result<()> {
    if offered.iter().any(|m| m == model) {
        return Ok(());
    }
    let shown: Vec<&str> = offered.iter().take(20).map(String::as_str).collect();
    Err(HostError::usage(
        "W-SETUP-005",
        format!(
            "{base_url} does not offer the model {model:?}; it offers: {}{}",
            if shown.is_empty() {
                "nothing".to_owned()
            } else {
                shown.join(", ")
            },
            if offered.len() > shown.len() {
                format!(" and {} more", offered.len() - shown.len())
            } else {
                String::new()
            }
        ),
    ))
}

/// The provider a run would build for this endpoint, key and model.
fn provider_for(
    kind: ProviderKind,
    base_url: &str,
    key: Option<&str>,
    model: &str,
) -> Result<Box<dyn warrant_llm::ModelProvider>> {
    let env: BTreeMap<String, String> = key
        .map(|k| ("WARRANT_SETUP_KEY".to_owned(), k.to_owned()))
        .into_iter()
        .collect();
    let reference = key.map(|_| "env:WARRANT_SETUP_KEY".to_owned());
    Ok(match kind {
        ProviderKind::Openai => {
            let config = warrant_core::config::OpenAiConfig {
                base_url: Some(base_url.to_owned()),
                api_key: reference,
                ..Default::default()
            };
            let settings =
                openai_settings_from(&config, &env, model).map_err(|e| HostError::bad_input(&e))?;
            Box::new(OpenAiProvider::new(settings))
        }
        ProviderKind::Anthropic => {
            let config = warrant_core::config::AnthropicConfig {
                base_url: Some(base_url.to_owned()),
                api_key: reference,
                max_tokens: Some(16),
                ..Default::default()
            };
            let settings = anthropic_settings_from(&config, &env, model)
                .map_err(|e| HostError::bad_input(&e))?;
            Box::new(AnthropicProvider::new(settings))
        }
        ProviderKind::Ollama => {
            let config = warrant_core::config::OllamaConfig {
                base_url: Some(base_url.to_owned()),
            };
            Box::new(OpenAiProvider::new(ollama_settings_from(
                &config, &env, model,
            )))
        }
    })
}

/// What the check call asks.
pub const CHECK_PROMPT: &str = "Reply with the single word OK.";

/// One call end to end, through the provider code a run uses; returns the start of the answer.
pub fn call_once(
    kind: ProviderKind,
    base_url: &str,
    key: Option<&str>,
    model: &str,
) -> Result<String> {
    let provider = provider_for(kind, base_url, key, model)?;
    let conversation = Conversation {
        system: "You are checking that this endpoint answers.".to_owned(),
        messages: vec![Message::User {
            content: CHECK_PROMPT.to_owned(),
        }],
    };
    // The person's own check of their endpoint, outside any run (so no `provider.call` is
    // decided): it still goes out the one way every request does, through the guard. It
    // carries nothing untrusted, so the guard passes it.
    let taint = warrant_llm::untrusted::Taint::default();
    let request =
        warrant_llm::untrusted::GuardedRequest::assemble(&conversation, &[], &taint, true)
            .map_err(|e| HostError::failed(&e))?;
    let response = request.send(provider.as_ref(), 0).map_err(|e| {
        HostError::usage(
            "W-SETUP-006",
            format!(
                "{base_url} listed {model} but a call to it failed: [{}] {}",
                e.code(),
                scrub(&e.to_string(), key)
            ),
        )
    })?;
    Ok(scrub(response.text.as_deref().unwrap_or(""), key))
}

/// `warrant configure provider`, as asked.
#[derive(Clone, Debug)]
pub struct ProviderSetup {
    pub kind: ProviderKind,
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// The key, when one is given (read from standard input by the front end).
    pub key: Option<String>,
    /// The credential it is stored as (default: [`ProviderKind::default_credential`]).
    pub credential: Option<String>,
    pub layer: WriteLayer,
}

/// What `configure provider` did.
#[derive(Clone, Debug, Serialize)]
pub struct ProviderConfigured {
    pub kind: ProviderKind,
    pub base_url: String,
    pub model: String,
    /// `[providers] model` as written: what `warrant run` uses without `--model`.
    pub model_spec: String,
    pub models_offered: Vec<String>,
    /// The start of the check call's answer.
    pub check_answer: String,
    /// `cred:NAME` when a key was stored.
    pub credential: Option<String>,
    pub layer: WriteLayer,
    pub path: PathBuf,
    /// Whether `.warrant/` was made now (the workspace had none).
    pub initialized: bool,
    /// The next command.
    pub next: String,
}

/// Probes the endpoint (models, then one call), and only then initializes the workspace when
/// it has no `.warrant/`, stores the key as a credential and writes the layer. A failure at any
/// probe writes nothing; a failure writing the layer takes a newly stored credential back.
pub fn configure(at: &Where, setup: &ProviderSetup) -> Result<ProviderConfigured> {
    let kind = setup.kind;
    let base_url = normalize_base_url(
        kind,
        setup.base_url.as_deref().unwrap_or(kind.default_base_url()),
    )?;
    let key = setup
        .key
        .as_deref()
        .map(|k| k.trim_end_matches(['\r', '\n']))
        .filter(|k| !k.trim().is_empty());
    if key.is_none() && kind.needs_key() {
        return Err(HostError::usage(
            "W-SETUP-007",
            format!(
                "a {} endpoint needs a key: pass --key-from-stdin and write it on standard input",
                kind.as_str()
            ),
        ));
    }
    let credential = setup
        .credential
        .clone()
        .unwrap_or_else(|| kind.default_credential().to_owned());
    let offered = discover(kind, &base_url, key)?;
    let Some(model) = setup.model.clone().filter(|m| !m.trim().is_empty()) else {
        return Err(HostError::usage(
            "W-SETUP-005",
            format!(
                "name the model with --model; {base_url} offers: {}",
                offered.join(", ")
            ),
        ));
    };
    check_model(&base_url, &model, &offered)?;
    let answer = call_once(kind, &base_url, key, &model)?;

    let mut paths = install::paths(at, true)?;
    let initialized = if paths.dot.is_dir() {
        false
    } else {
        crate::init::init(&paths)?;
        paths = install::paths(at, false)?;
        true
    };
    let file = layer_file(&paths, setup.layer)?;
    let model_spec = format!("{}:{model}", kind.as_str());
    let reference = key.map(|_| format!("{}{credential}", warrant_llm::secret::CRED_PREFIX));
    let text = edited_layer(&file, setup.layer, |doc| {
        let providers = table(doc, "providers");
        providers["model"] = toml_edit::value(model_spec.as_str());
        let t = sub_table(providers, kind.as_str());
        t["base_url"] = toml_edit::value(base_url.as_str());
        match &reference {
            Some(r) => t["api_key"] = toml_edit::value(r.as_str()),
            None => {
                t.remove("api_key");
            }
        }
    })?;
    let stored_before = match key {
        Some(k) => {
            let had = crate::credentials::list(&Where {
                workspace: Some(paths.workspace.clone()),
                ..at.clone()
            })?
            .credentials
            .iter()
            .any(|c| c.name == credential);
            crate::credentials::set(
                &Where {
                    workspace: Some(paths.workspace.clone()),
                    ..at.clone()
                },
                &credential,
                k,
                crate::credentials::Backend::Auto,
            )?;
            Some(had)
        }
        None => None,
    };
    if let Err(e) = write_atomically(&file, &text) {
        if stored_before == Some(false) {
            let _ = crate::credentials::delete(
                &Where {
                    workspace: Some(paths.workspace),
                    ..at.clone()
                },
                &credential,
            );
        }
        return Err(e);
    }
    Ok(ProviderConfigured {
        kind,
        base_url,
        model,
        next: "warrant run \"<your task>\"".to_owned(),
        model_spec,
        models_offered: offered,
        check_answer: answer,
        credential: reference,
        layer: setup.layer,
        path: file,
        initialized,
    })
}

/// The `config.toml` of `layer`.
pub fn layer_file(paths: &Paths, layer: WriteLayer) -> Result<PathBuf> {
    match layer {
        WriteLayer::Project => Ok(paths.dot.join(install::CONFIG_FILE)),
        WriteLayer::User => paths
            .user
            .as_ref()
            .map(|u| u.join(install::CONFIG_FILE))
            .ok_or_else(|| {
                HostError::usage(
                    "W-SETUP-008",
                    "there is no user configuration directory here (neither XDG_CONFIG_HOME nor HOME is set); write the project layer instead",
                )
            }),
    }
}

/// `doc[name]` as a table, made when absent.
pub(crate) fn table<'a>(
    doc: &'a mut toml_edit::DocumentMut,
    name: &str,
) -> &'a mut toml_edit::Table {
    sub_table(doc.as_table_mut(), name)
}

pub(crate) fn sub_table<'a>(t: &'a mut toml_edit::Table, name: &str) -> &'a mut toml_edit::Table {
    if !t.get(name).is_some_and(toml_edit::Item::is_table) {
        let mut new = toml_edit::Table::new();
        new.set_implicit(true);
        t.insert(name, toml_edit::Item::Table(new));
    }
    match t.get_mut(name).and_then(toml_edit::Item::as_table_mut) {
        Some(table) => table,
        None => unreachable_table(),
    }
}

#[allow(clippy::panic)]
fn unreachable_table() -> ! {
    // Inserted just above as a table.
    panic!("a table inserted is a table")
}

/// The text of `file` after `edit`, checked: it parses as a layer of its kind, or nothing is
/// written. Comments and order of the rest are kept.
pub(crate) fn edited_layer(
    file: &Path,
    layer: WriteLayer,
    edit: impl FnOnce(&mut toml_edit::DocumentMut),
) -> Result<String> {
    let before = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(HostError::usage(
                "W-SETUP-009",
                format!("cannot read {}: {e}", file.display()),
            ));
        }
    };
    let mut doc: toml_edit::DocumentMut = before.parse().map_err(|e| {
        HostError::usage(
            "W-SETUP-009",
            format!(
                "{} is not valid TOML, so it was not changed; `warrant config check` shows where: {e}",
                file.display()
            ),
        )
    })?;
    edit(&mut doc);
    let text = doc.to_string();
    let kind = match layer {
        WriteLayer::Project => LayerKind::Project,
        WriteLayer::User => LayerKind::User,
    };
    Layer::parse(kind, &file.display().to_string(), &text).map_err(|e| {
        HostError::usage(
            "W-SETUP-009",
            format!("the edited configuration would not load, so nothing was written: {e}"),
        )
    })?;
    Ok(text)
}

/// Writes `text` to `file` through a temporary file in the same directory: written, synced,
/// renamed over, and the directory synced, so a crash leaves the old file or the new one.
pub(crate) fn write_atomically(file: &Path, text: &str) -> Result<()> {
    use std::io::Write as _;
    let fail = |e: std::io::Error| {
        HostError::usage(
            "W-SETUP-010",
            format!(
                "cannot write {}: {e}; it was left as it was",
                file.display()
            ),
        )
    };
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        file.file_name()
            .map_or("config.toml".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(fail)
}

/// One configured provider, as `providers list` shows it (never a key).
#[derive(Clone, Debug, Serialize)]
pub struct ProviderRow {
    pub kind: ProviderKind,
    pub base_url: String,
    /// Where the key comes from (`cred:openai-api-key`, `OPENAI_API_KEY`), and whether it is
    /// there.
    pub key_source: Option<String>,
    pub key_present: bool,
    /// Whether `[providers] model` names this provider.
    pub default: bool,
    pub configured: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProviderList {
    /// `[providers] model`.
    pub model: Option<String>,
    pub providers: Vec<ProviderRow>,
}

struct Opened {
    settings: Settings,
    env: BTreeMap<String, String>,
}

fn open(at: &Where) -> Result<Opened> {
    let paths = install::paths(at, false)?;
    let layers = install::read_layers(&paths)?;
    let settings = install::settings(&layers)?;
    let env = crate::credentials::reference_env(&paths)?;
    Ok(Opened { settings, env })
}

/// Where `kind` is reached with which key, as a run would resolve it.
fn resolved(
    o: &Opened,
    kind: ProviderKind,
    model: &str,
) -> Result<(String, Option<String>, Option<String>)> {
    Ok(match kind {
        ProviderKind::Openai => {
            let s = openai_settings_from(&o.settings.openai, &o.env, model)
                .map_err(|e| HostError::bad_input(&e))?;
            (s.base_url, s.api_key, Some(s.api_key_env))
        }
        ProviderKind::Anthropic => {
            let s = anthropic_settings_from(&o.settings.anthropic, &o.env, model)
                .map_err(|e| HostError::bad_input(&e))?;
            (s.base_url, s.api_key, Some(s.api_key_env))
        }
        ProviderKind::Ollama => {
            let s = ollama_settings_from(&o.settings.ollama, &o.env, model);
            (s.base_url.trim_end_matches("/v1").to_owned(), None, None)
        }
    })
}

fn kind_of(spec: &str) -> Option<(ProviderKind, String)> {
    match ModelSpec::parse(spec).ok()? {
        ModelSpec::OpenAi { model } => Some((ProviderKind::Openai, model)),
        ModelSpec::Anthropic { model } => Some((ProviderKind::Anthropic, model)),
        ModelSpec::Ollama { model } => Some((ProviderKind::Ollama, model)),
        ModelSpec::Scripted { .. } => None,
    }
}

pub fn list(at: &Where) -> Result<ProviderList> {
    let o = open(at)?;
    let default = o.settings.default_model.as_deref().and_then(kind_of);
    let providers = ProviderKind::ALL
        .into_iter()
        .map(|kind| {
            let (base_url, key, source) =
                resolved(&o, kind, "").unwrap_or_else(|e| (e.message, None, None));
            let configured = match kind {
                ProviderKind::Openai => o.settings.openai != Default::default(),
                ProviderKind::Anthropic => o.settings.anthropic != Default::default(),
                ProviderKind::Ollama => o.settings.ollama != Default::default(),
            };
            ProviderRow {
                kind,
                base_url,
                key_present: key.is_some(),
                key_source: source,
                default: default.as_ref().is_some_and(|(k, _)| *k == kind),
                configured,
            }
        })
        .collect();
    Ok(ProviderList {
        model: o.settings.default_model,
        providers,
    })
}

/// A probe of one provider: does it answer with the key, and offer the model?
#[derive(Clone, Debug, Serialize)]
pub struct ProviderProbe {
    pub model_spec: String,
    pub base_url: String,
    pub ok: bool,
    /// What the probe saw, or why it failed (`[W-SETUP-…] …`).
    pub detail: String,
    pub models_offered: usize,
    /// Set when `--call` made one end-to-end call.
    pub answer: Option<String>,
}

/// Probes `spec` (default `[providers] model`): the model list, and with `call` one call.
pub fn check(at: &Where, spec: Option<&str>, call: bool) -> Result<ProviderProbe> {
    let o = open(at)?;
    let spec = crate::runs::model_spec(&o.settings, spec)?;
    probe(&o, &spec, call)
}

fn probe(o: &Opened, spec: &str, call: bool) -> Result<ProviderProbe> {
    let Some((kind, model)) = kind_of(spec) else {
        return Ok(ProviderProbe {
            model_spec: spec.to_owned(),
            base_url: String::new(),
            ok: ModelSpec::parse(spec).is_ok(),
            detail: "a scripted transcript: no endpoint is called".to_owned(),
            models_offered: 0,
            answer: None,
        });
    };
    let (base_url, key, _) = resolved(o, kind, &model)?;
    let outcome = discover(kind, &base_url, key.as_deref()).and_then(|offered| {
        check_model(&base_url, &model, &offered)?;
        let answer = if call {
            Some(call_once(kind, &base_url, key.as_deref(), &model)?)
        } else {
            None
        };
        Ok((offered.len(), answer))
    });
    Ok(match outcome {
        Ok((n, answer)) => ProviderProbe {
            model_spec: spec.to_owned(),
            detail: format!("{base_url} answers and offers {model} ({n} models)"),
            base_url,
            ok: true,
            models_offered: n,
            answer,
        },
        Err(e) => ProviderProbe {
            model_spec: spec.to_owned(),
            base_url,
            ok: false,
            detail: format!("[{}] {}", e.code, e.message),
            models_offered: 0,
            answer: None,
        },
    })
}

/// The probe `get-started` shows: `[providers] model` (or `$WARRANT_MODEL`), when one is set.
pub(crate) fn probe_default(at: &Where) -> Result<Option<ProviderProbe>> {
    let o = open(at)?;
    match crate::runs::model_spec(&o.settings, None) {
        Ok(spec) => probe(&o, &spec, false).map(Some),
        Err(_) => Ok(None),
    }
}

/// What `providers request` shows: the request a run's first model call would send.
#[derive(Clone, Debug, Serialize)]
pub struct RequestPreview {
    pub model_spec: String,
    pub method: String,
    pub url: String,
    /// Header names with their values redacted where they carry a key.
    pub headers: Vec<(String, String)>,
    /// The body exactly as it would be sent, with secrets the installation's scanner finds
    /// replaced by `[REDACTED:<rule>]`.
    pub body: Value,
    /// What was redacted (rule names), empty when nothing.
    pub redacted: Vec<String>,
    pub sent: bool,
}

/// The first request of a run with `prompt` as its task: the system prompt, the task and
/// every tool the run would offer, built by the provider's own request code. Nothing is sent.
pub fn request_preview(
    host: &crate::Host,
    spec: Option<&str>,
    prompt: &str,
) -> Result<RequestPreview> {
    let spec = crate::runs::model_spec(&host.settings, spec)?;
    let (kind, model) = kind_of(&spec).ok_or_else(|| {
        HostError::usage(
            "W-SETUP-011",
            format!("{spec} is a scripted transcript: it sends no request"),
        )
    })?;
    let tools = host.own_tools()?;
    let specs = warrant_kernel::ToolRegistry::specs(&tools);
    let conversation = Conversation {
        system: warrant_agent::SYSTEM_PROMPT.to_owned(),
        messages: vec![Message::User {
            content: prompt.to_owned(),
        }],
    };
    let o = Opened {
        settings: host.settings.clone(),
        env: crate::credentials::reference_env(&host.paths)?,
    };
    let (base_url, key, _) = resolved(&o, kind, &model)?;
    let (url, body, headers) = match kind {
        ProviderKind::Openai | ProviderKind::Ollama => {
            let stream = match kind {
                ProviderKind::Openai => host.settings.openai.stream.unwrap_or(true),
                ProviderKind::Anthropic | ProviderKind::Ollama => true,
            };
            let mut body = warrant_llm::openai::request_body(&model, &conversation, &specs);
            if stream {
                body["stream"] = Value::Bool(true);
                body["stream_options"] = serde_json::json!({"include_usage": true});
            }
            let mut headers = vec![("Content-Type".to_owned(), "application/json".to_owned())];
            if key.is_some() {
                headers.push(("Authorization".to_owned(), "Bearer [REDACTED]".to_owned()));
            }
            (
                format!("{}/chat/completions", base_url.trim_end_matches('/')),
                body,
                headers,
            )
        }
        ProviderKind::Anthropic => {
            let max = host.settings.anthropic.max_tokens.unwrap_or(4096);
            let mut body = warrant_llm::anthropic::request_body(&model, max, &conversation, &specs);
            if host.settings.anthropic.stream.unwrap_or(true) {
                body["stream"] = Value::Bool(true);
            }
            let headers = vec![
                ("Content-Type".to_owned(), "application/json".to_owned()),
                ("anthropic-version".to_owned(), "2023-06-01".to_owned()),
                ("x-api-key".to_owned(), "[REDACTED]".to_owned()),
            ];
            (format!("{base_url}/v1/messages"), body, headers)
        }
    };
    let (body, report) = host.redactor().redact_json(&body);
    let redacted: Vec<String> = report.counts.into_keys().collect();
    Ok(RequestPreview {
        model_spec: spec,
        method: "POST".to_owned(),
        url,
        headers,
        body,
        redacted,
        sent: false,
    })
}
