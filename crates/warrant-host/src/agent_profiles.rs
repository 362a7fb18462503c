//! Agent profiles (Open Agent Profile 1.0) as the front ends see them: list the roots, show a
//! profile with what it would allow in this installation, validate, digest, diff, apply a state
//! delta, and pin one for a run. Not to be confused with subprocess profiles (`[profiles.*]`,
//! the sandbox a command runs in): those are `Settings::profiles`.

use std::path::{Path, PathBuf};

use serde::Serialize;
use warrant_kernel::agent_profile::{Adjustment, Ceiling, Family, ProfilePin};
use warrant_oap::delta::{Applied, ApplyAs, Proposal};
use warrant_oap::diff::Change;
use warrant_oap::pin::RunLimits;
use warrant_oap::{Catalog, OapError, Report, Resolved};

use crate::{Host, HostError, Result};

/// An OAP error for the front end: its code, its message and what to do next.
pub fn host_error(e: &OapError) -> HostError {
    let message = match e.hint() {
        Some(h) => format!("{e}\n  hint: {h}"),
        None => e.to_string(),
    };
    HostError::usage(e.code(), message)
}

/// Validates a file of any OAP kind; needs no installation.
pub fn validate(file: &Path) -> Report {
    warrant_oap::validate_file(file)
}

/// What `profiles show` prints: the profile, where it came from, and what it allows a run of
/// this installation (each tool and family of actions: `deny < ask < allow`, before policy,
/// which still decides every call and can only narrow further).
#[derive(Clone, Debug, Serialize)]
pub struct ProfileView {
    pub name: String,
    pub path: PathBuf,
    pub trust: String,
    pub revision: u64,
    pub profile_digest: String,
    pub spec_digest: String,
    pub extends: Vec<String>,
    pub description: String,
    pub tools: std::collections::BTreeMap<String, Ceiling>,
    pub families: std::collections::BTreeMap<Family, Ceiling>,
    pub adjustments: Vec<Adjustment>,
    pub warnings: Vec<warrant_oap::Finding>,
    /// The profile's part of the system prompt, in the spec's order.
    pub prompt: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// A profile's identities.
#[derive(Clone, Debug, Serialize)]
pub struct Digests {
    pub name: String,
    pub path: PathBuf,
    pub revision: u64,
    pub profile_digest: String,
    pub spec_digest: String,
}

/// The differences between two profiles (each a name or a file).
#[derive(Clone, Debug, Serialize)]
pub struct ProfileDiff {
    pub from: String,
    pub to: String,
    pub changes: Vec<Change>,
    /// Some change could widen what the agent may do (review it as high risk).
    pub widens: bool,
}

/// A proposal of an applied delta, waiting for a person.
#[derive(Clone, Debug, Serialize)]
pub struct PendingProposal {
    pub id: String,
    pub profile: String,
    pub revision: u64,
    pub session: String,
    #[serde(flatten)]
    pub proposal: Proposal,
}

/// What applying a delta did, with the proposals it queued for a person.
#[derive(Clone, Debug, Serialize)]
pub struct AppliedView {
    #[serde(flatten)]
    pub applied: Applied,
    pub queued: Vec<String>,
}

impl Host {
    /// The discovery roots of this installation, most authoritative first; the plugin roots
    /// last: the `agents/` of each installed skill whose files are the ones a person approved
    /// (`warrant skills install` showed every file, these included; a changed skill brings
    /// no profile until it is approved again).
    pub fn agent_profile_roots(&self) -> Vec<warrant_oap::Root> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let roots = warrant_oap::roots(
            &self.paths.managed,
            self.paths.user.as_deref(),
            home.as_deref(),
            &self.paths.workspace,
        );
        let packages: Vec<PathBuf> = self
            .verified_skill_dirs()
            .iter()
            .map(|d| PathBuf::from(d.as_str()))
            .collect();
        warrant_oap::with_plugins(roots, &packages)
    }

    /// Every agent profile of every root (nothing validated in full, nothing written).
    pub fn agent_profiles(&self) -> Catalog {
        Catalog::discover(self.agent_profile_roots())
    }

    fn resolve_profile(&self, name_or_file: &str) -> Result<Resolved> {
        self.agent_profiles()
            .resolve(name_or_file)
            .map_err(|e| host_error(&e))
    }

