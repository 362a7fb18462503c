//! Queries are bounded before they reach SQLite: the model's text becomes at most
//! [`MAX_QUERY_TERMS`] distinct words (letters and digits, lowercased, each cut to
//! [`MAX_TERM_CHARS`] characters), each quoted, joined with OR. No FTS5 syntax the model writes
//! (column filters, NEAR, prefixes, parentheses) survives, and 10,000 repeated words are one.

use warrant_core::MAX_QUERY_TERMS;

use crate::MemoryError;

/// The longest word a query keeps, in characters.
pub const MAX_TERM_CHARS: usize = 64;

/// The words of `query` as searched: distinct, in order of first appearance, bounded. Fails
/// when nothing searchable is left.
pub fn bound_query(query: &str) -> Result<Vec<String>, MemoryError> {
    let mut terms: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let term: String = word
            .chars()
            .take(MAX_TERM_CHARS)
            .flat_map(char::to_lowercase)
            .collect();
        if !terms.contains(&term) {
            terms.push(term);
            if terms.len() == MAX_QUERY_TERMS {
                break;
            }
        }
    }
    if terms.is_empty() {
        return Err(MemoryError::Invalid(
            "the query has no words to search for (letters or digits)".to_owned(),
        ));
    }
    Ok(terms)
}

/// The FTS5 expression for bounded terms: each a quoted string (no operator survives).
pub(crate) fn fts_expression(terms: &[String]) -> String {
    terms
        .iter()
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" OR ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn repeated_words_are_one_and_syntax_is_gone() {
        let q = "deploy ".repeat(10_000) + "NEAR(a b) col:x \"quoted\" OR *";
        let terms = bound_query(&q).unwrap();
        assert_eq!(
            terms,
            ["deploy", "near", "a", "b", "col", "x", "quoted", "or"]
        );
        assert_eq!(fts_expression(&terms[..2]), "\"deploy\" OR \"near\"");
    }

    #[test]
    fn terms_are_capped_in_number_and_length() {
        let many: String = (0..100).map(|i| format!("w{i} ")).collect();
        assert_eq!(bound_query(&many).unwrap().len(), MAX_QUERY_TERMS);
        let long = "x".repeat(1000);
        assert_eq!(
            bound_query(&long).unwrap()[0].chars().count(),
            MAX_TERM_CHARS
        );
        assert!(bound_query("  -- ** ").is_err());
        assert_eq!(bound_query("Zürich über").unwrap(), ["zürich", "über"]);
    }
}
