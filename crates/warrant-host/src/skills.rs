//! Agent Skills as the front ends see them: the catalog with each skill's state, one skill in
//! full, verify, a reviewed install, remove, and the workspace's trust. Approvals (install,
//! trust, remove) are a person's: refused from a process a Warrant run started, and each is
//! recorded in the audit trail as a run of its own. The run's side (the pinned catalog and
//! `activate_skill`) is wired in [`Host::skill_pins`] and the toolbox.

use std::path::{Path, PathBuf};

use serde::Serialize;
use warrant_kernel::skills::SkillPin;
use warrant_skills::catalog::{Installed, Ledger, TrustList, Trusted};
use warrant_skills::install::{Approval, Review, Staged};
use warrant_skills::{Catalog, Entry, SKILL_FILE, SkillError, Status};
use warrant_tools::ToolSource;

use crate::{Host, HostError, Result};

/// A skills error for the front end: its code, its message and what to do next.
pub fn host_error(e: &SkillError) -> HostError {
    let message = match e.next_step() {
        Some(h) => format!("{e}\n  hint: {h}"),
        None => e.to_string(),
    };
    HostError::usage(warrant_core::Coded::code(e), message)
}

/// The source of `activate_skill`, composed into a run's tools when it has skills: the
/// usable skills as this process found them.
#[derive(Debug)]
pub struct SkillTools(pub Vec<SkillPin>);

impl ToolSource for SkillTools {
    fn name(&self) -> &str {
        "skills"
    }
    fn tools(&self) -> Vec<Box<dyn warrant_kernel::Tool>> {
        vec![Box::new(warrant_skills::tool::ActivateSkill::new(
            self.0.clone(),
        ))]
    }
}

/// `skills show`: a skill's entry, its files (scripts marked) and its install record.
#[derive(Clone, Debug, Serialize)]
pub struct SkillView {
    #[serde(flatten)]
    pub entry: Entry,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    pub files: Vec<warrant_skills::skill::SkillFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub installed: Option<Installed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// One installed skill as `verify` checks it.
#[derive(Clone, Debug, Serialize)]
pub struct Verified {
    pub name: String,
    /// `ok`, `changed`, `missing` (recorded, directory gone), `not_installed` (a directory
    /// never approved) or `invalid`.
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// `skills verify`.
#[derive(Clone, Debug, Serialize)]
pub struct VerifyView {
    pub ok: bool,
    pub skills: Vec<Verified>,
}

/// What an approval did, and the run that records it in the audit trail.
#[derive(Clone, Debug, Serialize)]
pub struct Recorded<T> {
    #[serde(flatten)]
    pub what: T,
    pub recorded_in: String,
}

/// A removal.
#[derive(Clone, Debug, Serialize)]
pub struct Removed {
    pub removed: String,
}

/// A trust decision.
#[derive(Clone, Debug, Serialize)]
pub struct TrustView {
    pub workspace: PathBuf,
    pub trusted: bool,
}

/// An install.
#[derive(Clone, Debug, Serialize)]
pub struct InstalledView {
    pub name: String,
    pub dir: PathBuf,
    #[serde(flatten)]
    pub record: Installed,
}

impl Host {
    fn skills_user_dir(&self) -> Result<&Path> {
        self.paths
            .user
            .as_deref()
            .ok_or_else(|| host_error(&SkillError::NoUserDir))
    }

    /// Where the installed skill `name` lives (`skills approve NAME` reviews it there); empty
    /// without a user configuration directory, which the review then reports.
    pub fn installed_skill_dir(&self, name: &str) -> PathBuf {
        self.paths
            .user
            .as_ref()
            .map(|u| u.join("skills").join(name))
            .unwrap_or_default()
    }

    fn canonical_workspace(&self) -> PathBuf {
        std::fs::canonicalize(&self.paths.workspace)
            .unwrap_or_else(|_| self.paths.workspace.clone())
    }

    /// Every skill of every root, with its state (`skills list`).
    pub fn skills(&self) -> Result<Catalog> {
        Catalog::discover(&self.canonical_workspace(), self.paths.user.as_deref())
            .map_err(|e| host_error(&e))
    }