    /// The pin of `name_or_file` for a run with `tools` and `model`, or why there is none.
    pub fn pin_agent_profile(
        &self,
        name_or_file: &str,
        tools: &[String],
        model: &str,
    ) -> Result<(ProfilePin, RunLimits)> {
        let r = self.resolve_profile(name_or_file)?;
        warrant_oap::pin::pin(
            &r,
            &self.paths.workspace,
            tools,
            model,
            &self.profile_installation(),
        )
        .map_err(|e| host_error(&e))
    }

    /// What a profile may attach here: the usable skills and the operator's MCP servers.
    fn profile_installation(&self) -> warrant_oap::pin::Installation {
        warrant_oap::pin::Installation {
            skills: self.skill_pins(),
            mcp_servers: self.settings.mcp.servers.clone(),
        }
    }

    /// `profiles show`.
    pub fn agent_profile(&self, name_or_file: &str) -> Result<ProfileView> {
        let r = self.resolve_profile(name_or_file)?;
        let tools: Vec<String> = warrant_kernel::ToolRegistry::specs(&self.tools()?)
            .iter()
            .map(|s| s.name.clone())
            .collect();
        let (pin, _) = warrant_oap::pin::pin(
            &r,
            &self.paths.workspace,
            &tools,
            "",
            &self.profile_installation(),
        )
        .map_err(|e| host_error(&e))?;
        Ok(ProfileView {
            description: r
                .effective
                .get("metadata")
                .and_then(|m| m.get("description"))
                .and_then(|d| d.as_str())
                .unwrap_or_default()
                .to_owned(),
            name: r.name,
            path: r.path,
            trust: r.trust,
            revision: r.revision,
            profile_digest: r.profile_digest,
            spec_digest: r.spec_digest,
            extends: r.extends,
            tools: pin.tools,
            families: pin.families,
            adjustments: pin
                .adjustments
                .into_iter()
                .filter(|a| a.field != "model")
                .collect(),
            warnings: r.warnings,
            prompt: pin.prompt,
            state: pin.state,
        })
    }

    /// `profiles digest`.
    pub fn agent_profile_digest(&self, name_or_file: &str) -> Result<Digests> {
        let r = self.resolve_profile(name_or_file)?;
        Ok(Digests {
            name: r.name,
            path: r.path,
            revision: r.revision,
            profile_digest: r.profile_digest,
            spec_digest: r.spec_digest,
        })
    }

    /// `profiles diff A B`: each a name or a file, compared as written (not merged).
    pub fn agent_profile_diff(&self, a: &str, b: &str) -> Result<ProfileDiff> {
        let doc =
            |x: &str| -> Result<warrant_oap::Document> { Ok(self.resolve_profile(x)?.document) };
        let changes = warrant_oap::diff::diff(&doc(a)?, &doc(b)?);
        Ok(ProfileDiff {
            from: a.to_owned(),
            to: b.to_owned(),
            widens: changes.iter().any(|c| c.widens),
            changes,
        })
    }

    fn proposals_dir(&self) -> PathBuf {
        self.paths.dot.join("agent-proposals")
    }

    /// `profiles apply DELTA [--approve]`: a person applies a session's delta (`approve` is
    /// that person's approval, refused from a process a run started); its proposals are
    /// queued for a person, never applied.
    pub fn apply_agent_delta(&self, delta: &Path, approve: bool) -> Result<AppliedView> {
        if approve && let warrant_kernel::Via::Command(evidence) = crate::origin::via() {
            return Err(host_error(&OapError::FromCommand { evidence }));
        }
        let doc = warrant_oap::delta::load_delta(delta).map_err(|e| host_error(&e))?;
        let actor = format!(
            "{}@{}",
            self.identity.principal.actor, self.identity.principal.tenant
        );
        let applied = warrant_oap::delta::apply(
            &self.agent_profiles(),
            &doc,
            None,
            &ApplyAs {
                approved: approve,
                actor: &actor,
                now: None,
            },
        )
        .map_err(|e| host_error(&e))?;
        let session = doc
            .get("session")
            .and_then(|s| s.get("id"))
            .and_then(|s| s.as_str())
            .unwrap_or_default()
            .to_owned();
        let queued = self.queue_proposals(
            &applied.profile,
            applied.from_revision,
            &session,
            &applied.proposals,
        )?;
        Ok(AppliedView { applied, queued })
    }

