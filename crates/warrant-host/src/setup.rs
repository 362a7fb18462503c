//! `warrant configure identity|approvals|sink`: the other first-hour settings, each written only
//! once the whole configuration would still load with it (and, for a sink, once the receiver
//! has acknowledged a real delivery). The same layer editing as `configure provider`
//! (`providers::edited_layer`, `providers::write_atomically`).

use serde::Serialize;
use warrant_core::RiskClass;
use warrant_core::config::{Layer, LayerKind};

use crate::install::{self, Paths};
use crate::providers::{WriteLayer, edited_layer, layer_file, sub_table, table, write_atomically};
use crate::{HostError, Result, Where};

/// What a `configure` of one area wrote.
#[derive(Clone, Debug, Serialize)]
pub struct Configured {
    pub area: String,
    pub path: String,
    /// The settings written, `key = value` (never a secret value).
    pub wrote: Vec<String>,
    /// What was proven before writing (a delivery, a resolution), in words.
    pub checked: String,
}

fn layer_kind(layer: WriteLayer) -> LayerKind {
    match layer {
        WriteLayer::Project => LayerKind::Project,
        WriteLayer::User => LayerKind::User,
    }
}

/// The layers as they would be with `text` as the content of `layer`'s file.
fn layers_with(
    paths: &Paths,
    layer: WriteLayer,
    file: &std::path::Path,
    text: &str,
) -> Result<Vec<Layer>> {
    let mut layers: Vec<Layer> = install::read_layers(paths)?
        .into_iter()
        .filter(|l| l.kind != layer_kind(layer))
        .collect();
    layers.push(
        Layer::parse(layer_kind(layer), &file.display().to_string(), text)
            .map_err(|e| HostError::bad_input(&e))?,
    );
    Ok(layers)
}

fn name_ok(what: &str, v: &str) -> Result<()> {
    let ok = !v.is_empty()
        && v.len() <= 128
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@' | '+'));
    if ok {
        Ok(())
    } else {
        Err(HostError::usage(
            "W-SETUP-013",
            format!("{what} {v:?} is not a name: 1-128 letters, digits, `.`, `_`, `-`, `@`, `+`"),
        ))
    }
}

/// `[identity] tenant` and `teams`. A field the managed layer locks is refused, naming it.
pub fn identity(
    at: &Where,
    tenant: Option<&str>,
    teams: &[String],
    layer: WriteLayer,
) -> Result<Configured> {
    if tenant.is_none() && teams.is_empty() {
        return Err(HostError::usage(
            "W-SETUP-013",
            "name a --tenant or at least one --team",
        ));
    }
    if let Some(t) = tenant {
        name_ok("tenant", t)?;
    }
    for t in teams {
        name_ok("team", t)?;
    }
    let paths = install::paths(at, false)?;
    let file = layer_file(&paths, layer)?;
    let mut wrote = Vec::new();
    let text = edited_layer(&file, layer, |doc| {
        let id = table(doc, "identity");
        if let Some(t) = tenant {
            id["tenant"] = toml_edit::value(t);
            wrote.push(format!("identity.tenant = {t:?}"));
        }
        if !teams.is_empty() {
            let mut arr = toml_edit::Array::new();
            for t in teams {
                arr.push(t.as_str());
            }
            id["teams"] = toml_edit::value(arr);
            wrote.push(format!("identity.teams = {teams:?}"));
        }
    })?;
    // Checked as it will be read: a locked field (W-CONFIG-004) or a bad value refuses here.
    let resolved = install::identity(&layers_with(&paths, layer, &file, &text)?)?;
    write_atomically(&file, &text)?;
    let p = resolved.principal;
    Ok(Configured {
        area: "identity".into(),
        path: file.display().to_string(),
        wrote,
        checked: format!(
            "resolves to {} in tenant {} (teams: {})",
            p.actor,
            p.tenant,
            if p.teams.is_empty() {
                "none".to_owned()
            } else {
                p.teams.join(", ")
            }
        ),
    })
}

