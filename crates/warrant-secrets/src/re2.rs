//! gitleaks patterns are Go RE2; Rust's `regex` is close but not equal. This pass rewrites what
//! differs so a pattern means in Rust what it means in gitleaks, and refuses what cannot be
//! rewritten (the caller turns that into a load error naming the rule):
//!
//! - `\w \d \s \b` (and negations) are ASCII in RE2, Unicode in Rust: spelled out as ASCII
//!   classes, `\b` as `(?-u:\b)` (which also keeps the lazy DFA usable on non-ASCII input);
//! - a `{` that does not start a repetition is a literal in RE2, an error in Rust: escaped;
//! - inside a class, `[` (unless it opens `[:name:]`), `&` and `~` are literals in RE2 but
//!   start nesting or set operations in Rust: escaped;
//! - `\Q…\E` quoting (RE2 has it, Rust does not): the quoted text is escaped;
//! - `\C` (any byte) has no Rust equivalent: refused.

/// The Rust spelling of an RE2 pattern, or why there is none.
pub fn translate(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut i = 0;
    // Inside a class: `Some(first)` where `first` is true right after `[` or `[^` (a `]` there
    // is a literal).
    let mut class: Option<bool> = None;
    while i < chars.len() {
        let c = chars[i];
        match class {
            None => match c {
                '\\' => {
                    let Some(&n) = chars.get(i + 1) else {
                        return Err("the pattern ends with a lone `\\`".into());
                    };
                    i += 2;
                    match n {
                        'w' => out.push_str("[0-9A-Za-z_]"),
                        'W' => out.push_str("[^0-9A-Za-z_]"),
                        'd' => out.push_str("[0-9]"),
                        'D' => out.push_str("[^0-9]"),
                        's' => out.push_str("[\\t\\n\\f\\r ]"),
                        'S' => out.push_str("[^\\t\\n\\f\\r ]"),
                        'b' => out.push_str("(?-u:\\b)"),
                        // Rust refuses `(?-u:\B)` on text; the Unicode `\B` differs from RE2's only
                        // next to non-ASCII letters and digits.
                        'B' => out.push_str("\\B"),
                        'C' => return Err("`\\C` (any byte) has no equivalent in Rust".into()),
                        'Q' => i = quoted(&chars, i, &mut out),
                        'E' => {}
                        'p' | 'P' | 'x' => {
                            out.push('\\');
                            out.push(n);
                            i = copy_braced(&chars, i, &mut out);
                        }
                        '0'..='9' => {
                            return Err(format!(
                                "`\\{n}` (an octal escape or back-reference) is not supported"
                            ));
                        }
                        other => {
                            out.push('\\');
                            out.push(other);
                        }
                    }
                    continue;
                }
                '[' => {
                    out.push('[');
                    i += 1;
                    if chars.get(i) == Some(&'^') {
                        out.push('^');
                        i += 1;
                    }
                    class = Some(true);
                    continue;
                }
                '{' => {
                    if repetition_at(&chars, i) {
                        out.push('{');
                    } else {
                        out.push_str("\\{");
                    }
                }
                '}' => {
                    // A `}` closing a repetition was copied with it; any other is a literal.
                    out.push_str("\\}");
                }
                other => out.push(other),
            },
            Some(first) => {
                match c {
                    ']' if !first => {
                        out.push(']');
                        class = None;
                        i += 1;
                        continue;
                    }
                    ']' => out.push_str("\\]"),
                    '[' => {
                        if chars.get(i + 1) == Some(&':') {
                            // A POSIX class `[:name:]`: same meaning (ASCII) in both.
                            let rest: String = chars[i..].iter().collect();
                            match rest.find(":]") {
                                Some(end) if end > 1 => {
                                    out.push_str(&rest[..end + 2]);
                                    i += rest[..end + 2].chars().count();
                                    class = Some(false);
                                    continue;
                                }
                                _ => out.push_str("\\["),
                            }
                        } else {
                            out.push_str("\\[");
                        }
                    }
                    '&' => out.push_str("\\&"),
                    '~' => out.push_str("\\~"),
                    '-' if chars.get(i + 1) == Some(&'-') => {
                        return Err("`--` inside a character class is ambiguous in Rust".into());
                    }
                    '\\' => {
                        let Some(&n) = chars.get(i + 1) else {
                            return Err("the pattern ends with a lone `\\`".into());
                        };
                        i += 2;
                        match n {
                            'w' => out.push_str("0-9A-Za-z_"),
                            'd' => out.push_str("0-9"),
                            's' => out.push_str("\\t\\n\\f\\r "),
                            'W' => out.push_str("[^0-9A-Za-z_]"),
                            'D' => out.push_str("[^0-9]"),
                            'S' => out.push_str("[^\\t\\n\\f\\r ]"),
                            'p' | 'P' | 'x' => {
                                out.push('\\');
                                out.push(n);
                                i = copy_braced(&chars, i, &mut out);
                            }
                            'C' | 'Q' | 'E' | 'b' | 'B' => {
                                return Err(format!(
                                    "`\\{n}` inside a character class is not supported"
                                ));
                            }
                            '0'..='9' => {
                                return Err(format!("`\\{n}` (an octal escape) is not supported"));
                            }
                            other => {
                                out.push('\\');
                                out.push(other);
                            }
                        }
                        class = Some(false);
                        continue;
                    }
                    other => out.push(other),
                }
                class = Some(false);
            }
        }
        if let ('{', true) = (c, repetition_at(&chars, i)) {
            // Copy the whole repetition so its `}` is not escaped.
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '}' {
                out.push(chars[j]);
                j += 1;
            }
            out.push('}');
            i = j + 1;
            continue;
        }
        i += 1;
    }
    if class.is_some() {
        return Err("a character class is not closed".into());
    }
    Ok(out)
}

