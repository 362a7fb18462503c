//! AGX, the graph's expression language (AGS §16, docs/expressions.md): a parser into a small
//! tree and a pure evaluator over JSON values. The support crate checks syntax at load time
//! (AG204); this is the runtime half it leaves to a harness. No host `eval`, no I/O, no clock.

use serde_json::{Map, Number, Value};

/// An expression that does not parse, or an evaluation error (AGS §16.4).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AgxError(pub String);

fn err<T>(message: impl Into<String>) -> Result<T, AgxError> {
    Err(AgxError(message.into()))
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f64),
    Str(String),
    Ident(String),
    Op(&'static str),
}

fn tokenize(input: &str) -> Result<Vec<Tok>, AgxError> {
    let chars: Vec<char> = input.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '"' || c == '\'' {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return err("unterminated string"),
                    Some(&q) if q == c => break,
                    Some('\\') => {
                        let e = chars.get(i + 1).copied();
                        s.push(match e {
                            Some('n') => '\n',
                            Some('t') => '\t',
                            Some(other) => other,
                            None => return err("unterminated string"),
                        });
                        i += 2;
                    }
                    Some(&other) => {
                        s.push(other);
                        i += 1;
                    }
                }
            }
            i += 1;
            out.push(Tok::Str(s));
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|d| d.is_ascii_digit() || *d == '.')
            {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            let n = text
                .parse::<f64>()
                .map_err(|_| AgxError(format!("bad number {text:?}")))?;
            out.push(Tok::Num(n));
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|d| d.is_ascii_alphanumeric() || *d == '_')
            {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
            continue;
        }
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let op = match two.as_str() {
            "||" => Some("||"),
            "&&" => Some("&&"),
            "==" => Some("=="),
            "!=" => Some("!="),
            "<=" => Some("<="),
            ">=" => Some(">="),
            _ => None,
        };
        if let Some(op) = op {
            out.push(Tok::Op(op));
            i += 2;
            continue;
        }
        let op = match c {
            '<' => "<",
            '>' => ">",
            '+' => "+",
            '-' => "-",
            '*' => "*",
            '/' => "/",
            '%' => "%",
            '!' => "!",
            '(' => "(",
            ')' => ")",
            '[' => "[",
            ']' => "]",
            ',' => ",",
            '.' => ".",
            other => return err(format!("unexpected character {other:?}")),
        };
        out.push(Tok::Op(op));
        i += 1;
    }
    Ok(out)
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Lit(Value),
    Ref(Vec<String>),
    List(Vec<Expr>),
    Call(String, Vec<Expr>),
    Unary(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn peek_op(&self) -> Option<&'static str> {
        match self.toks.get(self.at) {
            Some(Tok::Op(o)) => Some(o),
            Some(Tok::Ident(w)) => match w.as_str() {
                "or" => Some("||"),
                "and" => Some("&&"),
                "in" => Some("in"),
                "not" => Some("!"),
                _ => None,
            },
            _ => None,
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), AgxError> {
        if self.peek_op() == Some(op) {
            self.at += 1;
            Ok(())
        } else {
            err(format!("expected `{op}`"))
        }
    }

    fn binary(
        &mut self,
        ops: &[&'static str],
        next: fn(&mut Self) -> Result<Expr, AgxError>,
    ) -> Result<Expr, AgxError> {
        let mut left = next(self)?;
        while let Some(op) = self.peek_op().filter(|o| ops.contains(o)) {
            self.at += 1;
            let right = next(self)?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn or(&mut self) -> Result<Expr, AgxError> {
        self.binary(&["||"], Self::and)
    }
    fn and(&mut self) -> Result<Expr, AgxError> {
        self.binary(&["&&"], Self::inn)
    }
    fn inn(&mut self) -> Result<Expr, AgxError> {
        self.binary(&["in"], Self::eq)
    }
    fn eq(&mut self) -> Result<Expr, AgxError> {
        self.binary(&["==", "!="], Self::cmp)
    }
    fn cmp(&mut self) -> Result<Expr, AgxError> {
        self.binary(&["<", "<=", ">", ">="], Self::add)
    }
    fn add(&mut self) -> Result<Expr, AgxError> {
        self.binary(&["+", "-"], Self::mul)
    }
    fn mul(&mut self) -> Result<Expr, AgxError> {
        self.binary(&["*", "/", "%"], Self::unary)
    }

    fn unary(&mut self) -> Result<Expr, AgxError> {
        match self.peek_op() {
            Some(op @ ("!" | "-")) => {
                self.at += 1;
                Ok(Expr::Unary(op, Box::new(self.unary()?)))
            }
            _ => self.primary(),
        }
    }

    fn list(&mut self, close: &str) -> Result<Vec<Expr>, AgxError> {
        let mut items = Vec::new();
        if self.peek_op() == Some(close) {
            self.at += 1;
            return Ok(items);
        }
        loop {
            items.push(self.or()?);
            match self.peek_op() {
                Some(",") => self.at += 1,
                Some(o) if o == close => {
                    self.at += 1;
                    return Ok(items);
                }
                _ => return err(format!("expected `,` or `{close}`")),
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, AgxError> {
        let Some(tok) = self.toks.get(self.at).cloned() else {
            return err("unexpected end of expression");
        };
        self.at += 1;
        match tok {
            Tok::Num(n) => Ok(Expr::Lit(number(n))),
            Tok::Str(s) => Ok(Expr::Lit(Value::String(s))),
            Tok::Op("(") => {
                let e = self.or()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Op("[") => Ok(Expr::List(self.list("]")?)),
            Tok::Op(o) => err(format!("unexpected `{o}`")),
            Tok::Ident(word) => match word.as_str() {
                "true" => Ok(Expr::Lit(Value::Bool(true))),
                "false" => Ok(Expr::Lit(Value::Bool(false))),
                "null" => Ok(Expr::Lit(Value::Null)),
                _ if self.peek_op() == Some("(") => {
                    self.at += 1;
                    Ok(Expr::Call(word, self.list(")")?))
                }
                _ => {
                    let mut path = vec![word];
                    while self.peek_op() == Some(".") {
                        self.at += 1;
                        match self.toks.get(self.at) {
                            Some(Tok::Ident(next)) => path.push(next.clone()),
                            _ => return err("expected a name after `.`"),
                        }
                        self.at += 1;
                    }
                    Ok(Expr::Ref(path))
                }
            },
        }
    }
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        Value::Number(Number::from(n as i64))
    } else {
        Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

/// Parses one expression (the whole string).
pub fn parse(input: &str) -> Result<Expr, AgxError> {
    let toks = tokenize(input)?;
    let mut p = Parser { toks, at: 0 };
    let e = p.or()?;
    if p.at != p.toks.len() {
        return err("unexpected text after the expression");
    }
    Ok(e)
}

/// Parses and evaluates `input` against `scope` (an object of namespaces).
pub fn eval(input: &str, scope: &Value) -> Result<Value, AgxError> {
    evaluate(&parse(input)?, scope)
}

/// Evaluates `input` and insists on a boolean (edges, `when`, criteria).
pub fn eval_bool(input: &str, scope: &Value) -> Result<bool, AgxError> {
    match eval(input, scope)? {
        Value::Bool(b) => Ok(b),
        other @ (Value::Null
        | Value::Number(_)
        | Value::String(_)
        | Value::Array(_)
        | Value::Object(_)) => err(format!(
            "`{input}` is {} where a boolean is needed (AGX has no truthiness)",
            type_name(&other)
        )),
    }
}

/// Renders a template: `${{ expr }}` replaced by its value (strings as they are, `null` as
/// nothing, anything else as compact JSON).
pub fn render(template: &str, scope: &Value) -> Result<String, AgxError> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 3..];
        let Some(end) = after.find("}}") else {
            return err("unterminated `${{` in a template");
        };
        out.push_str(&stringify(&eval(after[..end].trim(), scope)?));
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

pub fn stringify(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other @ (Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_)) => {
            other.to_string()
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn num(v: &Value, what: &str) -> Result<f64, AgxError> {
    v.as_f64()
        .ok_or_else(|| AgxError(format!("{what} needs numbers, got {}", type_name(v))))
}

fn boolean(v: &Value, what: &str) -> Result<bool, AgxError> {
    v.as_bool()
        .ok_or_else(|| AgxError(format!("{what} needs booleans, got {}", type_name(v))))
}

fn string<'v>(v: &'v Value, what: &str) -> Result<&'v str, AgxError> {
    v.as_str()
        .ok_or_else(|| AgxError(format!("{what} needs a string, got {}", type_name(v))))
}

fn lookup(scope: &Value, path: &[String]) -> Value {
    let mut at = scope;
    for key in path {
        match at.get(key) {
            Some(v) => at = v,
            None => return Value::Null,
        }
    }
    at.clone()
}

fn contains(hay: &Value, needle: &Value, what: &str) -> Result<bool, AgxError> {
    match hay {
        Value::Array(a) => Ok(a.contains(needle)),
        Value::String(s) => Ok(s.contains(string(needle, what)?)),
        Value::Object(o) => Ok(o.contains_key(string(needle, what)?)),
        other @ (Value::Null | Value::Bool(_) | Value::Number(_)) => err(format!(
            "{what} needs an array, a string or an object, got {}",
            type_name(other)
        )),
    }
}

fn evaluate(e: &Expr, scope: &Value) -> Result<Value, AgxError> {
    Ok(match e {
        Expr::Lit(v) => v.clone(),
        Expr::Ref(path) => lookup(scope, path),
        Expr::List(items) => Value::Array(
            items
                .iter()
                .map(|i| evaluate(i, scope))
                .collect::<Result<_, _>>()?,
        ),
        Expr::Unary(op, inner) => {
            let v = evaluate(inner, scope)?;
            if *op == "!" {
                Value::Bool(!boolean(&v, "`!`")?)
            } else {
                number(-num(&v, "unary `-`")?)
            }
        }
        Expr::Binary(op, l, r) => {
            // `&&` and `||` short-circuit, on booleans only.
            if *op == "&&" || *op == "||" {
                let left = boolean(&evaluate(l, scope)?, op)?;
                if (*op == "&&" && !left) || (*op == "||" && left) {
                    return Ok(Value::Bool(left));
                }
                return Ok(Value::Bool(boolean(&evaluate(r, scope)?, op)?));
            }
            let (a, b) = (evaluate(l, scope)?, evaluate(r, scope)?);
            match *op {
                "==" => Value::Bool(same(&a, &b)),
                "!=" => Value::Bool(!same(&a, &b)),
                "in" => Value::Bool(contains(&b, &a, "`in`")?),
                "<" | "<=" | ">" | ">=" => {
                    let ord = match (&a, &b) {
                        (Value::String(x), Value::String(y)) => x.cmp(y),
                        (Value::Number(_), Value::Number(_)) => num(&a, op)?
                            .partial_cmp(&num(&b, op)?)
                            .ok_or_else(|| AgxError("numbers that do not compare".into()))?,
                        _ => {
                            return err(format!(
                                "`{op}` compares numbers with numbers or strings with strings, not {} with {}",
                                type_name(&a),
                                type_name(&b)
                            ));
                        }
                    };
                    Value::Bool(match *op {
                        "<" => ord.is_lt(),
                        "<=" => ord.is_le(),
                        ">" => ord.is_gt(),
                        _ => ord.is_ge(),
                    })
                }
                "+" => match (&a, &b) {
                    (Value::String(x), Value::String(y)) => Value::String(format!("{x}{y}")),
                    (Value::Array(x), Value::Array(y)) => {
                        Value::Array(x.iter().chain(y.iter()).cloned().collect())
                    }
                    _ => number(num(&a, "`+`")? + num(&b, "`+`")?),
                },
                "-" => number(num(&a, op)? - num(&b, op)?),
                "*" => number(num(&a, op)? * num(&b, op)?),
                "/" | "%" => {
                    let d = num(&b, op)?;
                    if d == 0.0 {
                        return err(format!("`{op}` by zero"));
                    }
                    let n = num(&a, op)?;
                    number(if *op == "/" { n / d } else { n % d })
                }
                other => return err(format!("unknown operator `{other}`")),
            }
        }
        Expr::Call(name, args) => {
            let vals: Vec<Value> = args
                .iter()
                .map(|a| evaluate(a, scope))
                .collect::<Result<_, _>>()?;
            call(name, &vals, scope)?
        }
    })
}

/// Deep equality; numbers by value (`1 == 1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn arity(name: &str, args: &[Value], n: std::ops::RangeInclusive<usize>) -> Result<(), AgxError> {
    if n.contains(&args.len()) {
        Ok(())
    } else {
        err(format!("{name}() received {} argument(s)", args.len()))
    }
}

fn node_status(scope: &Value, args: &[Value], want: &str) -> Result<Value, AgxError> {
    let id = string(&args[0], "a node id")?;
    Ok(Value::Bool(
        scope
            .get("nodes")
            .and_then(|n| n.get(id))
            .and_then(|n| n.get("status"))
            .and_then(Value::as_str)
            == Some(want),
    ))
}

fn call(name: &str, args: &[Value], scope: &Value) -> Result<Value, AgxError> {
    let what = format!("{name}()");
    let one = |a: &[Value]| arity(name, a, 1..=1);
    let two = |a: &[Value]| arity(name, a, 2..=2);
    Ok(match name {
        "len" | "count" => {
            one(args)?;
            let n = match &args[0] {
                Value::Array(a) => a.len(),
                Value::String(s) if name == "len" => s.chars().count(),
                Value::Object(o) if name == "len" => o.len(),
                other @ (Value::Null
                | Value::Bool(_)
                | Value::Number(_)
                | Value::String(_)
                | Value::Object(_)) => {
                    return err(format!("{what} cannot measure {}", type_name(other)));
                }
            };
            Value::Number(Number::from(n))
        }
        "contains" => {
            two(args)?;
            Value::Bool(contains(&args[0], &args[1], &what)?)
        }
        "startswith" | "endswith" => {
            two(args)?;
            let (s, p) = (string(&args[0], &what)?, string(&args[1], &what)?);
            Value::Bool(if name == "startswith" {
                s.starts_with(p)
            } else {
                s.ends_with(p)
            })
        }
        "lower" | "upper" | "trim" => {
            one(args)?;
            let s = string(&args[0], &what)?;
            Value::String(match name {
                "lower" => s.to_lowercase(),
                "upper" => s.to_uppercase(),
                _ => s.trim().to_owned(),
            })
        }
        "matches" => {
            two(args)?;
            let re = regex::Regex::new(string(&args[1], &what)?)
                .map_err(|e| AgxError(format!("{what}: bad pattern: {e}")))?;
            Value::Bool(re.is_match(string(&args[0], &what)?))
        }
        "split" => {
            two(args)?;
            let sep = string(&args[1], &what)?;
            Value::Array(
                string(&args[0], &what)?
                    .split(sep)
                    .map(|p| Value::String(p.to_owned()))
                    .collect(),
            )
        }
        "join" => {
            two(args)?;
            let Value::Array(items) = &args[0] else {
                return err(format!("{what} needs an array"));
            };
            Value::String(
                items
                    .iter()
                    .map(stringify)
                    .collect::<Vec<_>>()
                    .join(string(&args[1], &what)?),
            )
        }
        "int" | "float" => {
            one(args)?;
            let n = match &args[0] {
                Value::Number(_) => num(&args[0], &what)?,
                Value::String(s) => s
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| AgxError(format!("{what} cannot convert {s:?}")))?,
                Value::Bool(b) => f64::from(u8::from(*b)),
                other @ (Value::Null | Value::Array(_) | Value::Object(_)) => {
                    return err(format!("{what} cannot convert {}", type_name(other)));
                }
            };
            if name == "int" {
                number(n.trunc())
            } else {
                Number::from_f64(n).map_or(Value::Null, Value::Number)
            }
        }
        "bool" => {
            one(args)?;
            match &args[0] {
                Value::Bool(b) => Value::Bool(*b),
                Value::String(s) if s == "true" => Value::Bool(true),
                Value::String(s) if s == "false" => Value::Bool(false),
                other @ (Value::Null
                | Value::Number(_)
                | Value::String(_)
                | Value::Array(_)
                | Value::Object(_)) => {
                    return err(format!("{what} cannot convert {}", type_name(other)));
                }
            }
        }
        "str" => {
            one(args)?;
            Value::String(stringify(&args[0]))
        }
        "json" => {
            one(args)?;
            serde_json::from_str(string(&args[0], &what)?)
                .map_err(|e| AgxError(format!("{what}: {e}")))?
        }
        "get" => {
            arity(name, args, 2..=3)?;
            let path: Vec<String> = string(&args[1], &what)?
                .split('.')
                .map(str::to_owned)
                .collect();
            let v = lookup(&args[0], &path);
            match (v, args.get(2)) {
                (Value::Null, Some(d)) => d.clone(),
                (v, _) => v,
            }
        }
        "default" => {
            two(args)?;
            if args[0].is_null() {
                args[1].clone()
            } else {
                args[0].clone()
            }
        }
        "any" | "all" => {
            one(args)?;
            let Value::Array(items) = &args[0] else {
                return err(format!("{what} needs an array of booleans"));
            };
            let bools: Vec<bool> = items
                .iter()
                .map(|b| boolean(b, &what))
                .collect::<Result<_, _>>()?;
            Value::Bool(if name == "any" {
                bools.iter().any(|b| *b)
            } else {
                bools.iter().all(|b| *b)
            })
        }
        "succeeded" | "failed" | "skipped" => {
            one(args)?;
            node_status(scope, args, name)?
        }
        "output" => {
            two(args)?;
            let (id, out) = (string(&args[0], &what)?, string(&args[1], &what)?);
            lookup(
                scope,
                &["nodes".into(), id.into(), "outputs".into(), out.into()],
            )
        }
        other => return err(format!("unknown function {other}()")),
    })
}

/// An empty object, for building scopes.
pub fn object() -> Value {
    Value::Object(Map::new())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_spec_examples_evaluate() {
        let scope = json!({
            "params": {"environment": "production", "target_version": "2.0"},
            "nodes": {
                "triage": {"status": "succeeded", "outputs": {"decision": "product_bug"}},
                "scan": {"status": "succeeded", "outputs": {"severity": "high", "modules": ["auth", "api"]}},
                "link_audit": {"status": "failed", "outputs": {"broken_links": []}}
            },
            "self": {"outputs": {"coverage_percent": 90, "findings": [], "exit_code": 0}}
        });
        let cases = [
            (r#"nodes.triage.outputs.decision == "product_bug""#, true),
            ("len(nodes.link_audit.outputs.broken_links) > 0", false),
            (
                r#"nodes.scan.outputs.severity == "high" && params.environment == "production""#,
                true,
            ),
            (r#""auth" in nodes.scan.outputs.modules"#, true),
            ("self.outputs.coverage_percent >= 85", true),
            (
                "all([len(self.outputs.findings) == 0, self.outputs.exit_code == 0])",
                true,
            ),
            ("failed('link_audit') and not succeeded('link_audit')", true),
            ("default(nodes.nothing.outputs.x, 3) == 3", true),
            ("1 + 2 * 3 == 7 || false", true),
        ];
        for (text, want) in cases {
            assert_eq!(eval_bool(text, &scope), Ok(want), "{text}");
        }
        assert_eq!(
            render("Approve ${{ params.target_version }}?", &scope).unwrap(),
            "Approve 2.0?"
        );
    }

    #[test]
    fn errors_are_errors_not_false() {
        let scope = json!({"a": "x"});
        for bad in [
            "a < 1",
            "1 / 0",
            "a && true",
            "len(1)",
            "nope(1)",
            "(1",
            "1 +",
            "a ===",
        ] {
            assert!(eval(bad, &scope).is_err(), "{bad}");
        }
        assert!(eval_bool("a", &scope).is_err());
    }
}
