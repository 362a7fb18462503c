//! `warrant capabilities`: what this build and this machine support — the tools the build
//! offers a model, the model providers and stores it speaks, and the sandbox mechanisms this
//! machine really enforces (the doctor's probes, tried in a child). Needs no installation.

use serde::Serialize;
use warrant_llm::ModelSpec;
use warrant_tools::ToolSource as _;

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
    let mut tools: Vec<ToolCapability> = warrant_tools::Builtin
        .tools()
        .iter()
        .map(|t| ToolCapability {
            name: t.spec().name.clone(),
            source: warrant_tools::Builtin.name().to_owned(),
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
        sandbox,
        probe_error,
    }
}