    /// The skills a run started now is offered. A catalog that cannot be read offers none
    /// (and says why).
    pub fn skill_pins(&self) -> Vec<SkillPin> {
        match self.skills() {
            Ok(c) => c.pins(),
            Err(e) => {
                self.inst.notices.notice(crate::Notice::SkillsUnavailable {
                    code: e.code,
                    error: e.message,
                });
                Vec::new()
            }
        }
    }

    /// The directories of the installed (user) skills whose files match the digest a person
    /// approved, as found now: what the ring marks `resource.in_installed_skill`. Project
    /// skills are not among them (they live in the workspace, under its own rules).
    pub(crate) fn verified_skill_dirs(&self) -> Vec<warrant_core::CanonicalPath> {
        let Ok(catalog) = self.skills() else {
            return Vec::new();
        };
        catalog
            .skills
            .iter()
            .filter(|e| {
                e.scope == warrant_kernel::skills::SkillScope::User && e.status == Status::Usable
            })
            .filter_map(|e| {
                warrant_core::CanonicalPath::from_normalized(&e.dir.to_string_lossy()).ok()
            })
            .collect()
    }

    /// `skills show NAME`.
    pub fn skill(&self, name: &str) -> Result<SkillView> {
        let catalog = self.skills()?;
        let Some(entry) = catalog.find(name).cloned() else {
            return Err(host_error(&SkillError::NotFound {
                name: name.to_owned(),
                where_: " in the project or user skill roots".to_owned(),
            }));
        };
        let installed = match (&entry.scope, self.paths.user.as_deref()) {
            (warrant_kernel::skills::SkillScope::User, Some(u)) => Ledger::load(u)
                .map_err(|e| host_error(&e))?
                .skills
                .get(name)
                .cloned(),
            _ => None,
        };
        let skill = entry.skill.clone();
        Ok(SkillView {
            license: skill.as_ref().and_then(|s| s.front.license.clone()),
            compatibility: skill.as_ref().and_then(|s| s.front.compatibility.clone()),
            files: skill.as_ref().map(|s| s.files.clone()).unwrap_or_default(),
            instructions: skill.map(|s| s.body),
            installed,
            entry,
        })
    }

    /// `skills verify`: every installed skill against what was approved.
    pub fn verify_skills(&self) -> Result<VerifyView> {
        let user = self.skills_user_dir()?;
        let ledger = Ledger::load(user).map_err(|e| host_error(&e))?;
        let catalog = self.skills()?;
        let mut out = Vec::new();
        for e in catalog
            .skills
            .iter()
            .filter(|e| e.scope == warrant_kernel::skills::SkillScope::User)
        {
            let rec = ledger.skills.get(&e.name);
            let (state, changed) = match e.status {
                Status::Usable | Status::Shadowed => ("ok", Vec::new()),
                Status::Changed => (
                    "changed",
                    match (rec, &e.skill) {
                        (Some(r), Some(s)) => warrant_skills::catalog::changed_files(&r.files, s),
                        _ => Vec::new(),
                    },
                ),
                Status::NotInstalled => ("not_installed", Vec::new()),
                Status::Invalid | Status::Untrusted => ("invalid", Vec::new()),
            };
            // An installed skill whose files no longer validate has changed too.
            let (state, changed) = if state == "invalid" && rec.is_some() {
                ("changed", vec![SKILL_FILE.to_owned()])
            } else {
                (state, changed)
            };
            out.push(Verified {
                name: e.name.clone(),
                state: state.to_owned(),
                approved: rec.map(|r| r.digest.clone()),
                now: e.digest.clone(),
                changed,
                code: e.reason.as_ref().map(|r| r.code.to_owned()),
            });
        }
        for (name, rec) in &ledger.skills {
            if !out.iter().any(|v| &v.name == name) {
                out.push(Verified {
                    name: name.clone(),
                    state: "missing".to_owned(),
                    approved: Some(rec.digest.clone()),
                    now: None,
                    changed: Vec::new(),
                    code: Some("W-SKILL-012".to_owned()),
                });
            }
        }
        Ok(VerifyView {
            ok: out.iter().all(|v| v.state == "ok"),
            skills: out,
        })
    }

    /// Reads `source` for review: everything `skills install` shows before asking.
    pub fn review_skill(&self, source: &Path) -> Result<(Staged, Review)> {
        let user = self.skills_user_dir()?;
        let root = user.join("skills");
        std::fs::create_dir_all(&root).map_err(|e| {
            host_error(&SkillError::Write {
                path: root.clone(),
                detail: e.to_string(),
            })
        })?;
        let staged = warrant_skills::install::stage(source, &root).map_err(|e| host_error(&e))?;
        let ledger = Ledger::load(user).map_err(|e| host_error(&e))?;
        let review = staged.review(&ledger);
        Ok((staged, review))
    }

