//! Open Agent Profile 1.0 (errata 1.0.1, maintenance baseline 1.0.2) for Warrant: find
//! profiles in their discovery roots, load and validate them (the spec's own support crate,
//! `open-agent-profile`, parses with duplicate-key rejection, checks the schema, the security
//! rules and computes the RFC 8785 digests), resolve `extends`, and turn a profile into the pin a
//! run works under ([`pin`]): a ceiling that can only narrow Warrant's policy. State deltas are
//! applied here too ([`delta`]), atomically and only after a revision check.
//!
//! A profile is a file anyone with write access can edit: nothing in it is a grant. These
//! "agent profiles" are not Warrant's subprocess profiles (`[profiles.*]`, the sandbox a
//! command runs in); the CLI calls them agent profiles wherever the two could be confused.

pub mod conformance;
pub mod delta;
pub mod diff;
mod error;
pub mod generate;
pub mod pin;
pub mod proposal;

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use open_agent_profile as oap;
use serde::Serialize;
use serde_json::Value;

pub use error::{Finding, OapError};

/// A parsed OAP document (a JSON object).
pub type Document = serde_json::Map<String, Value>;

/// Where profiles are looked for, most authoritative first (OAP §5.1 and the 1.0.2 baseline).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RootKind {
    /// `<managed dir>/agents/` (`$WARRANT_MANAGED_DIR`, default `/etc/warrant`).
    Managed,
    /// The harness's own user directory: `<user config dir>/agents/`.
    User,
    /// `~/.agentprofiles/`, the universal user root of the 1.0.2 baseline (after the
    /// harness-native one).
    Universal,
    /// `<workspace>/.agents/`.
    Project,
    /// `<skill>/agents/` of each skill a person installed and approved as it is (OAP §5.1's
    /// plugin or package root): the last root, so a plugin never shadows another profile.
    Plugin,
}

impl RootKind {
    /// `metadata.trust` as the resolver assigns it (L1-I4): never what the file says.
    pub fn trust(self) -> &'static str {
        match self {
            Self::Managed => "managed",
            Self::User | Self::Universal => "user",
            Self::Project => "project",
            // Written elsewhere and brought in by a package: trusted no more than a file
            // fetched from elsewhere, even though a person approved the package's files.
            Self::Plugin => "imported",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Managed => "managed",
            Self::User => "user",
            Self::Universal => "universal user (~/.agentprofiles)",
            Self::Project => "project",
            Self::Plugin => "plugin (an installed skill's agents/)",
        }
    }
}

/// One discovery root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Root {
    pub kind: RootKind,
    pub dir: PathBuf,
}

/// The discovery roots of an installation, most authoritative first.
pub fn roots(
    managed: &Path,
    user: Option<&Path>,
    home: Option<&Path>,
    workspace: &Path,
) -> Vec<Root> {
    let mut v = vec![Root {
        kind: RootKind::Managed,
        dir: managed.join("agents"),
    }];
    if let Some(u) = user {
        v.push(Root {
            kind: RootKind::User,
            dir: u.join("agents"),
        });
    }
    if let Some(h) = home {
        v.push(Root {
            kind: RootKind::Universal,
            dir: h.join(".agentprofiles"),
        });
    }
    v.push(Root {
        kind: RootKind::Project,
        dir: workspace.join(".agents"),
    });
    v
}

/// `roots` followed by a plugin root for each package directory in `packages` (an installed
/// skill that a person approved as its files are now): its `agents/`, in the order given.
pub fn with_plugins(mut roots: Vec<Root>, packages: &[PathBuf]) -> Vec<Root> {
    roots.extend(packages.iter().map(|p| Root {
        kind: RootKind::Plugin,
        dir: p.join("agents"),
    }));
    roots
}

/// The encodings, by file name: `.agent.yaml`/`.agent.yml`, `.agent.json`, `.agent.md`.
pub fn is_profile_file(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    [".agent.yaml", ".agent.yml", ".agent.json", ".agent.md"]
        .iter()
        .any(|s| name.ends_with(s))
}

