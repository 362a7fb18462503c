//! The first hour in words: `get-started`, what `configure` checked and wrote, credentials,
//! `config check`, providers, `capabilities`, and the questions of the set-up wizard.

use warrant_host::capabilities::Capabilities;
use warrant_host::config_check::{ConfigReport, Severity};
use warrant_host::credentials::{CredentialChange, CredentialCheck, CredentialList};
use warrant_host::get_started::Readiness;
use warrant_host::narrate::inline;
use warrant_host::providers::{ProviderConfigured, ProviderList, ProviderProbe};
use warrant_host::setup::Configured;

use super::runs::ok;

/// `get-started`: each area's state and evidence, its next step under it, and the first
/// command once everything is ready.
pub fn readiness(r: &Readiness) -> Vec<String> {
    let mut out = vec![format!("Warrant in {}", r.workspace)];
    for row in &r.rows {
        out.push(format!(
            "{:<8} {:<12} {}",
            row.state.as_str(),
            row.area,
            inline(&row.evidence)
        ));
        if let Some(next) = &row.next {
            out.push(format!("{:<8} {:<12} next: {next}", "", ""));
        }
    }
    if r.ready {
        out.push("All ready: warrant run \"<your task>\"".to_owned());
    }
    out
}

/// An area `configure` set up: what was checked, and each setting written.
pub fn configured(done: &Configured) -> Vec<String> {
    let mut out = vec![format!("checked: {}", inline(&done.checked))];
    out.extend(
        done.wrote
            .iter()
            .map(|w| format!("wrote {w} to {}", done.path)),
    );
    out
}

/// The provider `configure` checked and wrote, and what to do next.
pub fn provider_configured(done: &ProviderConfigured) -> Vec<String> {
    let mut out = Vec::new();
    if done.initialized {
        out.push("initialized .warrant/ in this workspace".to_owned());
    }
    out.push(format!(
        "{} at {} offers {} model(s); {} answered: {}",
        done.kind.as_str(),
        done.base_url,
        done.models_offered.len(),
        done.model,
        inline(&done.check_answer)
    ));
    if let Some(c) = &done.credential {
        out.push(format!(
            "key stored as credential {c} (never in the configuration; `warrant credentials list` says where)"
        ));
    }
    out.push(format!(
        "wrote [providers] model = \"{}\" to {}",
        done.model_spec,
        done.path.display()
    ));
    out.push(format!("next: {}", done.next));
    out
}

/// A credential stored.
pub fn credential_set(done: &CredentialChange) -> String {
    format!(
        "{} credential {} in the {} ({}); refer to it as {}",
        done.outcome, done.name, done.stored_in, done.path, done.reference
    )
}

/// A credential deleted.
pub fn credential_deleted(done: &CredentialChange) -> String {
    format!("deleted credential {} from {}", done.name, done.path)
}

/// `credentials list`: one line a credential, never its value.
pub fn credentials(list: &CredentialList) -> Vec<String> {
    if list.credentials.is_empty() {
        return vec!["no credentials stored; `warrant credentials set NAME` stores one".to_owned()];
    }
    list.credentials
        .iter()
        .map(|c| {
            format!(
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
            )
        })
        .collect()
}

/// `credentials check`: each stored credential opened and each reference resolved.
pub fn credentials_checked(c: &CredentialCheck) -> Vec<String> {
    c.stored
        .iter()
        .chain(&c.references)
        .map(|r| {
            let setting = if r.setting.is_empty() {
                "stored"
            } else {
                &r.setting
            };
            format!("{:<4} {setting} {}: {}", ok(r.ok), r.reference, r.detail)
        })
        .collect()
}

/// `config check`: the layers read, then each finding with where it is and its fix.
pub fn config_report(r: &ConfigReport) -> Vec<String> {
    let mut out: Vec<String> = r
        .layers
        .iter()
        .map(|l| {
            let parsed = if l.parsed { "parsed" } else { "NOT PARSED" };
            format!("layer {:<8} {} {parsed}", l.layer, l.path)
        })
        .collect();
    for f in &r.findings {
        let at = match (&f.path, f.line) {
            (Some(p), Some(l)) => format!("{p}:{l}"),
            (Some(p), None) => p.clone(),
            _ => f.layer.clone(),
        };
        let severity = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        out.push(format!(
            "{severity}[{}] {at}: {}",
            f.code,
            inline(&f.message)
        ));
        out.push(format!("  fix: {}", f.fix));
    }
    if r.findings.is_empty() {
        out.push("no findings".to_owned());
    }
    out
}

