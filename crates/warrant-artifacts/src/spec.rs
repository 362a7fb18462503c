//! The artifact tools' inputs as types, checked before anything is generated: tables are
//! rectangular, sheets bounded, names legal. Errors say where (sheet, row, block, slide).

use serde_json::Value;

use crate::ArtifactError;

/// The most rows a sheet may have, and cells a spreadsheet may hold in all: a generated
/// artifact is a document a person reads, not a data export.
pub const MAX_ROWS: usize = 10_000;
pub const MAX_CELLS: usize = 200_000;
/// The most columns a row may have (Excel's own limit is 16,384).
pub const MAX_COLUMNS: usize = 1_000;

/// One cell of a sheet.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Empty,
    Text(String),
    Number(f64),
    Bool(bool),
    Formula(String),
}

impl Cell {
    fn parse(v: &Value, at: &str) -> Result<Self, ArtifactError> {
        Ok(match v {
            Value::Null => Self::Empty,
            Value::String(s) => Self::Text(s.clone()),
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => {
                Self::Number(n.as_f64().ok_or_else(|| bad(at, "a number out of range"))?)
            }
            Value::Object(o) => match (o.get("formula").and_then(Value::as_str), o.len()) {
                (Some(f), 1) if f.starts_with('=') && f.len() > 1 => Self::Formula(f.to_owned()),
                _ => {
                    return Err(bad(
                        at,
                        "an object cell must be exactly {\"formula\": \"=...\"}",
                    ));
                }
            },
            Value::Array(_) => return Err(bad(at, "a cell cannot be a list")),
        })
    }

    /// The cell as text, for tables in documents and slides and for the outline a person sees.
    pub fn text(&self) -> String {
        match self {
            Self::Empty => String::new(),
            Self::Text(s) | Self::Formula(s) => s.clone(),
            Self::Number(n) => format_number(*n),
            Self::Bool(b) => b.to_string(),
        }
    }
}

fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{n:.0}")
    } else {
        n.to_string()
    }
}

fn bad(at: &str, why: &str) -> ArtifactError {
    ArtifactError::Invalid(format!("{at}: {why}"))
}

fn strings(v: Option<&Value>, at: &str) -> Result<Vec<String>, ArtifactError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| bad(&format!("{at}[{i}]"), "expected a string"))
            })
            .collect(),
        Some(_) => Err(bad(at, "expected a list of strings")),
    }
}

/// A table: a header row then data rows, all of the header's width.
pub fn table(v: &Value, at: &str) -> Result<Vec<Vec<Cell>>, ArtifactError> {
    let rows = v
        .as_array()
        .ok_or_else(|| bad(at, "a table is a list of rows"))?;
    if rows.is_empty() {
        return Err(bad(at, "a table needs at least its header row"));
    }
    let mut out = Vec::with_capacity(rows.len());
    for (r, row) in rows.iter().enumerate() {
        let cells = row
            .as_array()
            .ok_or_else(|| bad(&format!("{at} row {}", r + 1), "a row is a list of cells"))?;
        let cells = cells
            .iter()
            .enumerate()
            .map(|(c, v)| Cell::parse(v, &format!("{at} row {} cell {}", r + 1, c + 1)))
            .collect::<Result<Vec<_>, _>>()?;
        out.push(cells);
    }
    let width = out.first().map_or(0, Vec::len);
    if let Some((r, row)) = out.iter().enumerate().find(|(_, row)| row.len() != width) {
        return Err(ArtifactError::Ragged {
            at: at.to_owned(),
            row: r + 1,
            cells: row.len(),
            header: width,
        });
    }
    Ok(out)
}

/// A block of a document.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    Heading { text: String, level: u8 },
    Paragraph(String),
    Bullets(Vec<String>),
    Numbered(Vec<String>),
    Table(Vec<Vec<Cell>>),
    PageBreak,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub title: Option<String>,
    pub blocks: Vec<Block>,
}

impl Document {
    pub fn parse(args: &Value) -> Result<Self, ArtifactError> {
        let title = args.get("title").and_then(Value::as_str).map(str::to_owned);
        let blocks = args
            .get("blocks")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("blocks", "expected a list of blocks"))?;
        let mut out = Vec::with_capacity(blocks.len());
        for (i, b) in blocks.iter().enumerate() {
            let at = format!("block {}", i + 1);
            let o = b
                .as_object()
                .ok_or_else(|| bad(&at, "a block is an object"))?;
            let key = |k: &str| o.get(k);
            let block = if let Some(h) = key("heading") {
                let level = o.get("level").and_then(Value::as_u64).unwrap_or(1);
                if !(1..=6).contains(&level) {
                    return Err(bad(&at, "a heading's level is 1 to 6"));
                }
                Block::Heading {
                    text: h
                        .as_str()
                        .ok_or_else(|| bad(&at, "a heading is a string"))?
                        .to_owned(),
                    level: u8::try_from(level).unwrap_or(1),
                }
            } else if let Some(p) = key("paragraph") {
                Block::Paragraph(
                    p.as_str()
                        .ok_or_else(|| bad(&at, "a paragraph is a string"))?
                        .to_owned(),
                )
            } else if key("bullets").is_some() {
                Block::Bullets(strings(key("bullets"), &at)?)
            } else if key("numbered").is_some() {
                Block::Numbered(strings(key("numbered"), &at)?)
            } else if let Some(t) = key("table") {
                Block::Table(table(t, &at)?)
            } else if key("page_break") == Some(&Value::Bool(true)) {
                Block::PageBreak
            } else {
                return Err(bad(
                    &at,
                    "expected one of heading, paragraph, bullets, numbered, table, page_break",
                ));
            };
            out.push(block);
        }
        Ok(Self { title, blocks: out })
    }
}