/// `[approvals] team` and, per class, `[risk.<class>] four_eyes` and `expiry`.
pub fn approvals(
    at: &Where,
    team: Option<&str>,
    four_eyes: &[warrant_core::RiskClass],
    expiry: Option<&str>,
    layer: WriteLayer,
) -> Result<Configured> {
    if team.is_none() && four_eyes.is_empty() && expiry.is_none() {
        return Err(HostError::usage(
            "W-SETUP-014",
            "name a --team, --four-eyes CLASS or --expiry DURATION",
        ));
    }
    if let Some(t) = team {
        name_ok("team", t)?;
    }
    if let Some(e) = expiry
        && warrant_core::risk::parse_duration_secs(e).is_none_or(|s| s == 0)
    {
        return Err(HostError::usage(
            "W-SETUP-014",
            format!("--expiry {e:?} is not a duration (30s, 15m, 1h, 2d)"),
        ));
    }
    let paths = install::paths(at, false)?;
    let file = layer_file(&paths, layer)?;
    let mut wrote = Vec::new();
    // An expiry applies to the classes a person is asked about by default.
    let expiring: Vec<warrant_core::RiskClass> = if expiry.is_some() {
        warrant_core::RiskClass::ALL
            .into_iter()
            .filter(|c| {
                matches!(
                    c,
                    warrant_core::RiskClass::Destructive
                        | warrant_core::RiskClass::Secret
                        | warrant_core::RiskClass::Irreversible
                ) || four_eyes.contains(c)
            })
            .collect()
    } else {
        Vec::new()
    };
    let text = edited_layer(&file, layer, |doc| {
        if let Some(t) = team {
            table(doc, "approvals")["team"] = toml_edit::value(t);
            wrote.push(format!("approvals.team = {t:?}"));
        }
        for c in four_eyes {
            let risk = table(doc, "risk");
            sub_table(risk, c.as_str())["four_eyes"] = toml_edit::value(true);
            wrote.push(format!("risk.{}.four_eyes = true", c.as_str()));
        }
        if let Some(e) = expiry {
            for c in &expiring {
                let risk = table(doc, "risk");
                sub_table(risk, c.as_str())["expiry"] = toml_edit::value(e);
                wrote.push(format!("risk.{}.expiry = {e:?}", c.as_str()));
            }
        }
    })?;
    let rules = install::approval_rules(&paths, &layers_with(&paths, layer, &file, &text)?)?;
    write_atomically(&file, &text)?;
    Ok(Configured {
        area: "approvals".into(),
        path: file.display().to_string(),
        wrote,
        checked: format!(
            "approval rules load; team asked first: {}",
            rules.team.as_deref().unwrap_or("none")
        ),
    })
}