    /// The proposals waiting for a person (`profiles proposals`).
    pub fn agent_proposals(&self) -> Result<Vec<PendingProposal>> {
        let Ok(entries) = std::fs::read_dir(self.proposals_dir()) else {
            return Ok(vec![]);
        };
        let mut out: Vec<PendingProposal> = Vec::new();
        for e in entries.flatten() {
            let Ok(text) = std::fs::read(e.path()) else {
                continue;
            };
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text) else {
                continue;
            };
            let s = |k: &str| {
                v.get(k)
                    .and_then(|x| x.as_str())
                    .unwrap_or_default()
                    .to_owned()
            };
            out.push(PendingProposal {
                id: s("id"),
                profile: s("profile"),
                revision: v.get("revision").and_then(|r| r.as_u64()).unwrap_or(0),
                session: s("session"),
                proposal: Proposal {
                    path: s("path"),
                    op: s("op"),
                    value: v.get("value").cloned(),
                    rationale: s("rationale"),
                    risk: s("risk"),
                    risk_raised: v.get("risk_raised").and_then(|r| r.as_bool()) == Some(true),
                },
            });
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Queues `proposals` of a delta for `profile` at `revision` for a person (an id per
    /// proposal, stable for the same session, so queuing again replaces).
    fn queue_proposals(
        &self,
        profile: &str,
        revision: u64,
        session: &str,
        proposals: &[Proposal],
    ) -> Result<Vec<String>> {
        let dir = self.proposals_dir();
        let mut queued = Vec::new();
        for (i, p) in proposals.iter().enumerate() {
            let id = format!(
                "{profile}-r{revision}-{}-{i}",
                session.replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "")
            );
            let pending = PendingProposal {
                id: id.clone(),
                profile: profile.to_owned(),
                revision,
                session: session.to_owned(),
                proposal: p.clone(),
            };
            let text = serde_json::to_vec_pretty(&pending)
                .map_err(|e| HostError::usage("W-OAP-015", e.to_string()))?;
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(dir.join(format!("{id}.json")), text))
                .map_err(|e| {
                    HostError::usage(
                        "W-OAP-015",
                        format!("cannot queue proposal {id} in {}: {e}", dir.display()),
                    )
                })?;
            queued.push(id);
        }
        Ok(queued)
    }

    fn deltas_dir(&self) -> PathBuf {
        self.paths.dot.join("agent-deltas")
    }