    /// Installs what was reviewed, on a person's approval given `via` (`terminal` or
    /// `--yes`), and records it.
    pub fn install_skill(
        &self,
        staged: &Staged,
        shown_digest: &str,
        via: &str,
    ) -> Result<Recorded<InstalledView>> {
        self.a_person()?;
        let user = self.skills_user_dir()?;
        let approval = Approval {
            by: self.actor(),
            via: via.to_owned(),
            at: warrant_core::Clock::now(&warrant_core::SystemClock).rfc3339(),
        };
        let record = warrant_skills::install::commit(staged, shown_digest, user, &approval)
            .map_err(|e| host_error(&e))?;
        let name = staged.skill.front.name.clone();
        let run = self.record_skill_fact(format!(
            "skill `{name}` installed ({}) from {}, approved by {} via {via}",
            record.digest, record.source, approval.by
        ))?;
        Ok(Recorded {
            what: InstalledView {
                dir: user.join("skills").join(&name),
                name,
                record,
            },
            recorded_in: run,
        })
    }

    /// `skills remove NAME`.
    pub fn remove_skill(&self, name: &str) -> Result<Recorded<Removed>> {
        self.a_person()?;
        let user = self.skills_user_dir()?;
        let rec = warrant_skills::install::remove(name, user).map_err(|e| host_error(&e))?;
        let run = self.record_skill_fact(format!(
            "skill `{name}` removed ({}) by {}",
            rec.map(|r| r.digest)
                .unwrap_or_else(|| "never installed".to_owned()),
            self.actor()
        ))?;
        Ok(Recorded {
            what: Removed {
                removed: name.to_owned(),
            },
            recorded_in: run,
        })
    }

    /// `skills trust [--revoke]`: whether this workspace's project skills may be used.
    pub fn trust_workspace_skills(&self, trusted: bool) -> Result<Recorded<TrustView>> {
        self.a_person()?;
        let user = self.skills_user_dir()?;
        let ws = self.canonical_workspace();
        let mut list = TrustList::load(Some(user)).map_err(|e| host_error(&e))?;
        list.version = 1;
        let key = ws.to_string_lossy().into_owned();
        if trusted {
            list.workspaces.insert(
                key,
                Trusted {
                    at: warrant_core::Clock::now(&warrant_core::SystemClock).rfc3339(),
                    by: self.actor(),
                },
            );
        } else {
            list.workspaces.remove(&key);
        }
        list.save(user).map_err(|e| host_error(&e))?;
        let run = self.record_skill_fact(format!(
            "workspace {} {} for project skills by {}",
            ws.display(),
            if trusted {
                "trusted"
            } else {
                "no longer trusted"
            },
            self.actor()
        ))?;
        Ok(Recorded {
            what: TrustView {
                workspace: ws,
                trusted,
            },
            recorded_in: run,
        })
    }

    fn actor(&self) -> String {
        format!(
            "{}@{}",
            self.identity.principal.actor, self.identity.principal.tenant
        )
    }

    /// A process a run started is not a person.
    fn a_person(&self) -> Result<()> {
        if let warrant_kernel::Via::Command(evidence) = crate::origin::via() {
            return Err(host_error(&SkillError::FromCommand { evidence }));
        }
        Ok(())
    }

    /// Records a person's decision about skills in the audit trail: a run of its own whose
    /// task states it, completed at once.
    fn record_skill_fact(&self, task: String) -> Result<String> {
        let builtin: [&dyn ToolSource; 1] = [&warrant_tools::Builtin];
        let tools = crate::controls::tools(&self.settings, &builtin, None)?;
        let env = self.tool_env()?;
        let spec = self.new_run_spec(&tools, &env, "none:skills", task, None, false);
        let run = self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
            let mut state = ring.start(spec).map_err(|e| HostError::failed(&e))?;
            ring.end(&mut state, warrant_kernel::Outcome::Completed)
                .map_err(|e| HostError::failed(&e))?;
            Ok::<_, HostError>(state.run.to_string())
        });
        self.deliver();
        run
    }
}
