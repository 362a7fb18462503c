//! Model-facing names of remote tools: `mcp__<server>__<tool>` in `[a-z0-9_]`, at most
//! [`MAX_NAME`] characters (what every provider accepts). A remote name that is not already
//! plain is mapped deterministically (forbidden characters to `_`, cut to fit) and given a
//! suffix from the digest of the remote name, so two remote names never map to one.

use warrant_core::Digest;

/// The longest tool name offered to a model (OpenAI and Anthropic both stop at 64).
pub const MAX_NAME: usize = 64;

/// Whether `s` is a plain name: `[a-z0-9_]`, not empty.
pub fn is_plain(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The model-facing name of `tool` of `server` (`server` is plain: the configuration says so).
pub fn model_name(server: &str, tool: &str) -> String {
    let plain = format!("mcp__{server}__{tool}");
    if is_plain(tool) && plain.len() <= MAX_NAME {
        return plain;
    }
    let mapped: String = tool
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '_'
            }
        })
        .collect();
    let hex = Digest::of_bytes(tool.as_bytes()).to_string();
    let suffix = hex.rsplit(':').next().unwrap_or(&hex);
    let suffix = suffix.get(..8).unwrap_or(suffix);
    let prefix = format!("mcp__{server}__");
    // prefix + mapped + "_" + 8 hex characters, cut in the middle to fit.
    let room = MAX_NAME.saturating_sub(prefix.len() + 1 + suffix.len());
    let kept: String = mapped.chars().take(room).collect();
    format!("{prefix}{kept}_{suffix}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn plain_names_stay_and_others_map_deterministically_within_bounds() {
        assert_eq!(model_name("git", "git_status"), "mcp__git__git_status");
        let odd = model_name("git", "Get-Ticket/../x");
        assert!(is_plain(&odd), "{odd}");
        assert!(odd.starts_with("mcp__git__get_ticket____x_"), "{odd}");
        assert_eq!(odd, model_name("git", "Get-Ticket/../x"), "deterministic");
        // Two names that map to the same characters still differ.
        assert_ne!(model_name("s", "a-b"), model_name("s", "a.b"));
        let long = model_name("server", &"x".repeat(200));
        assert!(long.len() <= MAX_NAME && is_plain(&long), "{long}");
        assert!(model_name("s", "").len() <= MAX_NAME);
    }
}