fn format_of(path: &Path) -> oap::OapFormat {
    oap::OapFormat::from_path(path)
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// Reads and parses one document (any kind), duplicate keys refused.
pub fn parse_file(path: &Path) -> Result<Document, OapError> {
    let text = std::fs::read_to_string(path).map_err(|e| OapError::Read {
        path: shown(path),
        message: e.to_string(),
    })?;
    parse_text(&text, path)
}

/// Parses `text` in the encoding `path`'s name says.
pub fn parse_text(text: &str, path: &Path) -> Result<Document, OapError> {
    // The support crate splits Markdown frontmatter on `\n` only.
    let text = text.replace("\r\n", "\n");
    let doc = oap::parse(&text, format_of(path)).map_err(|e| OapError::Parse {
        path: shown(path),
        message: e.0,
    })?;
    if let Some(v) = doc.get("oap").and_then(Value::as_str)
        && v != "1.0"
    {
        return Err(OapError::Version {
            path: shown(path),
            version: v.to_owned(),
        });
    }
    Ok(doc)
}

/// What validating a document found: every error and warning with its pointer, and the
/// digests of a valid profile.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub path: String,
    pub kind: String,
    pub ok: bool,
    pub errors: Vec<Finding>,
    pub warnings: Vec<Finding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_digest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_digest: Option<String>,
}

fn findings(issues: Vec<oap::Issue>) -> Vec<Finding> {
    issues
        .into_iter()
        .map(|i| Finding {
            pointer: i.pointer,
            message: i.message,
        })
        .collect()
}

/// Validates a parsed document: schema, security rules (literal secrets, traversal, pointer
/// scope of deltas) and the semantic checks of the support crate.
pub fn check(doc: &Document, path: &Path) -> Report {
    let r = oap::validate(doc, Some(path));
    Report {
        path: shown(path),
        kind: r.kind,
        ok: r.ok,
        errors: findings(r.errors),
        warnings: findings(r.warnings),
        profile_digest: r.digests.as_ref().map(|d| d.profile.clone()),
        spec_digest: r.digests.map(|d| d.spec),
    }
}

/// Validates a file; a file that cannot be read or parsed is a report with one error.
pub fn validate_file(path: &Path) -> Report {
    match parse_file(path) {
        Ok(doc) => check(&doc, path),
        Err(e) => Report {
            path: shown(path),
            kind: String::new(),
            ok: false,
            errors: vec![Finding {
                pointer: if matches!(e, OapError::Version { .. }) {
                    "/oap".to_owned()
                } else {
                    String::new()
                },
                message: format!("{} ({})", e, e.code()),
            }],
            warnings: vec![],
            profile_digest: None,
            spec_digest: None,
        },
    }
}

/// Loads a profile and refuses it unless it is a valid `AgentProfile` (L1-P2).
pub fn load_profile(path: &Path) -> Result<(Document, Report), OapError> {
    let doc = parse_file(path)?;
    let report = check(&doc, path);
    if !report.ok || report.kind != "AgentProfile" {
        let mut findings = report.errors.clone();
        if findings.is_empty() {
            findings.push(Finding {
                pointer: "/kind".into(),
                message: format!("`{}` where an AgentProfile was expected", report.kind),
            });
        }
        return Err(OapError::Invalid {
            path: shown(path),
            kind: "AgentProfile".into(),
            findings,
        });
    }
    Ok((doc, report))
}

/// A profile found in a root.
#[derive(Clone, Debug, Serialize)]
pub struct Found {
    pub name: String,
    pub path: PathBuf,
    pub root: RootKind,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
}

/// A profile of a lower root hidden by one of the same name in a higher one (reported, L1-D3).
#[derive(Clone, Debug, Serialize)]
pub struct Shadowed {
    pub name: String,
    pub path: PathBuf,
    pub root: RootKind,
    pub by: PathBuf,
}

