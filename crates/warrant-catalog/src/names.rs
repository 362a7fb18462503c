//! Dotted paths as the model and a person write them (`lake.sales.eu.orders`: the catalog, the
//! namespace levels, the table), with `\.` and `\\` for a dot or a backslash inside a name.
//! A name is refused when it is empty, too long or holds a control character: `0x1F` is the
//! REST protocol's own level separator, so a name holding one would address another namespace.

use crate::CatalogError;

/// The most levels a path may have (catalog, namespace levels, table).
pub const MAX_DEPTH: usize = 16;
/// The longest name of one level, in bytes.
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Splits a dotted path into its names.
pub fn parse_path(path: &str) -> Result<Vec<String>, CatalogError> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('.' | '\\')) => current.push(e),
                Some(other) => {
                    return Err(CatalogError::BadName(format!(
                        "{path:?}: `\\{other}` is no escape; write `\\.` for a dot or `\\\\` for a backslash inside a name"
                    )));
                }
                None => {
                    return Err(CatalogError::BadName(format!(
                        "{path:?} ends in a lone backslash"
                    )));
                }
            },
            '.' => parts.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    parts.push(current);
    if parts.len() > MAX_DEPTH {
        return Err(CatalogError::BadName(format!(
            "{path:?} has {} levels; at most {MAX_DEPTH}",
            parts.len()
        )));
    }
    for (i, part) in parts.iter().enumerate() {
        check_segment(part)
            .map_err(|why| CatalogError::BadName(format!("{path:?}: level {} {why}", i + 1)))?;
    }
    Ok(parts)
}

/// Why a name cannot be one level of a path, if it cannot.
pub(crate) fn check_segment(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("is empty (two dots in a row, or a dot at an end)".into());
    }
    if name.len() > MAX_SEGMENT_BYTES {
        return Err(format!(
            "is {} bytes long; at most {MAX_SEGMENT_BYTES}",
            name.len()
        ));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(format!(
            "holds the control character U+{:04X}, which no catalog name may hold",
            u32::from(c)
        ));
    }
    Ok(())
}

/// The dotted path of names, escaped so that [`parse_path`] reads it back.
pub fn render_path<S: AsRef<str>>(parts: &[S]) -> String {
    parts
        .iter()
        .map(|p| p.as_ref().replace('\\', "\\\\").replace('.', "\\."))
        .collect::<Vec<_>>()
        .join(".")
}

/// Percent-encodes one URL path segment or query value (everything but RFC 3986 unreserved).
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A namespace as one URL segment: its levels joined with the unit separator, encoded.
pub(crate) fn namespace_segment(levels: &[String]) -> String {
    encode(&levels.join("\u{1f}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn paths_round_trip_with_dots_backslashes_and_unicode_inside_names() {
        let parts = vec![
            "lake".to_owned(),
            "ventes.été".to_owned(),
            "a\\b".to_owned(),
            "注文".to_owned(),
        ];
        let path = render_path(&parts);
        assert_eq!(path, "lake.ventes\\.été.a\\\\b.注文");
        assert_eq!(parse_path(&path).unwrap(), parts);
    }

    #[test]
    fn bad_paths_are_refused_saying_which_level_and_why() {
        let refused = |p: &str| parse_path(p).unwrap_err().to_string();
        assert_eq!(
            refused("lake..t"),
            "\"lake..t\": level 2 is empty (two dots in a row, or a dot at an end)"
        );
        assert_eq!(
            refused("lake.a\u{1f}b"),
            "\"lake.a\\u{1f}b\": level 2 holds the control character U+001F, which no catalog name may hold"
        );
        assert_eq!(
            refused("lake.a\\x"),
            "\"lake.a\\\\x\": `\\x` is no escape; write `\\.` for a dot or `\\\\` for a backslash inside a name"
        );
        assert!(refused(&"a.".repeat(20)).contains("levels; at most 16"));
        assert!(refused(&format!("lake.{}", "x".repeat(300))).contains("300 bytes long"));
    }

    #[test]
    fn a_namespace_segment_joins_levels_with_the_unit_separator_and_encodes_the_rest() {
        assert_eq!(
            namespace_segment(&["sales".to_owned(), "eu west/é".to_owned()]),
            "sales%1Feu%20west%2F%C3%A9"
        );
    }
}
