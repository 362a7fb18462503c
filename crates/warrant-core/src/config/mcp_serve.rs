//! `[mcp.serve]`: what `warrant mcp serve` exports and to whom. Warrant's own tools are served
//! read-only unless the operator lifts the ceiling for a tool by name; HTTP callers are mapped
//! from bearer tokens (secret references, never the token itself) to principals.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::principal::PrincipalKind;

/// The tools exported when `[mcp.serve] tools` is not set.
pub const DEFAULT_SERVE_TOOLS: &[&str] = &["read_file", "list_dir", "search_files"];

/// Built-in tools whose every action only reads (`fs.read`, `fs.list`, `fs.search`): the only
/// ones exported without lifting the ceiling. Any other tool (one that can write, delete, run
/// a command, or one Warrant does not know to be read-only) needs `lift_ceiling`.
pub const READ_ONLY_TOOLS: &[&str] = &["read_file", "list_dir", "search_files"];

/// Origins a loopback server accepts when `allowed_origins` is not set: pages of this machine
/// (which still need a token; a rebinding page's origin is its own name, never these).
pub const DEFAULT_ALLOWED_ORIGINS: &[&str] = &[
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// Largest HTTP request body accepted by default (1 MiB).
pub const DEFAULT_MAX_BODY_BYTES: u64 = 1024 * 1024;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServeConfig {
    /// The tools exported (default [`DEFAULT_SERVE_TOOLS`]).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Tools exported although their actions can write: the ceiling is lifted only by name.
    #[serde(default)]
    pub lift_ceiling: Option<Vec<String>>,
    /// `[mcp.serve.tokens.<name>]`: who an HTTP bearer token stands for.
    #[serde(default)]
    pub tokens: BTreeMap<String, ServeToken>,
    /// Largest HTTP request body in bytes (default [`DEFAULT_MAX_BODY_BYTES`]); larger is 413.
    #[serde(default)]
    pub max_body_bytes: Option<u64>,
    /// Browser origins allowed to call the HTTP server (`https://app.example`, or with any port
    /// `http://localhost:*`); any other `Origin` is 403. Default: the loopback origins
    /// ([`DEFAULT_ALLOWED_ORIGINS`]); `[]` refuses every request that carries an `Origin`.
    #[serde(default)]
    pub allowed_origins: Option<Vec<String>>,
    /// `Host` values accepted besides the loopback names (`localhost`, `127.0.0.1`, `::1`); a
    /// foreign `Host` is 403 (DNS rebinding).
    #[serde(default)]
    pub allowed_hosts: Option<Vec<String>>,
}

/// One bearer token and the principal its holder acts as.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeToken {
    /// A secret reference: `env:NAME` or `file:PATH`. Never the token itself.
    pub token: String,
    pub actor: String,
    /// Default: the installation's tenant.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Default `user`.
    #[serde(default)]
    pub kind: Option<PrincipalKind>,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub teams: Vec<String>,
}

impl McpServeConfig {
    /// The exported tool names as configured (or the default set).
    pub fn exported(&self) -> Vec<String> {
        self.tools.clone().unwrap_or_else(|| {
            DEFAULT_SERVE_TOOLS
                .iter()
                .map(|s| (*s).to_owned())
                .collect()
        })
    }

    /// Whether `tool` may be exported: read-only by nature, or its ceiling lifted by name.
    pub fn within_ceiling(&self, tool: &str) -> bool {
        READ_ONLY_TOOLS.contains(&tool)
            || self
                .lift_ceiling
                .as_ref()
                .is_some_and(|l| l.iter().any(|t| t == tool))
    }

    /// The allowed origins as configured (or the loopback ones).
    pub fn origins(&self) -> Vec<String> {
        self.allowed_origins.clone().unwrap_or_else(|| {
            DEFAULT_ALLOWED_ORIGINS
                .iter()
                .map(|s| (*s).to_owned())
                .collect()
        })
    }

    pub fn max_body_bytes(&self) -> u64 {
        self.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn only_read_tools_pass_the_ceiling_unless_one_is_lifted_by_name() {
        let held: McpServeConfig =
            toml::from_str(r#"tools = ["read_file", "write_file"]"#).unwrap();
        let lifted: McpServeConfig = toml::from_str(
            "tools = [\"read_file\", \"write_file\"]\nlift_ceiling = [\"write_file\"]",
        )
        .unwrap();
        let tools = [
            "read_file",
            "list_dir",
            "search_files",
            "write_file",
            "delete_path",
            "run_command",
        ];
        let passes = |c: &McpServeConfig| -> Vec<&str> {
            tools
                .iter()
                .copied()
                .filter(|t| c.within_ceiling(t))
                .collect()
        };
        assert_eq!(passes(&held), vec!["read_file", "list_dir", "search_files"]);
        assert_eq!(
            passes(&lifted),
            vec!["read_file", "list_dir", "search_files", "write_file"]
        );
        assert_eq!(
            McpServeConfig::default().exported(),
            vec!["read_file", "list_dir", "search_files"]
        );
        assert_eq!(
            McpServeConfig::default().origins().len(),
            DEFAULT_ALLOWED_ORIGINS.len()
        );
        let closed: McpServeConfig = toml::from_str("allowed_origins = []").unwrap();
        assert_eq!(closed.origins(), Vec::<String>::new());
    }
}