/// Inline styles of a paragraph: `**bold**`, `*italic*`, `` `code` ``.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    pub text: String,
    pub bold: bool,
    pub italic: bool,
    pub code: bool,
}

/// Splits a paragraph into styled spans. Unclosed markers are kept as text.
pub fn spans(text: &str) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    let mut rest = text;
    let push = |out: &mut Vec<Span>, text: &str, bold, italic, code| {
        if !text.is_empty() {
            out.push(Span {
                text: text.to_owned(),
                bold,
                italic,
                code,
            });
        }
    };
    while !rest.is_empty() {
        let next = [
            ("**", true, false, false),
            ("`", false, false, true),
            ("*", false, true, false),
        ]
        .into_iter()
        .filter_map(|(m, b, i, c)| {
            let start = rest.find(m)?;
            let end = rest[start + m.len()..].find(m)? + start + m.len();
            (end > start + m.len()).then_some((start, end, m.len(), b, i, c))
        })
        .min_by_key(|(start, _, len, ..)| (*start, usize::MAX - len));
        match next {
            Some((start, end, len, b, i, c)) => {
                push(&mut out, &rest[..start], false, false, false);
                push(&mut out, &rest[start + len..end], b, i, c);
                rest = &rest[end + len..];
            }
            None => {
                push(&mut out, rest, false, false, false);
                rest = "";
            }
        }
    }
    out
}

#[derive(Clone, Debug, PartialEq)]
pub struct Sheet {
    pub name: String,
    pub rows: Vec<Vec<Cell>>,
    pub widths: Vec<f64>,
    /// The first cell below and right of the frozen panes, as (row, column), zero-based.
    pub freeze: Option<(u32, u16)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Workbook {
    pub sheets: Vec<Sheet>,
}

impl Workbook {
    pub fn parse(args: &Value) -> Result<Self, ArtifactError> {
        let sheets = args
            .get("sheets")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("sheets", "expected a list of sheets"))?;
        if sheets.is_empty() {
            return Err(bad("sheets", "a spreadsheet needs at least one sheet"));
        }
        let mut out = Vec::new();
        let mut cells = 0usize;
        for (i, s) in sheets.iter().enumerate() {
            let name = s
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(&format!("sheet {}", i + 1), "a sheet needs a name"))?
                .to_owned();
            let at = format!("sheet {name:?}");
            if name.is_empty()
                || name.chars().count() > 31
                || name.contains(['[', ']', ':', '*', '?', '/', '\\'])
                || name.starts_with('\'')
            {
                return Err(bad(
                    &at,
                    "a sheet name is 1 to 31 characters, without [ ] : * ? / \\ or a leading '",
                ));
            }
            if out
                .iter()
                .any(|o: &Sheet| o.name.eq_ignore_ascii_case(&name))
            {
                return Err(bad(&at, "two sheets have this name"));
            }
            let rows_v = s
                .get("rows")
                .and_then(Value::as_array)
                .ok_or_else(|| bad(&at, "expected rows, a list of rows"))?;
            if rows_v.len() > MAX_ROWS {
                return Err(ArtifactError::TooLarge(format!(
                    "{at} has {} rows; a generated sheet holds at most {MAX_ROWS} (write the data as a CSV file instead)",
                    rows_v.len()
                )));
            }
            let mut rows = Vec::with_capacity(rows_v.len());
            for (r, row) in rows_v.iter().enumerate() {
                let at_row = format!("{at} row {}", r + 1);
                let row = row
                    .as_array()
                    .ok_or_else(|| bad(&at_row, "a row is a list of cells"))?;
                if row.len() > MAX_COLUMNS {
                    return Err(ArtifactError::TooLarge(format!(
                        "{at_row} has {} cells; at most {MAX_COLUMNS}",
                        row.len()
                    )));
                }
                cells += row.len();
                if cells > MAX_CELLS {
                    return Err(ArtifactError::TooLarge(format!(
                        "the spreadsheet has more than {MAX_CELLS} cells"
                    )));
                }
                rows.push(
                    row.iter()
                        .enumerate()
                        .map(|(c, v)| Cell::parse(v, &format!("{at_row} cell {}", c + 1)))
                        .collect::<Result<Vec<_>, _>>()?,
                );
            }
            let widths = match s.get("widths") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(w)) => w
                    .iter()
                    .map(|x| {
                        x.as_f64()
                            .filter(|w| (0.0..=255.0).contains(w))
                            .ok_or_else(|| bad(&at, "a width is a number from 0 to 255"))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(bad(&at, "widths is a list of numbers")),
            };
            let freeze = match s.get("freeze").and_then(Value::as_str) {
                None => None,
                Some(cell) => {
                    Some(a1(cell).ok_or_else(|| bad(&at, "freeze names a cell such as \"B2\""))?)
                }
            };
            out.push(Sheet {
                name,
                rows,
                widths,
                freeze,
            });
        }
        Ok(Self { sheets: out })
    }
}