/// A file in a root that could not be listed, or a name used twice in one root.
#[derive(Clone, Debug, Serialize)]
pub struct Problem {
    pub path: PathBuf,
    pub code: String,
    pub message: String,
}

/// Every profile of every root, collisions decided and reported. Nothing is validated in
/// full here and nothing is written (resolution is side-effect free, L1-I11).
#[derive(Clone, Debug, Serialize)]
pub struct Catalog {
    pub roots: Vec<Root>,
    pub profiles: Vec<Found>,
    pub shadowed: Vec<Shadowed>,
    pub problems: Vec<Problem>,
    /// Names that are ambiguous within one root: resolving them fails (L1-D2).
    #[serde(skip)]
    collisions: Vec<(String, OapError)>,
}

fn name_of(doc: &Document) -> Option<String> {
    doc.get("metadata")?
        .get("name")?
        .as_str()
        .map(str::to_owned)
}

impl Catalog {
    pub fn discover(roots: Vec<Root>) -> Catalog {
        let mut profiles: Vec<Found> = Vec::new();
        let mut shadowed = Vec::new();
        let mut problems = Vec::new();
        let mut collisions = Vec::new();
        for root in &roots {
            let Ok(entries) = std::fs::read_dir(&root.dir) else {
                continue;
            };
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && is_profile_file(p))
                .collect();
            files.sort();
            let mut here: Vec<Found> = Vec::new();
            for path in files {
                let doc = match parse_file(&path) {
                    Ok(d) => d,
                    Err(e) => {
                        problems.push(Problem {
                            path,
                            code: e.code().into(),
                            message: e.to_string(),
                        });
                        continue;
                    }
                };
                // metadata.name wins over the file name (L1-D4); the validator warns.
                let Some(name) = name_of(&doc) else {
                    problems.push(Problem {
                        path,
                        code: "W-OAP-004".into(),
                        message: "metadata.name is missing".into(),
                    });
                    continue;
                };
                if let Some(first) = here.iter().find(|f| f.name == name) {
                    let e = OapError::Collision {
                        name: name.clone(),
                        root: root.kind.label().into(),
                        first: shown(&first.path),
                        second: shown(&path),
                    };
                    problems.push(Problem {
                        path: path.clone(),
                        code: e.code().into(),
                        message: e.to_string(),
                    });
                    collisions.push((name, e));
                    continue;
                }
                let meta = doc.get("metadata");
                here.push(Found {
                    name,
                    description: meta
                        .and_then(|m| m.get("description"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    revision: meta.and_then(|m| m.get("revision")).and_then(Value::as_u64),
                    path,
                    root: root.kind,
                });
            }
            for f in here {
                if let Some(winner) = profiles.iter().find(|w| w.name == f.name) {
                    shadowed.push(Shadowed {
                        name: f.name.clone(),
                        path: f.path.clone(),
                        root: f.root,
                        by: winner.path.clone(),
                    });
                } else {
                    profiles.push(f);
                }
            }
        }
        profiles.sort_by(|a, b| a.name.cmp(&b.name));
        Catalog {
            roots,
            profiles,
            shadowed,
            problems,
            collisions,
        }
    }

    fn roots_shown(&self) -> String {
        self.roots
            .iter()
            .map(|r| shown(&r.dir))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The profile `name` resolves to, or why none does.
    pub fn find(&self, name: &str) -> Result<&Found, OapError> {
        // An ambiguous name in a root above the winner (or the winner's own) is an error.
        if let Some((_, e)) = self.collisions.iter().find(|(n, _)| n == name) {
            return Err(e.clone());
        }
        self.profiles
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| OapError::NotFound {
                name: name.to_owned(),
                roots: self.roots_shown(),
            })
    }

    /// Loads and resolves `name_or_file`: a name in the roots, or a path to a profile file.
    pub fn resolve(&self, name_or_file: &str) -> Result<Resolved, OapError> {
        let as_path = Path::new(name_or_file);
        let (path, root) = if is_profile_file(as_path) && as_path.is_file() {
            // A file named on the command line is trusted as what it is: imported.
            (as_path.to_path_buf(), None)
        } else {
            let f = self.find(name_or_file)?;
            (f.path.clone(), Some(f.root))
        };
        let (doc, report) = load_profile(&path)?;
        let name = name_of(&doc).unwrap_or_default();
        let mut chain = Vec::new();
        let failure: RefCell<Option<OapError>> = RefCell::new(None);
        let effective = oap::resolve_composition(&doc, |reference| {
            chain.push(reference.name.clone());
            let loaded = self
                .find(&reference.name)
                .and_then(|f| load_profile(&f.path).map(|(d, _)| d));
            match loaded {
                Ok(d) => Ok(d),
                Err(e) => {
                    let message = e.to_string();
                    failure.borrow_mut().get_or_insert(e);
                    Err(oap::CompositionError::Load(message))
                }
            }
        })
        .map_err(|e| {
            if let Some(f) = failure.borrow_mut().take() {
                return f;
            }
            match e {
                oap::CompositionError::Cycle => OapError::Cycle {
                    name: name.clone(),
                    chain: std::iter::once(name.clone())
                        .chain(chain.iter().cloned())
                        .collect::<Vec<_>>()
                        .join(" -> "),
                },
                oap::CompositionError::Depth => OapError::Depth { name: name.clone() },
                oap::CompositionError::Revision(base) => OapError::Pin {
                    name: name.clone(),
                    pin: "a revision".into(),
                    found: "another revision".into(),
                    base,
                },
                oap::CompositionError::Digest(base) => OapError::Pin {
                    name: name.clone(),
                    pin: "a spec digest".into(),
                    found: "another digest".into(),
                    base,
                },
                oap::CompositionError::Load(message) => OapError::Apply {
                    name: name.clone(),
                    message: format!("extends could not be resolved: {message}"),
                },
                oap::CompositionError::MissingName => OapError::Apply {
                    name: name.clone(),
                    message: "a profile in its extends chain has no name".into(),
                },
            }
        })?;
        // The merged result is checked again: narrowing applies to it (L3-E2).
        let merged = check(&effective, &path);
        if !merged.ok {
            return Err(OapError::Invalid {
                path: format!("{} (merged with its bases)", shown(&path)),
                kind: "AgentProfile".into(),
                findings: merged.errors,
            });
        }
        let mut effective = effective;
        // Trust comes from the root, never from the file (L1-I4).
        if let Some(m) = effective.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("trust");
        }
        let trust = root.map_or("imported", RootKind::trust).to_owned();
        Ok(Resolved {
            name,
            path,
            root,
            trust,
            revision: doc
                .get("metadata")
                .and_then(|m| m.get("revision"))
                .and_then(Value::as_u64)
                .unwrap_or(1),
            profile_digest: report.profile_digest.clone().unwrap_or_default(),
            spec_digest: report.spec_digest.clone().unwrap_or_default(),
            warnings: report.warnings,
            extends: chain,
            document: doc,
            effective,
        })
    }
}

/// A profile loaded, validated and with its `extends` merged.
#[derive(Clone, Debug, Serialize)]
pub struct Resolved {
    pub name: String,
    pub path: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<RootKind>,
    pub trust: String,
    pub revision: u64,
    pub profile_digest: String,
    pub spec_digest: String,
    pub warnings: Vec<Finding>,
    /// The bases merged in, in the order they were loaded.
    pub extends: Vec<String>,
    /// The file as written.
    #[serde(skip)]
    pub document: Document,
    /// The file merged with its bases (`extends`), trust removed: what the pin is made of.
    pub effective: Document,
}

/// RFC 8785 canonical JSON, as the digests hash it.
pub fn canonical(doc: &Document) -> Vec<u8> {
    oap::canonical_json(doc).unwrap_or_default()
}
