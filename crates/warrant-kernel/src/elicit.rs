//! An MCP server's elicitation (form mode) as a request to the run's person: the requested
//! schema in words, the person's answer checked against it (primitive properties only, as the
//! protocol restricts them) with the schema's defaults filled in, and how the request ended for
//! the server. The kernel holds only JSON: the MCP client turns the protocol's types into an
//! [`ElicitAsk`] and the [`Elicited`] back into the protocol's answer.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::tool::Refusal;

/// The source name under which a server's words are fenced as untrusted.
pub fn fence_source(server: &str) -> String {
    format!("mcp-elicitation:{server}")
}

/// A server's elicitation as the tool hands it to the run.
#[derive(Clone, Debug, PartialEq)]
pub struct ElicitAsk {
    pub server: String,
    /// The server's message: its words, untrusted.
    pub message: String,
    /// The requested schema (`{"type":"object","properties":{…},"required":[…]}`).
    pub schema: Value,
    /// How long the person has before the server is told `cancel`.
    pub timeout_ms: u64,
}

/// How the request ended, for the server.
#[derive(Clone, Debug, PartialEq)]
pub enum ElicitOutcome {
    /// The person answered: the content, checked against the schema, defaults filled in.
    Accepted(Value),
    /// The person declined (the reason stays in the run; the server hears `decline`).
    Declined(String),
    /// Nobody answered in time, or the run was stopped: the server hears `cancel`.
    Cancelled(String),
    /// Not asked at all (no run to ask under, the ask is malformed): the server gets an error.
    Refused(Refusal),
}

/// What the run did with an elicitation: the request it raised (when it raised one), and how
/// it ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Elicited {
    pub request: Option<warrant_core::RequestId>,
    pub outcome: ElicitOutcome,
}

impl Elicited {
    pub fn refused(code: &str, message: impl Into<String>) -> Self {
        Self {
            request: None,
            outcome: ElicitOutcome::Refused(Refusal {
                code: code.to_owned(),
                message: message.into(),
            }),
        }
    }
}

/// One field of a requested schema, as a person is shown it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    /// `text`, `email`, `uri`, `date`, `date-time`, `number`, `integer`, `yes/no`, `one of`,
    /// `any of`.
    pub kind: String,
    pub required: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub words: String,
}

fn props(schema: &Value) -> Vec<(String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v)).collect())
        .unwrap_or_default()
}

fn required(schema: &Value) -> Vec<String> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The allowed values of a single-select enum (`enum`, or `oneOf` of `const`s), with titles.
fn choices(p: &Value) -> Option<Vec<(String, Option<String>)>> {
    if let Some(values) = p.get("enum").and_then(Value::as_array) {
        let names = p.get("enumNames").and_then(Value::as_array);
        return Some(
            values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    v.as_str().map(|s| {
                        (
                            s.to_owned(),
                            names
                                .and_then(|n| n.get(i))
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                        )
                    })
                })
                .collect(),
        );
    }
    let list = p
        .get("oneOf")
        .or_else(|| p.get("anyOf"))
        .and_then(Value::as_array)?;
    Some(
        list.iter()
            .filter_map(|o| {
                o.get("const").and_then(Value::as_str).map(|c| {
                    (
                        c.to_owned(),
                        o.get("title").and_then(Value::as_str).map(str::to_owned),
                    )
                })
            })
            .collect(),
    )
}

fn kind_of(p: &Value) -> &'static str {
    match p.get("type").and_then(Value::as_str) {
        Some("array") => "any of",
        Some("boolean") => "yes/no",
        Some("integer") => "integer",
        Some("number") => "number",
        _ if choices(p).is_some() => "one of",
        _ => match p.get("format").and_then(Value::as_str) {
            Some("email") => "email",
            Some("uri") => "uri",
            Some("date") => "date",
            Some("date-time") => "date-time",
            _ => "text",
        },
    }
}