    /// Reconcile (OAP lifecycle step 5) for a run that ended under an agent profile: its state
    /// delta, derived from the run's journal, written to `.warrant/agent-deltas/RUN.delta.json`
    /// (never into the profile), its proposals queued for a person at Warrant's risk, and,
    /// under `lifecycle.writeback: auto`, its state-only operations applied by the applicator
    /// (`profiles apply`'s path: revision re-checked under the lock, atomic write). `off`
    /// writes nothing. A subagent's run emits none (its parent's does). Told as a notice.
    pub(crate) fn reconcile_profile(&self, state: &warrant_kernel::RunState) {
        let Some(pin) = state.settings.agent_profile.as_deref() else {
            return;
        };
        let Some(outcome) = &state.ended else {
            return;
        };
        if state
            .settings
            .spawn
            .as_deref()
            .is_some_and(|s| s.parent.is_some())
        {
            return;
        }
        let catalog = self.agent_profiles();
        let current = if pin.trust == "imported" {
            catalog.resolve(&pin.source)
        } else {
            catalog.resolve(&pin.name)
        }
        .ok();
        let writeback = current
            .as_ref()
            .filter(|r| r.spec_digest == pin.spec_digest)
            .and_then(|r| {
                r.effective
                    .get("spec")?
                    .get("lifecycle")?
                    .get("writeback")?
                    .as_str()
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| "propose".to_owned());
        if writeback == "off" {
            return;
        }
        let mut denied = std::collections::BTreeMap::new();
        let profile_reason = format!("profile:{}", pin.name);
        for c in &state.calls {
            if c.decisions.iter().any(|d| {
                d.verdict == warrant_kernel::Verdict::Deny
                    && d.reasons
                        .first()
                        .is_some_and(|r| r.policy == profile_reason)
            }) {
                *denied.entry(c.record.tool.clone()).or_insert(0u32) += 1;
            }
        }
        let session = warrant_oap::generate::Session {
            id: state.run.to_string(),
            harness_version: env!("CARGO_PKG_VERSION").to_owned(),
            started_at: None,
            ended_at: warrant_core::Clock::now(&warrant_core::SystemClock).rfc3339(),
            model: state.model.clone(),
            turns: state.turns,
            tool_calls: state.calls.iter().filter(|c| !c.received).count() as u32,
            cost_usd: (state.usage.cost_usd > 0.0).then_some(state.usage.cost_usd),
            outcome: match outcome {
                warrant_kernel::Outcome::Completed => "completed",
                warrant_kernel::Outcome::Failed { code, .. } if code.contains("DEADLINE") => {
                    "timeout"
                }
                warrant_kernel::Outcome::Failed { .. } => "error",
                warrant_kernel::Outcome::Stopped { .. } => "aborted",
            }
            .to_owned(),
            denied_by_profile: denied,
        };
        let told = |path: Option<PathBuf>,
                    applied: Option<u64>,
                    queued: Vec<String>,
                    error: Option<String>| {
            self.inst.notices.notice(crate::Notice::ProfileDelta {
                run: state.run.to_string(),
                profile: pin.name.clone(),
                path,
                applied,
                queued,
                error,
            });
        };
        let doc = match warrant_oap::generate::delta(pin, current.as_ref(), &session) {
            Ok(d) => d,
            Err(e) => return told(None, None, Vec::new(), Some(format!("[{}] {e}", e.code()))),
        };
        let dir = self.deltas_dir();
        let path = dir.join(format!("{}.delta.json", state.run));
        let tmp = dir.join(format!(".{}.delta.json.tmp", state.run));
        let written = serde_json::to_vec_pretty(&doc)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                std::fs::create_dir_all(&dir)
                    .and_then(|()| std::fs::write(&tmp, text))
                    .and_then(|()| std::fs::rename(&tmp, &path))
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            return told(
                None,
                None,
                Vec::new(),
                Some(format!("[W-OAP-015] cannot write {}: {e}", path.display())),
            );
        }
        if writeback == "auto" {
            match self.apply_agent_delta(&path, false) {
                Ok(v) => told(Some(path), Some(v.applied.to_revision), v.queued, None),
                Err(e) => told(Some(path), None, Vec::new(), Some(e.to_string())),
            }
            return;
        }
        let proposals = warrant_oap::delta::proposals(&doc);
        match self.queue_proposals(&pin.name, pin.revision, &session.id, &proposals) {
            Ok(q) => told(Some(path), None, q, None),
            Err(e) => told(Some(path), None, Vec::new(), Some(e.to_string())),
        }
    }

    /// Refuses to continue run `run` when a skill its profile attached is no longer usable
    /// here with the digest pinned when it started (L3-G2).
    fn check_pinned_skills(&self, run: &str, pin: &ProfilePin) -> Result<()> {
        let Some(pinned) = pin.skills.as_deref().filter(|s| !s.is_empty()) else {
            return Ok(());
        };
        let usable = self.skill_pins();
        for s in pinned {
            let now = match usable.iter().find(|u| u.name == s.name) {
                Some(u) if u.digest == s.digest => continue,
                Some(u) => u.digest.clone(),
                None => {
                    "not usable here (changed and not re-approved, untrusted or gone)".to_owned()
                }
            };
            return Err(host_error(&OapError::SkillChanged {
                run: run.to_owned(),
                name: pin.name.clone(),
                skill: s.name.clone(),
                pinned: s.digest.clone(),
                now,
            }));
        }
        Ok(())
    }

    /// Refuses to continue run `run` when its pinned profile is no longer the one on disk
    /// (another spec digest or revision, or gone).
    pub fn check_pinned_profile(&self, run: &str, pin: &ProfilePin) -> Result<()> {
        let catalog = self.agent_profiles();
        let now = if pin.trust == "imported" {
            catalog.resolve(&pin.source)
        } else {
            catalog.resolve(&pin.name)
        };
        let now = match now {
            Ok(r) if r.spec_digest == pin.spec_digest && r.revision == pin.revision => {
                return self.check_pinned_skills(run, pin);
            }
            Ok(r) => format!("revision {} ({})", r.revision, r.spec_digest),
            Err(e) => format!("not loadable: {e}"),
        };
        Err(host_error(&OapError::Changed {
            run: run.to_owned(),
            name: pin.name.clone(),
            revision: pin.revision,
            spec_digest: pin.spec_digest.clone(),
            now,
        }))
    }
}