/// An HTTP audit sink, `[audit.sinks.<name>]`: header values must be references (`env:` or
/// `cred:`), and the receiver must acknowledge a real delivery (this installation's records
/// so far, or an empty CloudEvents batch when there are none) before anything is written.
/// What was delivered is recorded as acknowledged, so it is not sent again.
pub fn sink(
    at: &Where,
    name: &str,
    url: &str,
    headers: &[(String, String)],
    layer: WriteLayer,
) -> Result<Configured> {
    name_ok("sink name", name)?;
    if name == warrant_audit::JSONL_SINK {
        return Err(HostError::usage(
            "W-SETUP-015",
            format!("{name} is the built-in JSONL sink's name; choose another"),
        ));
    }
    let url = url.trim();
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(HostError::usage(
            "W-SETUP-015",
            format!("{url:?} is not an http:// or https:// URL"),
        ));
    }
    for (h, v) in headers {
        if !(v.starts_with("env:") || v.starts_with(warrant_llm::secret::CRED_PREFIX)) {
            return Err(HostError::usage(
                "W-SETUP-015",
                format!(
                    "header {h} must be a reference (`cred:NAME` after `warrant credentials set NAME`, or `env:NAME`), so no token is written in clear"
                ),
            ));
        }
    }
    let paths = install::paths(at, false)?;
    let env = crate::credentials::reference_env(&paths)?;
    let mut resolved = Vec::new();
    for (h, v) in headers {
        let setting = format!("audit.sinks.{name}.headers.{h}");
        let key = warrant_llm::secret::resolve_key(&setting, Some(v), "", &env)
            .map_err(|e| HostError::bad_input(&e))?;
        let value = key.value.ok_or_else(|| {
            HostError::usage(
                "W-SETUP-015",
                format!(
                    "header {h} refers to {}, which is unset or empty",
                    key.source
                ),
            )
        })?;
        resolved.push((h.clone(), value));
    }
    let file = layer_file(&paths, layer)?;
    let text = edited_layer(&file, layer, |doc| {
        let audit = table(doc, "audit");
        let sinks = sub_table(audit, "sinks");
        let s = sub_table(sinks, name);
        s["type"] = toml_edit::value("http");
        s["url"] = toml_edit::value(url);
        if !headers.is_empty() {
            let mut t = toml_edit::InlineTable::new();
            for (h, v) in headers {
                t.insert(h, v.as_str().into());
            }
            s["headers"] = toml_edit::value(t);
        }
    })?;
    let layers = layers_with(&paths, layer, &file, &text)?;
    let settings = install::settings(&layers)?;
    let inst = install::installation(&paths, &settings, std::sync::Arc::new(crate::Quiet))?;
    let mut config = warrant_audit::HttpSinkConfig::new(url);
    config.headers = resolved.clone();
    config.max_attempts = 1;
    let http = warrant_audit::HttpSink::new(name, config);
    let failed = |e: &dyn std::fmt::Display| {
        HostError::usage(
            "W-SETUP-016",
            format!(
                "the receiver at {url} did not acknowledge a delivery, so the sink was not saved: {e}"
            ),
        )
    };
    let report = http
        .deliver(inst.store.as_ref(), 0)
        .map_err(|e| failed(&e))?;
    let checked = if report.delivered > 0 {
        let _ = inst
            .store
            .record_delivery(name, report.acknowledged, report.delivered);
        format!(
            "the receiver acknowledged {} audit record(s) in {} batch(es)",
            report.delivered, report.batches
        )
    } else {
        empty_batch(url, &resolved).map_err(|e| failed(&e))?;
        "the receiver acknowledged an empty CloudEvents batch (no records yet)".to_owned()
    };
    write_atomically(&file, &text)?;
    let mut wrote = vec![
        format!("audit.sinks.{name}.type = \"http\""),
        format!("audit.sinks.{name}.url = {url:?}"),
    ];
    for (h, v) in headers {
        wrote.push(format!("audit.sinks.{name}.headers.{h} = {v:?}"));
    }
    Ok(Configured {
        area: "audit sink".into(),
        path: file.display().to_string(),
        wrote,
        checked,
    })
}

fn empty_batch(url: &str, headers: &[(String, String)]) -> std::result::Result<(), String> {
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(std::time::Duration::from_secs(10)))
            .http_status_as_error(false)
            .build(),
    );
    let mut req = agent
        .post(url)
        .content_type(warrant_audit::CLOUDEVENTS_BATCH);
    for (h, v) in headers {
        req = req.header(h.as_str(), v.as_str());
    }
    let resp = req.send("[]").map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("it answered HTTP {status}"))
    }
}

/// A list a person typed at a question: words separated by commas or spaces.
pub fn words(typed: &str) -> Vec<String> {
    typed
        .split([',', ' '])
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Headers as `--header` gives them, `NAME=REFERENCE`, split and trimmed; one without `=`
/// refuses them all (W-SETUP-015).
pub fn header_pairs(headers: &[String]) -> Result<Vec<(String, String)>> {
    headers
        .iter()
        .map(|h| match h.split_once('=') {
            Some((k, v)) => Ok((k.trim().to_owned(), v.trim().to_owned())),
            None => Err(HostError::usage(
                "W-SETUP-015",
                format!("--header {h:?} is not NAME=REFERENCE"),
            )),
        })
        .collect()
}

/// Risk classes named in words (any case); a word that names none refuses the whole answer
/// (W-SETUP-014), so nothing is written on a typo.
pub fn risk_classes(named: &[String]) -> Result<Vec<RiskClass>> {
    named
        .iter()
        .map(|w| {
            RISK_CLASSES
                .into_iter()
                .find(|c| c.as_str().eq_ignore_ascii_case(w))
                .ok_or_else(|| {
                    HostError::usage(
                        "W-SETUP-014",
                        format!("{w:?} is not a risk class: nothing was written"),
                    )
                })
        })
        .collect()
}

const RISK_CLASSES: [RiskClass; 6] = [
    RiskClass::Read,
    RiskClass::Change,
    RiskClass::External,
    RiskClass::Destructive,
    RiskClass::Secret,
    RiskClass::Irreversible,
];