/// The schema's fields in words, in the schema's order: name, kind, required or not, and what
/// bounds it (choices, lengths, ranges, default). The titles and descriptions are the
/// server's words: shown inside the fenced message's view, never as Warrant's own.
pub fn fields(schema: &Value) -> Vec<Field> {
    let required = required(schema);
    props(schema)
        .into_iter()
        .map(|(name, p)| {
            let mut words = Vec::new();
            if let Some(t) = p.get("title").and_then(Value::as_str) {
                words.push(format!("\u{201c}{t}\u{201d}"));
            }
            if let Some(d) = p.get("description").and_then(Value::as_str) {
                words.push(format!("\u{201c}{d}\u{201d}"));
            }
            let items = p.get("items").unwrap_or(&Value::Null);
            if let Some(c) = choices(p).or_else(|| choices(items)) {
                words.push(format!(
                    "choices: {}",
                    c.iter()
                        .map(|(v, t)| match t {
                            Some(t) if t != v => format!("{v} ({t})"),
                            _ => v.clone(),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            for (key, say) in [
                ("minLength", "at least {} characters"),
                ("maxLength", "at most {} characters"),
                ("minimum", "at least {}"),
                ("maximum", "at most {}"),
                ("minItems", "at least {} chosen"),
                ("maxItems", "at most {} chosen"),
            ] {
                if let Some(v) = p.get(key) {
                    words.push(say.replace("{}", &v.to_string()));
                }
            }
            if let Some(d) = p.get("default") {
                words.push(format!("default {d}"));
            }
            Field {
                required: required.contains(&name),
                kind: kind_of(p).to_owned(),
                name,
                words: words.join("; "),
            }
        })
        .collect()
}

/// One line per field, for a terminal or a listing.
pub fn fields_in_words(schema: &Value) -> Vec<String> {
    fields(schema)
        .iter()
        .map(|f| {
            let mut line = format!(
                "{} ({}, {})",
                f.name,
                f.kind,
                if f.required { "required" } else { "optional" }
            );
            if !f.words.is_empty() {
                line.push_str(": ");
                line.push_str(&f.words);
            }
            line
        })
        .collect()
}

/// Whether `schema` is one Warrant can ask a person: an object whose properties are all
/// primitive (string, number, integer, boolean, or an array of enum strings).
pub fn check_schema(schema: &Value) -> Result<(), String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the requested schema must be an object".into());
    }
    for (name, p) in props(schema) {
        match p.get("type").and_then(Value::as_str) {
            Some("string" | "number" | "integer" | "boolean") => {}
            Some("array") => {
                let items = p.get("items").unwrap_or(&Value::Null);
                if choices(items).is_none() {
                    return Err(format!(
                        "field `{name}` is an array that is not a choice of strings"
                    ));
                }
            }
            None if choices(p).is_some() => {}
            other => {
                return Err(format!(
                    "field `{name}` is of type {}: only primitive fields are asked",
                    other.unwrap_or("unknown")
                ));
            }
        }
    }
    Ok(())
}

/// The person's answer checked against `schema`: unknown fields, missing required ones and
/// values of the wrong type or out of bounds are refused (the person answers again); the
/// schema's defaults fill the optional fields left out.
pub fn accept(schema: &Value, answer: &Value) -> Result<Value, String> {
    let Some(given) = answer.as_object() else {
        return Err("the answer must be a JSON object of the requested fields".into());
    };
    let fields = props(schema);
    for key in given.keys() {
        if !fields.iter().any(|(n, _)| n == key) {
            return Err(format!(
                "`{key}` is not a requested field (fields: {})",
                fields
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let required = required(schema);
    let mut out = Map::new();
    for (name, p) in &fields {
        let value = match given.get(name) {
            Some(v) => v.clone(),
            None => match p.get("default") {
                Some(d) => d.clone(),
                None if required.contains(name) => {
                    return Err(format!("`{name}` is required"));
                }
                None => continue,
            },
        };
        check_value(name, p, &value)?;
        out.insert(name.clone(), value);
    }
    Ok(Value::Object(out))
}

fn check_value(name: &str, p: &Value, v: &Value) -> Result<(), String> {
    let bad = |what: &str| Err(format!("`{name}` must be {what}, not {v}"));
    let num = |key: &str| p.get(key).and_then(Value::as_f64);
    match p.get("type").and_then(Value::as_str) {
        Some("boolean") => {
            if !v.is_boolean() {
                return bad("true or false");
            }
        }
        Some(t @ ("integer" | "number")) => {
            if t == "integer" && !(v.is_i64() || v.is_u64()) {
                return bad("an integer");
            }
            if !v.is_number() {
                return bad("a number");
            }
            let x = v.as_f64().unwrap_or(f64::NAN);
            if num("minimum").is_some_and(|m| x < m) || num("maximum").is_some_and(|m| x > m) {
                return bad(&format!(
                    "between {} and {}",
                    num("minimum").map_or("-".into(), |m| m.to_string()),
                    num("maximum").map_or("-".into(), |m| m.to_string())
                ));
            }
        }
        Some("array") => {
            let Some(list) = v.as_array() else {
                return bad("a list of choices");
            };
            let allowed = choices(p.get("items").unwrap_or(&Value::Null)).unwrap_or_default();
            for item in list {
                if !allowed
                    .iter()
                    .any(|(c, _)| Some(c.as_str()) == item.as_str())
                {
                    return bad("a list of the offered choices");
                }
            }
            let n = list.len() as f64;
            if num("minItems").is_some_and(|m| n < m) || num("maxItems").is_some_and(|m| n > m) {
                return bad("a list of the allowed length");
            }
        }
        _ => {
            let Some(s) = v.as_str() else {
                return bad("text");
            };
            if let Some(c) = choices(p)
                && !c.iter().any(|(x, _)| x == s)
            {
                return bad(&format!(
                    "one of {}",
                    c.iter()
                        .map(|(x, _)| x.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            let chars = s.chars().count() as f64;
            if num("minLength").is_some_and(|m| chars < m)
                || num("maxLength").is_some_and(|m| chars > m)
            {
                return bad("text of the allowed length");
            }
            let ok = match p.get("format").and_then(Value::as_str) {
                Some("email") => {
                    let mut parts = s.splitn(2, '@');
                    matches!((parts.next(), parts.next()), (Some(a), Some(b)) if !a.is_empty() && b.contains('.') && !s.contains(char::is_whitespace))
                }
                Some("uri") => s.contains(':') && !s.contains(char::is_whitespace),
                Some("date") => is_date(s),
                Some("date-time") => s.len() > 10 && is_date(&s[..10]) && s.as_bytes()[10] == b'T',
                _ => true,
            };
            if !ok {
                return bad(&format!(
                    "a valid {}",
                    p.get("format").and_then(Value::as_str).unwrap_or("value")
                ));
            }
        }
    }
    Ok(())
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name", "minLength": 2},
                "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
                "colour": {"type": "string", "enum": ["red", "blue"]},
                "ok": {"type": "boolean"},
                "mail": {"type": "string", "format": "email"},
                "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b"}]}}
            },
            "required": ["name", "colour"]
        })
    }

    /// A table of answers: what is accepted (with the default filled in) and what is refused.
    #[test]
    fn answers_are_checked_against_the_schema_and_defaults_fill_the_rest() {
        let s = schema();
        let got = accept(&s, &json!({"name": "Ann", "colour": "red"})).unwrap();
        assert_eq!(got, json!({"name": "Ann", "colour": "red", "age": 30}));
        let refused = [
            json!({"colour": "red"}),
            json!({"name": "A", "colour": "red"}),
            json!({"name": "Ann", "colour": "green"}),
            json!({"name": "Ann", "colour": "red", "age": 200}),
            json!({"name": "Ann", "colour": "red", "age": 3.5}),
            json!({"name": "Ann", "colour": "red", "ok": "yes"}),
            json!({"name": "Ann", "colour": "red", "mail": "nope"}),
            json!({"name": "Ann", "colour": "red", "tags": ["c"]}),
            json!({"name": "Ann", "colour": "red", "extra": 1}),
            json!("Ann"),
        ];
        for a in refused {
            assert!(accept(&s, &a).is_err(), "{a} was accepted");
        }
        let all = json!({"name": "Ann", "colour": "blue", "age": 4, "ok": true, "mail": "a@b.c", "tags": ["a", "b"]});
        assert_eq!(accept(&s, &all).unwrap(), all);
    }

    #[test]
    fn the_fields_are_said_in_words_and_only_primitive_schemas_are_asked() {
        let lines = fields_in_words(&schema());
        assert!(
            lines.contains(
                &"age (integer, optional): at least 0; at most 150; default 30".to_owned()
            ),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"colour (one of, required): choices: red, blue".to_owned()),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("tags (any of, optional): choices: a (A), b")),
            "{lines:?}"
        );
        assert!(check_schema(&schema()).is_ok());
        let nested = json!({"type": "object", "properties": {"x": {"type": "object"}}});
        assert!(check_schema(&nested).is_err());
        assert!(check_schema(&json!({"type": "array"})).is_err());
    }
}