/// `B2` → (1, 1): zero-based row and column of an A1 reference.
pub fn a1(cell: &str) -> Option<(u32, u16)> {
    let split = cell.find(|c: char| c.is_ascii_digit())?;
    let (letters, digits) = cell.split_at(split);
    if letters.is_empty() || letters.len() > 3 || !letters.chars().all(|c| c.is_ascii_uppercase()) {
        return None;
    }
    let col = letters
        .bytes()
        .fold(0u32, |acc, b| acc * 26 + u32::from(b - b'A' + 1));
    let row: u32 = digits.parse().ok()?;
    if row == 0 || col == 0 || col > 16_384 || row > 1_048_576 {
        return None;
    }
    Some((row - 1, u16::try_from(col - 1).ok()?))
}

#[derive(Clone, Debug, PartialEq)]
pub struct Slide {
    pub title: String,
    pub bullets: Vec<String>,
    pub columns: Option<(Vec<String>, Vec<String>)>,
    pub table: Option<Vec<Vec<Cell>>>,
    pub notes: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Deck {
    pub slides: Vec<Slide>,
}

/// The most slides a generated deck holds.
pub const MAX_SLIDES: usize = 500;

impl Deck {
    pub fn parse(args: &Value) -> Result<Self, ArtifactError> {
        let slides = args
            .get("slides")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("slides", "expected a list of slides"))?;
        if slides.is_empty() || slides.len() > MAX_SLIDES {
            return Err(bad("slides", "a presentation has 1 to 500 slides"));
        }
        let mut out = Vec::new();
        for (i, s) in slides.iter().enumerate() {
            let at = format!("slide {}", i + 1);
            let title = s
                .get("title")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(&at, "a slide needs a title"))?
                .to_owned();
            let bullets = strings(s.get("bullets"), &at)?;
            let columns = match s.get("columns") {
                None | Some(Value::Null) => None,
                Some(Value::Array(cols)) if cols.len() == 2 => Some((
                    strings(cols.first(), &format!("{at} left column"))?,
                    strings(cols.get(1), &format!("{at} right column"))?,
                )),
                Some(_) => return Err(bad(&at, "columns is two lists of strings")),
            };
            let table = match s.get("table") {
                None | Some(Value::Null) => None,
                Some(t) => Some(table(t, &format!("{at} table"))?),
            };
            let shapes = usize::from(!bullets.is_empty())
                + usize::from(columns.is_some())
                + usize::from(table.is_some());
            if shapes > 1 {
                return Err(bad(
                    &at,
                    "a slide has bullets, columns or a table, not more than one",
                ));
            }
            let notes = s.get("notes").and_then(Value::as_str).map(str::to_owned);
            out.push(Slide {
                title,
                bullets,
                columns,
                table,
                notes,
            });
        }
        Ok(Self { slides: out })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;
    use serde_json::json;
    use warrant_core::Coded as _;

    use super::*;

    #[test]
    fn inline_styles_split_into_spans() {
        let s = |t: &str, b, i, c| Span {
            text: t.into(),
            bold: b,
            italic: i,
            code: c,
        };
        assert_eq!(
            spans("a **b** *c* `d` e*"),
            vec![
                s("a ", false, false, false),
                s("b", true, false, false),
                s(" ", false, false, false),
                s("c", false, true, false),
                s(" ", false, false, false),
                s("d", false, false, true),
                s(" e*", false, false, false),
            ]
        );
    }

    #[test]
    fn ragged_tables_and_huge_sheets_are_refused_with_where() {
        let err = table(&json!([["a", "b"], ["1"]]), "block 2").unwrap_err();
        assert_eq!(
            err.to_string(),
            "block 2: row 2 has 1 cells but the header has 2; every row of a table needs the header's width"
        );
        let rows: Vec<Value> = (0..50_000).map(|i| json!([i])).collect();
        let err = Workbook::parse(&json!({"sheets": [{"name": "Big", "rows": rows}]})).unwrap_err();
        assert_eq!(err.code(), "W-ARTIFACT-003");
        assert_eq!(a1("B2"), Some((1, 1)));
        assert_eq!(a1("AA10"), Some((9, 26)));
        assert_eq!(a1("2B"), None);
    }
}
