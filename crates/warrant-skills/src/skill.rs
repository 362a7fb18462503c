//! One skill directory: its SKILL.md parsed and validated strictly against the open spec
//! (agentskills.io/specification), and its files walked and digested. Strict means the spec's
//! six frontmatter fields only (client extensions such as Claude Code's are refused), names in
//! lower-case ASCII, and every violation reported with its code, not only the first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_yaml_ng::Value as Yaml;
use warrant_core::Digest;

use crate::error::{Problem, SkillError};

/// The one file every skill has, spelled exactly so (the client guide's rule).
pub const SKILL_FILE: &str = "SKILL.md";

/// The frontmatter fields of the open spec.
pub const FIELDS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

pub const MAX_NAME: usize = 64;
pub const MAX_DESCRIPTION: usize = 1024;
pub const MAX_COMPATIBILITY: usize = 500;
/// Bounds of what a skill directory may hold (the client guide bounds scans likewise).
pub const MAX_FILES: usize = 2000;
pub const MAX_DEPTH: usize = 8;
pub const MAX_BYTES: u64 = 50 * 1024 * 1024;

/// A SKILL.md's frontmatter, validated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Frontmatter {
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// `allowed-tools`, split on spaces: a request, never a grant.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
}

/// One file of a skill.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkillFile {
    /// Relative to the skill's directory, `/`-separated.
    pub path: String,
    pub size: u64,
    pub digest: String,
    /// Code the agent may run: under `scripts/`, executable, or starting with `#!`.
    pub script: bool,
}

/// A skill read from its directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skill {
    #[serde(flatten)]
    pub front: Frontmatter,
    pub dir: PathBuf,
    /// SKILL.md after its frontmatter: the instructions activation loads.
    #[serde(skip)]
    pub body: String,
    pub files: Vec<SkillFile>,
    /// `sha256:<hex>` over the canonical JSON of `{path: file digest}` for every file.
    pub digest: String,
}

impl Skill {
    /// Reads and validates the skill in `dir` (its name must be `dir`'s last component).
    pub fn load(dir: &Path) -> Result<Self, SkillError> {
        let file = dir.join(SKILL_FILE);
        let text = std::fs::read_to_string(&file).map_err(|e| SkillError::Unreadable {
            path: file.clone(),
            detail: if e.kind() == std::io::ErrorKind::NotFound {
                format!("there is no {SKILL_FILE} in {}", dir.display())
            } else {
                e.to_string()
            },
        })?;
        let dir_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (front, body) = parse(&text, &dir_name).map_err(|problems| SkillError::Invalid {
            path: file.clone(),
            problems,
        })?;
        let files = walk(dir)?;
        let digest = digest(&files);
        Ok(Self {
            front,
            dir: dir.to_path_buf(),
            body,
            files,
            digest,
        })
    }
}

/// The digest of a skill's files: one value for the whole tree.
pub fn digest(files: &[SkillFile]) -> String {
    let map: BTreeMap<&str, &str> = files
        .iter()
        .map(|f| (f.path.as_str(), f.digest.as_str()))
        .collect();
    warrant_core::digest_of(&map)
        .map(|d| d.to_string())
        .unwrap_or_default()
}

fn problem(code: &'static str, message: String) -> Problem {
    Problem { code, message }
}

/// Splits a SKILL.md into its frontmatter (between a first line `---` and the next `---`
/// line) and body, and validates the frontmatter. `dir_name` is the directory the skill is in.
pub fn parse(text: &str, dir_name: &str) -> Result<(Frontmatter, String), Vec<Problem>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let opens = lines.next().is_some_and(|l| l.trim_end() == "---");
    let mut yaml = String::new();
    let mut closed = false;
    if opens {
        for line in lines.by_ref() {
            if line.trim_end() == "---" {
                closed = true;
                break;
            }
            yaml.push_str(line);
        }
    }
    if !closed {
        return Err(vec![problem(
            "W-SKILL-002",
            format!(
                "{SKILL_FILE} has no frontmatter: it must start with a line `---`, then YAML with at least `name` and `description`, then a line `---`"
            ),
        )]);
    }
    let body: String = lines.collect();
    let front = frontmatter(&yaml, dir_name)?;
    Ok((front, body.trim().to_owned()))
}