/// `providers list`: the default model, then each provider and where its key comes from.
pub fn providers(l: &ProviderList) -> Vec<String> {
    let mut out = vec![format!(
        "default model: {}",
        l.model.as_deref().unwrap_or("(none: `warrant configure`)")
    )];
    for p in &l.providers {
        let state = if p.default {
            "default"
        } else if p.configured {
            "configured"
        } else {
            "-"
        };
        let key = match (&p.key_source, p.key_present) {
            (None, _) => "not needed".to_owned(),
            (Some(s), true) => format!("from {s}"),
            (Some(s), false) => format!("missing ({s} unset)"),
        };
        out.push(format!(
            "{:<10} {state:<11} {:<40} key {key}",
            p.kind.as_str(),
            p.base_url
        ));
    }
    out
}

/// `providers check`: whether the provider answered, and what.
pub fn provider_probe(p: &ProviderProbe) -> Vec<String> {
    let mut out = vec![format!(
        "{:<4} {}: {}",
        ok(p.ok),
        p.model_spec,
        inline(&p.detail)
    )];
    if let Some(a) = &p.answer {
        out.push(format!("     answered: {}", inline(a)));
    }
    out
}

/// `capabilities`: the tools, providers, stores and catalogs of this build, and the sandbox
/// mechanisms this machine has.
pub fn capabilities(caps: &Capabilities) -> Vec<String> {
    let names: Vec<&str> = caps.tools.iter().map(|t| t.name.as_str()).collect();
    let providers: Vec<&str> = caps.providers.iter().map(|p| p.form).collect();
    let stores: Vec<&str> = caps.stores.iter().map(|s| s.name).collect();
    let catalogs: Vec<&str> = caps.catalogs.iter().map(|s| s.name).collect();
    let mut out = vec![
        format!("warrant {}", caps.version),
        format!("tools      {}", names.join(", ")),
        format!("providers  {}", providers.join(", ")),
        format!("stores     {}", stores.join(", ")),
        format!("catalogs   {} (read-only)", catalogs.join(", ")),
    ];
    if let Some(e) = &caps.probe_error {
        out.push(format!("sandbox    could not probe: {e}"));
    }
    for row in &caps.sandbox {
        out.push(format!(
            "sandbox    {:<22} {}  {}",
            row.mechanism,
            if row.available { "yes" } else { "no " },
            row.detail
        ));
    }
    out
}

/// A question of the wizard as the terminal asks it: with its default in brackets.
pub fn question(prompt: &str, default: &str) -> String {
    if default.is_empty() {
        format!("{prompt}: ")
    } else {
        format!("{prompt} [{default}]: ")
    }
}

/// The models an endpoint offers, numbered from 1 for the wizard's choice.
pub fn offered(base_url: &str, models: &[String]) -> Vec<String> {
    let mut out = vec![format!("{base_url} offers:")];
    out.extend(
        models
            .iter()
            .enumerate()
            .map(|(i, m)| format!("  {:>3}. {m}", i + 1)),
    );
    out
}

/// The wizard's first words.
pub const WIZARD_START: &str =
    "Set up the model provider. Nothing is written until the endpoint has answered.";
/// The wizard's last words: what else there is to set up.
pub const WIZARD_MORE: &str = "More to set up when you need it: `warrant configure identity` (tenant, teams), `warrant configure approvals` (team, four eyes, expiry), `warrant configure sink` (an audit receiver). `warrant get-started` shows what is ready.";

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn the_wizard_numbers_the_models_offered_and_shows_defaults_in_brackets() {
        let models = vec!["gpt-4.1".to_owned(), "o3".to_owned()];
        assert_eq!(
            offered("http://127.0.0.1:9/v1", &models),
            vec![
                "http://127.0.0.1:9/v1 offers:".to_owned(),
                "    1. gpt-4.1".to_owned(),
                "    2. o3".to_owned(),
            ]
        );
        assert_eq!(
            question("Base URL", "https://x/v1"),
            "Base URL [https://x/v1]: "
        );
        assert_eq!(question("Tenant", ""), "Tenant: ");
    }
}
