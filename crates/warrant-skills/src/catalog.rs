//! Discovery: which skills exist in the project and user roots, and which of them a run may
//! use. A project skill comes from a repository someone else may have written, so it is used
//! only in a workspace the person marked trusted; a user skill is used only as it was approved
//! at install (its digest in the install ledger), so a file changed since keeps it out until
//! a person approves it again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use warrant_kernel::skills::{SkillPin, SkillScope};

use crate::error::{Problem, SkillError};
use crate::skill::{SKILL_FILE, Skill};

/// The project roots, in the order they are searched: the open convention first, then the
/// location Claude Code made common (many skills are shipped there).
pub const PROJECT_ROOTS: [&str; 2] = [".agents/skills", ".claude/skills"];

/// The install ledger, inside the user skills root (a name starting with `.` can never be a
/// skill's).
pub const LEDGER: &str = ".installed.json";

/// The person's list of trusted workspaces, in the user configuration directory (never in a
/// workspace: a repository cannot vouch for itself).
pub const TRUST_FILE: &str = "trusted-workspaces.json";

/// One search root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Root {
    pub scope: SkillScope,
    pub dir: PathBuf,
}

/// Where skills are looked for: `<workspace>/.agents/skills/`, `<workspace>/.claude/skills/`
/// and `<user config dir>/skills/` (installed skills only).
pub fn roots(workspace: &Path, user: Option<&Path>) -> Vec<Root> {
    let mut v: Vec<Root> = PROJECT_ROOTS
        .iter()
        .map(|r| Root {
            scope: SkillScope::Project,
            dir: workspace.join(r),
        })
        .collect();
    if let Some(u) = user {
        v.push(Root {
            scope: SkillScope::User,
            dir: u.join("skills"),
        });
    }
    v
}

/// Whether a skill may be offered to a run, and if not why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Valid, and trusted (project) or approved as it is (user).
    Usable,
    /// Its SKILL.md breaks the spec, or its directory holds what a skill may not.
    Invalid,
    /// A project skill in a workspace the person has not marked trusted.
    Untrusted,
    /// A user skill whose files differ from what was approved at install.
    Changed,
    /// A directory in the user root that was never installed (approved) by a person.
    NotInstalled,
    /// Another skill of the same name wins (project over user; first root over later).
    Shadowed,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Self::Usable => "usable",
            Self::Invalid => "invalid",
            Self::Untrusted => "untrusted",
            Self::Changed => "changed",
            Self::NotInstalled => "not installed",
            Self::Shadowed => "shadowed",
        }
    }
}

/// One skill directory found in a root.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    pub name: String,
    pub scope: SkillScope,
    pub dir: PathBuf,
    pub status: Status,
    /// Why it is not usable (with the code), `None` when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Problem>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    #[serde(skip)]
    pub skill: Option<Skill>,
}

/// Every skill of every root, with the workspace's trust.
#[derive(Clone, Debug, Serialize)]
pub struct Catalog {
    pub workspace: PathBuf,
    pub workspace_trusted: bool,
    pub roots: Vec<Root>,
    pub skills: Vec<Entry>,
}

/// What a person approved when installing a skill.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    pub digest: String,
    /// Path → file digest, so that `verify` can say which file changed.
    pub files: BTreeMap<String, String>,
    pub source: String,
    pub installed_at: String,
    pub approved_by: String,
    /// `terminal` or `--yes`.
    pub via: String,
}

/// The install ledger.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    pub version: u32,
    pub skills: BTreeMap<String, Installed>,
}

impl Ledger {
    pub fn path(user: &Path) -> PathBuf {
        user.join("skills").join(LEDGER)
    }

    /// The ledger of `user`; empty when there is none yet.
    pub fn load(user: &Path) -> Result<Self, SkillError> {
        let path = Self::path(user);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| SkillError::Unreadable {
                path,
                detail: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self {
                version: 1,
                skills: BTreeMap::new(),
            }),
            Err(e) => Err(SkillError::Unreadable {
                path,
                detail: e.to_string(),
            }),
        }
    }

    pub fn save(&self, user: &Path) -> Result<(), SkillError> {
        write_atomic(&Self::path(user), self)
    }
}

/// A trusted workspace, with who trusted it and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trusted {
    pub at: String,
    pub by: String,
}

/// The person's trusted workspaces (canonical paths).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustList {
    pub version: u32,
    pub workspaces: BTreeMap<String, Trusted>,
}

impl TrustList {
    pub fn load(user: Option<&Path>) -> Result<Self, SkillError> {
        let Some(user) = user else {
            return Ok(Self::default());
        };
        let path = user.join(TRUST_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| SkillError::Unreadable {
                path,
                detail: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self {
                version: 1,
                workspaces: BTreeMap::new(),
            }),
            Err(e) => Err(SkillError::Unreadable {
                path,
                detail: e.to_string(),
            }),
        }
    }

    pub fn save(&self, user: &Path) -> Result<(), SkillError> {
        write_atomic(&user.join(TRUST_FILE), self)
    }

    pub fn trusts(&self, workspace: &Path) -> bool {
        self.workspaces
            .contains_key(workspace.to_string_lossy().as_ref())
    }
}

/// Writes `value` as JSON to `path` atomically: a temporary file beside it, synced, renamed.
pub fn write_atomic<T: Serialize>(path: &Path, value: &T) -> Result<(), SkillError> {
    let fail = |e: &dyn std::fmt::Display| SkillError::Write {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| fail(&e))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| fail(&e))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        use std::io::Write as _;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| fail(&e))
}