fn frontmatter(yaml: &str, dir_name: &str) -> Result<Frontmatter, Vec<Problem>> {
    let value: Yaml = serde_yaml_ng::from_str(yaml).map_err(|e| {
        let text = e.to_string();
        vec![if text.contains("duplicate entry") {
            problem(
                "W-SKILL-004",
                format!("the frontmatter has a duplicate key ({text}); each key may appear once"),
            )
        } else {
            problem(
                "W-SKILL-003",
                format!("the frontmatter is not valid YAML: {text}"),
            )
        }]
    })?;
    let Yaml::Mapping(map) = value else {
        return Err(vec![problem(
            "W-SKILL-003",
            "the frontmatter must be a YAML mapping of fields".to_owned(),
        )]);
    };
    let mut problems = Vec::new();
    let mut fields: BTreeMap<String, Yaml> = BTreeMap::new();
    for (k, v) in map {
        let Yaml::String(key) = k else {
            problems.push(problem(
                "W-SKILL-005",
                format!("frontmatter key {k:?} is not a string"),
            ));
            continue;
        };
        if FIELDS.contains(&key.as_str()) {
            fields.insert(key, v);
        } else {
            problems.push(problem(
                "W-SKILL-005",
                format!(
                    "unexpected field `{key}` in the frontmatter: the open spec allows only {} (client extensions are not accepted)",
                    FIELDS.join(", ")
                ),
            ));
        }
    }
    let string = |key: &str, problems: &mut Vec<Problem>, code: &'static str| match fields.get(key)
    {
        None | Some(Yaml::Null) => None,
        Some(Yaml::String(s)) => Some(s.clone()),
        Some(_) => {
            problems.push(problem(code, format!("`{key}` must be a string")));
            None
        }
    };
    let name = string("name", &mut problems, "W-SKILL-006").unwrap_or_default();
    if !fields.contains_key("name") {
        problems.push(problem("W-SKILL-006", "`name` is required".to_owned()));
    } else {
        for p in name_problems(&name) {
            problems.push(problem("W-SKILL-006", p));
        }
        if name_problems(&name).is_empty() && name != dir_name {
            problems.push(problem(
                "W-SKILL-007",
                format!("`name` is `{name}` but the skill's directory is `{dir_name}`: they must be equal"),
            ));
        }
    }
    let description = string("description", &mut problems, "W-SKILL-008").unwrap_or_default();
    let chars = description.chars().count();
    if description.trim().is_empty() {
        problems.push(problem(
            "W-SKILL-008",
            "`description` is required and must not be empty: say what the skill does and when to use it".to_owned(),
        ));
    } else if chars > MAX_DESCRIPTION {
        problems.push(problem(
            "W-SKILL-008",
            format!("`description` has {chars} characters; at most {MAX_DESCRIPTION}"),
        ));
    }
    let license = string("license", &mut problems, "W-SKILL-009");
    if license.as_deref().is_some_and(|l| l.trim().is_empty()) {
        problems.push(problem("W-SKILL-009", "`license` is empty".to_owned()));
    }
    let compatibility = string("compatibility", &mut problems, "W-SKILL-009");
    if let Some(c) = &compatibility {
        let n = c.chars().count();
        if c.trim().is_empty() || n > MAX_COMPATIBILITY {
            problems.push(problem(
                "W-SKILL-009",
                format!(
                    "`compatibility` must have 1 to {MAX_COMPATIBILITY} characters (it has {n})"
                ),
            ));
        }
    }
    let mut metadata = BTreeMap::new();
    match fields.get("metadata") {
        None | Some(Yaml::Null) => {}
        Some(Yaml::Mapping(m)) => {
            for (k, v) in m {
                let value = match v {
                    Yaml::String(s) => Some(s.clone()),
                    Yaml::Number(n) => Some(n.to_string()),
                    Yaml::Bool(b) => Some(b.to_string()),
                    Yaml::Null | Yaml::Sequence(_) | Yaml::Mapping(_) | Yaml::Tagged(_) => None,
                };
                match (k, value) {
                    (Yaml::String(k), Some(v)) => {
                        metadata.insert(k.clone(), v);
                    }
                    (k, _) => problems.push(problem(
                        "W-SKILL-009",
                        format!("`metadata` maps strings to strings; {k:?} does not"),
                    )),
                }
            }
        }
        Some(_) => problems.push(problem(
            "W-SKILL-009",
            "`metadata` must be a mapping of strings to strings".to_owned(),
        )),
    }
    // Warrant's one key in the client-specific map: the skill's effect-class ceiling.
    if let Some(c) = metadata.get(warrant_kernel::skills::CEILING_KEY)
        && warrant_core::RiskClass::parse(c).is_none()
    {
        problems.push(problem(
            "W-SKILL-009",
            format!(
                "`metadata.{}` must be a risk class (read, change, external, destructive, secret, irreversible), not {c:?}",
                warrant_kernel::skills::CEILING_KEY
            ),
        ));
    }
    let allowed_tools = string("allowed-tools", &mut problems, "W-SKILL-009")
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Frontmatter {
        name,
        description,
        license,
        compatibility,
        metadata,
        allowed_tools,
    })
}