/// Whether `chars[i]` (a `{`) starts `{n}`, `{n,}` or `{n,m}` (RE2's only repetitions).
fn repetition_at(chars: &[char], i: usize) -> bool {
    let mut j = i + 1;
    let digits = |j: &mut usize| {
        let s = *j;
        while *j < chars.len() && chars[*j].is_ascii_digit() {
            *j += 1;
        }
        *j > s
    };
    if !digits(&mut j) {
        return false;
    }
    if chars.get(j) == Some(&',') {
        j += 1;
        digits(&mut j);
    }
    chars.get(j) == Some(&'}')
}

/// Copies `{…}` after `\p`, `\P` or `\x` if there is one, else the single next character.
fn copy_braced(chars: &[char], mut i: usize, out: &mut String) -> usize {
    if chars.get(i) == Some(&'{') {
        while i < chars.len() {
            out.push(chars[i]);
            i += 1;
            if chars[i - 1] == '}' {
                break;
            }
        }
    } else if let Some(&c) = chars.get(i) {
        out.push(c);
        i += 1;
        // `\xHH`: the second hex digit.
        if let Some(&d) = chars.get(i)
            && d.is_ascii_hexdigit()
            && c.is_ascii_hexdigit()
        {
            out.push(d);
            i += 1;
        }
    }
    i
}

/// `\Q…\E`: everything up to `\E` (or the end) is literal.
fn quoted(chars: &[char], mut i: usize, out: &mut String) -> usize {
    let mut lit = String::new();
    while i < chars.len() {
        if chars[i] == '\\' && chars.get(i + 1) == Some(&'E') {
            i += 2;
            break;
        }
        lit.push(chars[i]);
        i += 1;
    }
    out.push_str(&regex::escape(&lit));
    i
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::translate;

    fn m(re2: &str, text: &str) -> bool {
        regex::Regex::new(&translate(re2).unwrap())
            .unwrap()
            .is_match(text)
    }

    #[test]
    fn perl_classes_are_ascii_as_in_re2() {
        assert!(m(r"^\w+$", "abc_1"));
        assert!(!m(r"^\w+$", "é"));
        assert!(!m(r"^\d$", "٣"));
        assert!(m(r"^[\w.-]+$", "a.b-c"));
        assert!(!m(r"^[\w.-]+$", "aé"));
        assert!(m(r"^[^\s]+$", "é"));
        assert!(m(r"\bkey\b", "a key here"));
        assert!(m(r"^[\s\S]{3}$", "a\nb"));
    }

    #[test]
    fn literal_braces_and_brackets_as_in_re2() {
        assert!(m(r"^\${(?:[A-Z_]+)}$", "${API_KEY}"));
        assert!(m(r"^\{\{[ \t]*[\w ().|]+[ \t]*}}$", "{{ .Values.x }}"));
        assert!(m(r"^a{2}$", "aa"));
        assert!(m(r"^[[]$", "["));
        assert!(m(r"^[^]]+]$", "ab]"));
        assert!(m(r"^[[:alnum:]]{3}$", "a1B"));
        assert!(m(r"^[a&~]+$", "&~a"));
        assert!(m(r"^\Qa.b\E$", "a.b"));
        assert!(!m(r"^\Qa.b\E$", "axb"));
        assert!(m(r"(?i)\x60key\z", "`KEY"));
    }

    #[test]
    fn what_has_no_rust_equivalent_is_refused() {
        for bad in [r"\C", r"(a)\1", r"[a--b]", r"[abc"] {
            assert!(translate(bad).is_err(), "{bad}");
        }
    }
}