/// The files that differ between what was approved and what is there now.
pub fn changed_files(approved: &BTreeMap<String, String>, skill: &Skill) -> Vec<String> {
    let now: BTreeMap<&str, &str> = skill
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.digest.as_str()))
        .collect();
    let mut out: Vec<String> = approved
        .iter()
        .filter(|(p, d)| now.get(p.as_str()) != Some(&d.as_str()))
        .map(|(p, _)| {
            if now.contains_key(p.as_str()) {
                p.clone()
            } else {
                format!("{p} (removed)")
            }
        })
        .collect();
    out.extend(
        now.keys()
            .filter(|p| !approved.contains_key(**p))
            .map(|p| format!("{p} (added)")),
    );
    out
}

impl Catalog {
    /// Finds every skill under the roots of `workspace` (canonical) and `user`.
    pub fn discover(workspace: &Path, user: Option<&Path>) -> Result<Self, SkillError> {
        let trusted = TrustList::load(user)?.trusts(workspace);
        let ledger = match user {
            Some(u) => Ledger::load(u)?,
            None => Ledger::default(),
        };
        let roots = roots(workspace, user);
        let mut skills: Vec<Entry> = Vec::new();
        for root in &roots {
            let Ok(dirs) = std::fs::read_dir(&root.dir) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = dirs
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .collect();
            dirs.sort();
            for dir in dirs {
                if !dir.join(SKILL_FILE).exists() && root.scope == SkillScope::Project {
                    continue;
                }
                skills.push(entry(root.scope, &dir, trusted, &ledger));
            }
        }
        // Name collisions: the first found wins (project roots come first); the rest are
        // reported, never silently dropped.
        let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
        for e in &mut skills {
            if e.status != Status::Usable {
                continue;
            }
            if let Some(by) = seen.get(&e.name) {
                e.status = Status::Shadowed;
                e.reason = Some(Problem {
                    code: "W-SKILL-018",
                    message: format!("shadowed by the skill of the same name in {}", by.display()),
                });
            } else {
                seen.insert(e.name.clone(), e.dir.clone());
            }
        }
        Ok(Self {
            workspace: workspace.to_path_buf(),
            workspace_trusted: trusted,
            roots,
            skills,
        })
    }

    /// The skills a run may be offered, as its pin.
    pub fn pins(&self) -> Vec<SkillPin> {
        self.skills
            .iter()
            .filter(|e| e.status == Status::Usable)
            .filter_map(|e| {
                let s = e.skill.as_ref()?;
                Some(SkillPin {
                    name: s.front.name.clone(),
                    description: s.front.description.clone(),
                    scope: e.scope,
                    dir: s.dir.to_string_lossy().into_owned(),
                    digest: s.digest.clone(),
                    allowed_tools: s.front.allowed_tools.clone(),
                    // Checked when the skill was read (W-SKILL-009 otherwise).
                    ceiling: s
                        .front
                        .metadata
                        .get(warrant_kernel::skills::CEILING_KEY)
                        .and_then(|c| warrant_core::RiskClass::parse(c)),
                })
            })
            .collect()
    }

    /// The entry a name designates: the usable one first, else the first found.
    pub fn find(&self, name: &str) -> Option<&Entry> {
        self.skills
            .iter()
            .find(|e| e.name == name && e.status == Status::Usable)
            .or_else(|| self.skills.iter().find(|e| e.name == name))
    }
}

fn entry(scope: SkillScope, dir: &Path, trusted: bool, ledger: &Ledger) -> Entry {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Canonical, so that the pin names the real place (a root may be reached through a link).
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut e = Entry {
        name: name.clone(),
        scope,
        dir: dir.clone(),
        status: Status::Usable,
        reason: None,
        description: None,
        digest: None,
        allowed_tools: Vec::new(),
        skill: None,
    };
    let loaded = Skill::load(&dir);
    let skill = match loaded {
        Ok(s) => s,
        Err(err) => {
            e.status = Status::Invalid;
            let single = if let SkillError::Invalid { problems, .. } = &err {
                problems.first().filter(|_| problems.len() == 1).cloned()
            } else {
                None
            };
            e.reason = Some(single.unwrap_or_else(|| Problem {
                code: warrant_core::Coded::code(&err),
                message: err.to_string(),
            }));
            return e;
        }
    };
    e.description = Some(skill.front.description.clone());
    e.digest = Some(skill.digest.clone());
    e.allowed_tools = skill.front.allowed_tools.clone();
    match scope {
        SkillScope::Project if !trusted => {
            e.status = Status::Untrusted;
            e.reason = Some(Problem {
                code: "W-SKILL-017",
                message: "a project skill, and this workspace is not marked trusted (`warrant skills trust`): not loaded".to_owned(),
            });
        }
        SkillScope::Project => {}
        SkillScope::User => match ledger.skills.get(&name) {
            None => {
                e.status = Status::NotInstalled;
                e.reason = Some(Problem {
                    code: "W-SKILL-013",
                    message: "in the user skills directory but never approved by a person: install it with `warrant skills install`".to_owned(),
                });
            }
            Some(rec) if rec.digest != skill.digest => {
                let err = SkillError::Changed {
                    name: name.clone(),
                    approved: rec.digest.clone(),
                    now: skill.digest.clone(),
                    files: changed_files(&rec.files, &skill),
                };
                e.status = Status::Changed;
                e.reason = Some(Problem {
                    code: "W-SKILL-010",
                    message: format!("{err}: not loaded until a person approves it again"),
                });
            }
            Some(_) => {}
        },
    }
    e.skill = Some(skill);
    e
}