/// What is wrong with `name` under the strict reading of the spec: 1 to 64 characters of
/// lower-case ASCII letters, digits and `-`, not starting or ending with `-`, no `--`.
/// (The reference validator also accepts Unicode letters; the spec's prose says a-z, 0-9, and
/// names that look alike in other scripts are a spoofing risk, so Warrant takes ASCII only.)
pub fn name_problems(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let n = name.chars().count();
    if n == 0 || n > MAX_NAME {
        out.push(format!(
            "`name` must have 1 to {MAX_NAME} characters (`{name}` has {n})"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        out.push(format!(
            "`name` `{name}` has {c:?}: only lower-case ASCII letters, digits and `-` are allowed"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        out.push(format!("`name` `{name}` must not start or end with `-`"));
    }
    if name.contains("--") {
        out.push(format!("`name` `{name}` must not contain `--`"));
    }
    out
}

/// Every file under `dir`, sorted by path, with its digest. A symbolic link or anything other
/// than a plain file or directory is refused: what was reviewed must be what is loaded.
pub fn walk(dir: &Path) -> Result<Vec<SkillFile>, SkillError> {
    let mut out = Vec::new();
    let mut total = 0u64;
    walk_into(dir, dir, 0, &mut out, &mut total)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn walk_into(
    root: &Path,
    dir: &Path,
    depth: usize,
    out: &mut Vec<SkillFile>,
    total: &mut u64,
) -> Result<(), SkillError> {
    let unreadable = |path: &Path, e: std::io::Error| SkillError::Unreadable {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    if depth > MAX_DEPTH {
        return Err(SkillError::Unsafe {
            path: dir.to_path_buf(),
            what: format!("directories nested deeper than {MAX_DEPTH}"),
        });
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| unreadable(dir, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| unreadable(dir, e))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        let meta = std::fs::symlink_metadata(&path).map_err(|err| unreadable(&path, err))?;
        let kind = meta.file_type();
        if kind.is_dir() {
            walk_into(root, &path, depth + 1, out, total)?;
        } else if kind.is_file() {
            if out.len() >= MAX_FILES {
                return Err(SkillError::Unsafe {
                    path: root.to_path_buf(),
                    what: format!("more than {MAX_FILES} files"),
                });
            }
            *total += meta.len();
            if *total > MAX_BYTES {
                return Err(SkillError::Unsafe {
                    path: root.to_path_buf(),
                    what: format!("more than {MAX_BYTES} bytes"),
                });
            }
            let bytes = std::fs::read(&path).map_err(|err| unreadable(&path, err))?;
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let executable = {
                use std::os::unix::fs::PermissionsExt;
                meta.permissions().mode() & 0o111 != 0
            };
            out.push(SkillFile {
                script: rel.starts_with("scripts/") || executable || bytes.starts_with(b"#!"),
                digest: Digest::of_bytes(&bytes).to_string(),
                size: meta.len(),
                path: rel,
            });
        } else {
            let what = if kind.is_symlink() {
                "a symbolic link"
            } else {
                "a special file"
            };
            return Err(SkillError::Unsafe {
                path,
                what: what.to_owned(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use pretty_assertions::assert_eq;

    use super::*;

    fn codes(text: &str, dir: &str) -> Vec<&'static str> {
        parse(text, dir)
            .err()
            .unwrap_or_default()
            .iter()
            .map(|p| p.code)
            .collect()
    }

    #[test]
    fn a_valid_skill_parses_with_its_optional_fields() {
        let text = "---\nname: pdf-tools\ndescription: Fill PDF forms. Use when a PDF form is mentioned.\nlicense: Apache-2.0\ncompatibility: needs python3\nmetadata:\n  author: ex\n  version: 1.0\nallowed-tools: Bash(git:*) Read\n---\n# Steps\nDo it.\n";
        let (front, body) = parse(text, "pdf-tools").unwrap();
        assert_eq!(
            front,
            Frontmatter {
                name: "pdf-tools".into(),
                description: "Fill PDF forms. Use when a PDF form is mentioned.".into(),
                license: Some("Apache-2.0".into()),
                compatibility: Some("needs python3".into()),
                metadata: [
                    ("author".into(), "ex".into()),
                    ("version".into(), "1.0".into())
                ]
                .into_iter()
                .collect(),
                allowed_tools: vec!["Bash(git:*)".into(), "Read".into()],
            }
        );
        assert_eq!(body, "# Steps\nDo it.");
    }

    #[test]
    fn every_violation_has_its_code() {
        let d = "description: d\n";
        let cases: Vec<(String, &str, Vec<&str>)> = vec![
            ("# no frontmatter\n".into(), "x", vec!["W-SKILL-002"]),
            ("---\nname: x\n".into(), "x", vec!["W-SKILL-002"]),
            ("---\nname: [x\n---\n".into(), "x", vec!["W-SKILL-003"]),
            ("---\n- a\n---\n".into(), "x", vec!["W-SKILL-003"]),
            (
                format!("---\nname: x\nname: y\n{d}---\n"),
                "x",
                vec!["W-SKILL-004"],
            ),
            (
                format!("---\nname: x\n{d}model: opus\n---\n"),
                "x",
                vec!["W-SKILL-005"],
            ),
            (
                format!("---\nname: PDF\n{d}---\n"),
                "PDF",
                vec!["W-SKILL-006"],
            ),
            (
                format!("---\nname: café\n{d}---\n"),
                "café",
                vec!["W-SKILL-006"],
            ),
            (
                format!("---\nname: -a\n{d}---\n"),
                "-a",
                vec!["W-SKILL-006"],
            ),
            (
                format!("---\nname: a--b\n{d}---\n"),
                "a--b",
                vec!["W-SKILL-006"],
            ),
            (
                format!("---\nname: {}\n{d}---\n", "a".repeat(65)),
                "a",
                vec!["W-SKILL-006"],
            ),
            (format!("---\n{d}---\n"), "x", vec!["W-SKILL-006"]),
            (format!("---\nname: x\n{d}---\n"), "y", vec!["W-SKILL-007"]),
            ("---\nname: x\n---\n".into(), "x", vec!["W-SKILL-008"]),
            (
                "---\nname: x\ndescription: '  '\n---\n".into(),
                "x",
                vec!["W-SKILL-008"],
            ),
            (
                format!("---\nname: x\ndescription: {}\n---\n", "d".repeat(1025)),
                "x",
                vec!["W-SKILL-008"],
            ),
            (
                format!("---\nname: x\n{d}compatibility: {}\n---\n", "c".repeat(501)),
                "x",
                vec!["W-SKILL-009"],
            ),
            (
                format!("---\nname: x\n{d}metadata: [a]\n---\n"),
                "x",
                vec!["W-SKILL-009"],
            ),
            (
                format!("---\nname: x\n{d}metadata:\n  a: [b]\n---\n"),
                "x",
                vec!["W-SKILL-009"],
            ),
            (
                format!("---\nname: x\n{d}allowed-tools: [Read]\n---\n"),
                "x",
                vec!["W-SKILL-009"],
            ),
            (
                format!("---\nname: x\n{d}metadata:\n  a: b\n  a: c\n---\n"),
                "x",
                vec!["W-SKILL-004"],
            ),
        ];
        for (text, dir, want) in cases {
            assert_eq!(codes(&text, dir), want, "{text}");
        }
    }

    #[test]
    fn the_digest_covers_every_file_and_marks_scripts() {
        let dir = tempfile::tempdir().unwrap();
        let s = dir.path().join("tidy");
        std::fs::create_dir_all(s.join("scripts")).unwrap();
        std::fs::write(
            s.join(SKILL_FILE),
            "---\nname: tidy\ndescription: d\n---\nbody\n",
        )
        .unwrap();
        std::fs::write(s.join("scripts/run.sh"), "echo hi\n").unwrap();
        std::fs::write(s.join("notes.txt"), "#!/bin/sh\n").unwrap();
        let a = Skill::load(&s).unwrap();
        assert_eq!(
            a.files
                .iter()
                .map(|f| (f.path.as_str(), f.script))
                .collect::<Vec<_>>(),
            vec![
                ("SKILL.md", false),
                ("notes.txt", true),
                ("scripts/run.sh", true)
            ]
        );
        std::fs::write(s.join("scripts/run.sh"), "echo bye\n").unwrap();
        assert_ne!(Skill::load(&s).unwrap().digest, a.digest);
        std::os::unix::fs::symlink("/etc/passwd", s.join("link")).unwrap();
        assert!(matches!(Skill::load(&s), Err(SkillError::Unsafe { .. })));
    }
}
