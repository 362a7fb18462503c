//! `warrant capabilities`: what this build and this machine support — the tools the build
//! offers a model, the model providers and stores it speaks, and the sandbox mechanisms this
//! machine really enforces (the doctor's probes, tried in a child). Needs no installation.

use serde::Serialize;
use warrant_llm::ModelSpec;

/// One tool the build offers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolCapability {
    pub name: String,
    /// Where it comes from (`builtin`).
    pub source: String,
}

/// One thing the build speaks, and the form it is named in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Named {
    pub name: &'static str,
    pub form: &'static str,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Capabilities {
    pub version: &'static str,
    pub tools: Vec<ToolCapability>,
    pub providers: Vec<Named>,
    pub stores: Vec<Named>,
    /// The data catalogs it reads (read-only).
    pub catalogs: Vec<Named>,
    /// Each mechanism as the doctor probes it: whether this machine enforces it, and what was
    /// seen. Empty with `probe_error` when the probes could not start.
    pub sandbox: Vec<warrant_exec::sandbox::ProbeRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_error: Option<String>,
}

/// The providers a `--model` spec can name, each checked against the spec parser.
const PROVIDERS: [(&str, &str); 4] = [
    ("scripted", "scripted:PATH"),
    ("openai", "openai:MODEL"),
    ("anthropic", "anthropic:MODEL"),
    ("ollama", "ollama:MODEL"),
];

pub fn capabilities() -> Capabilities {
    // The catalog tools are offered when a `[catalog.NAME]` is configured.
    let catalog = warrant_catalog::Catalogs::new(Vec::new());
    let sources: [&dyn warrant_tools::ToolSource; 2] = [&warrant_tools::Builtin, &catalog];
    let mut tools: Vec<ToolCapability> = sources
        .iter()
        .flat_map(|source| {
            source.tools().into_iter().map(|t| ToolCapability {
                name: t.spec().name.clone(),
                source: source.name().to_owned(),
            })
        })
        .collect();
    // The artifact tools come with every installation (they sign with its key).
    tools.extend(
        warrant_artifacts::TOOL_NAMES
            .iter()
            .map(|name| ToolCapability {
                name: (*name).to_owned(),
                source: "artifacts".to_owned(),
            }),
    );
    let providers = PROVIDERS
        .iter()
        .filter(|(name, _)| ModelSpec::parse(&format!("{name}:x")).is_ok())
        .map(|&(name, form)| Named { name, form })
        .collect();
    let stores = vec![
        Named {
            name: "sqlite",
            form: "a file path (default .warrant/store.db)",
        },
        Named {
            name: "postgres",
            form: "postgres://USER@HOST/DB",
        },
    ];
    let (sandbox, probe_error) = match warrant_exec::Launcher::current_exe() {
        Ok(launcher) => {
            let scratch =
                std::env::temp_dir().join(format!("warrant-capabilities-{}", std::process::id()));
            let rows = warrant_exec::sandbox::probe(&launcher, &scratch);
            let _ = std::fs::remove_dir_all(&scratch);
            (rows, None)
        }
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    Capabilities {
        version: env!("CARGO_PKG_VERSION"),
        tools,
        providers,
        stores,
        catalogs: vec![Named {
            name: "iceberg-rest",
            form: "[catalog.NAME] url = \"https://HOST/api/catalog\" (Apache Polaris: realm, client_id, client_secret)",
        }],
        sandbox,
        probe_error,
    }
}

#[cfg(test)]
mod tests {
    use warrant_tools::ToolSource as _;

    /// The prompt guard screens every tool description of every request; a built-in one it
    /// refused would stop every run, so each passes the screen (a new one that does not
    /// fails here, not in a person's run).
    #[test]
    fn every_built_in_description_passes_the_prompt_guards_screen() {
        for tool in warrant_tools::Builtin.tools() {
            let spec = tool.spec();
            assert_eq!(
                warrant_llm::untrusted::screen_instructions(&spec.description),
                None,
                "{}",
                spec.name
            );
        }
    }
}
