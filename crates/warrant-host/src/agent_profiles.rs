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

/// A proposal to change a profile, as `profiles proposals` lists it: the request a person
/// answers (`requests answer ID --text approve`, `requests decline ID`), with what it changes.
#[derive(Clone, Debug, Serialize)]
pub struct PendingProposal {
    /// The request's id.
    pub id: String,
    /// `open`, `expired` or `answered`.
    pub status: &'static str,
    /// The run of its own the request was raised in.
    pub run: String,
    pub profile: String,
    pub revision: u64,
    pub session: String,
    #[serde(flatten)]
    pub proposal: Proposal,
    pub diff: Vec<String>,
    pub asked_of: Vec<String>,
    pub expires_at: Option<String>,
}

/// What applying a delta did, with the requests its proposals were raised as.
#[derive(Clone, Debug, Serialize)]
pub struct AppliedView {
    #[serde(flatten)]
    pub applied: Applied,
    pub queued: Vec<String>,
}

/// What a proposal is made for: the profile at a revision, with its digests then.
#[derive(Clone, Debug)]
pub(crate) struct ProposedFor {
    pub profile: String,
    pub revision: u64,
    pub digest: String,
    pub spec_digest: String,
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

    /// Where proposals were queued as files before they became requests.
    fn legacy_proposals_dir(&self) -> PathBuf {
        self.paths.dot.join("agent-proposals")
    }

    /// `profiles apply DELTA [--approve]`: a person applies a session's delta (`approve` is
    /// that person's approval, refused from a process a run started); its proposals are
    /// raised as requests for a person (once per session: a delta applied again raises none
    /// anew), never applied.
    pub fn apply_agent_delta(&self, delta: &Path, approve: bool) -> Result<AppliedView> {
        if approve && let warrant_kernel::Via::Command(evidence) = crate::origin::via() {
            return Err(host_error(&OapError::FromCommand { evidence }));
        }
        let doc = warrant_oap::delta::load_delta(delta).map_err(|e| host_error(&e))?;
        let actor = format!(
            "{}@{}",
            self.identity.principal.actor, self.identity.principal.tenant
        );
        let catalog = self.agent_profiles();
        let applied = warrant_oap::delta::apply(
            &catalog,
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
        // The proposals are for the profile as it is now, its state applied.
        let spec_digest = warrant_oap::load_profile(&applied.path)
            .ok()
            .and_then(|(d, _)| warrant_oap::check(&d, &applied.path).spec_digest)
            .unwrap_or_default();
        let queued = self.raise_proposals(
            &ProposedFor {
                profile: applied.profile.clone(),
                revision: applied.to_revision,
                digest: applied.profile_digest.clone(),
                spec_digest,
            },
            &session,
            &applied.proposals,
        )?;
        Ok(AppliedView { applied, queued })
    }

    /// The proposals raised as requests (`profiles proposals`): the open ones, or every one
    /// with `all`. Files left in `.warrant/agent-proposals/` from before proposals were
    /// requests are not requests and nothing applies them: a notice says they are there.
    pub fn agent_proposals(&self, all: bool) -> Result<Vec<PendingProposal>> {
        let legacy = std::fs::read_dir(self.legacy_proposals_dir())
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                    .count()
            })
            .unwrap_or(0);
        if legacy > 0 {
            self.inst.notices.notice(crate::Notice::LegacyProposals {
                dir: self.legacy_proposals_dir(),
                files: legacy,
            });
        }
        let now = warrant_core::Clock::now(&warrant_core::SystemClock).millis();
        let mut out = Vec::new();
        for row in self.records().requests(all)? {
            let Some(warrant_kernel::RequestSummary::Asked(summary)) =
                warrant_kernel::RequestSummary::from_value(&row.summary)
            else {
                continue;
            };
            let Some(p) = pending_of(&summary.ask) else {
                continue;
            };
            let item = crate::request_views::RequestItem::of(&row, now);
            out.push(PendingProposal {
                id: row.id.to_string(),
                status: item.status,
                run: row.run.to_string(),
                asked_of: item.asked_of,
                expires_at: item.expires_at,
                ..p
            });
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Raises each of `proposals` as a request for a person, each in a run of its own (the
    /// request index, routing, expiry, audit and `requests answer|decline` are the other
    /// requests'); a proposal already raised for the same session is not raised again.
    /// Returns the requests' ids.
    pub(crate) fn raise_proposals(
        &self,
        target: &ProposedFor,
        session: &str,
        proposals: &[Proposal],
    ) -> Result<Vec<String>> {
        if proposals.is_empty() {
            return Ok(Vec::new());
        }
        let raised: Vec<(String, warrant_kernel::Ask)> = self
            .records()
            .requests(true)?
            .into_iter()
            .filter_map(
                |row| match warrant_kernel::RequestSummary::from_value(&row.summary) {
                    Some(warrant_kernel::RequestSummary::Asked(a)) => {
                        Some((row.id.to_string(), a.ask))
                    }
                    _ => None,
                },
            )
            .collect();
        let document = self
            .agent_profiles()
            .find(&target.profile)
            .ok()
            .and_then(|f| warrant_oap::load_profile(&f.path).ok())
            .map(|(d, _)| d);
        let mut queued = Vec::new();
        for p in proposals {
            let operations = warrant_oap::proposal::changes(p);
            let already = raised.iter().find(|(_, ask)| {
                matches!(ask, warrant_kernel::Ask::Proposal { session: s, operations: o, profile, .. }
                    if s == session && *o == operations && *profile == target.profile)
            });
            if let Some((id, _)) = already {
                queued.push(id.clone());
                continue;
            }
            let diff = match &document {
                Some(d) => warrant_oap::proposal::diff_lines(d, &operations),
                None => Vec::new(),
            };
            let ask = warrant_kernel::Ask::Proposal {
                profile: target.profile.clone(),
                revision: target.revision,
                digest: target.digest.clone(),
                spec_digest: target.spec_digest.clone(),
                operations,
                diff,
                rationale: p.rationale.clone(),
                risk: p.risk.clone(),
                risk_raised: p.risk_raised,
                session: session.to_owned(),
            };
            queued.push(self.raise_proposal(&target.profile, session, ask)?);
        }
        Ok(queued)
    }

    /// Starts the run of its own a proposal is raised in, and raises it there.
    fn raise_proposal(
        &self,
        profile: &str,
        session: &str,
        ask: warrant_kernel::Ask,
    ) -> Result<String> {
        let builtin: [&dyn warrant_tools::ToolSource; 1] = [&warrant_tools::Builtin];
        let tools = crate::controls::tools(&self.settings, &builtin, None)?;
        let env = self.tool_env()?;
        let task = format!(
            "a person reviews a proposal to change agent profile `{profile}` (from run {session})"
        );
        let spec = self.new_run_spec(&tools, &env, "none:oap", task, None, false);
        let raised = self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
            let mut state = ring.start(spec).map_err(|e| HostError::failed(&e))?;
            ring.raise_proposal(&mut state, ask)
                .map_err(|e| HostError::failed(&e))
        });
        self.deliver();
        Ok(raised?.to_string())
    }

    /// Approves a proposal (`requests answer ID --text approve`): refused from a process a run
    /// started (recorded in the proposal's run), then checked as a reply before anything is
    /// written, then applied by the applicator as this person (the profile must still be the
    /// one proposed for, or differ only in learned state; the result validated; the revision
    /// re-checked under the lock; temp file, fsync, rename), and only then recorded as the
    /// reply, which ends the proposal's run. A refusal of the applicator is recorded in the
    /// run and leaves the request open, to be declined.
    pub(crate) fn approve_proposal(
        &self,
        state: &mut warrant_kernel::RunState,
        request: &warrant_core::RequestId,
        ask: &warrant_kernel::AskState,
    ) -> Result<crate::requests::Replied> {
        let warrant_kernel::Ask::Proposal {
            profile,
            revision,
            digest,
            spec_digest,
            operations,
            session,
            ..
        } = &ask.ask
        else {
            return Err(HostError::usage(
                "W-REQUEST-001",
                format!("request {request} is not a proposal"),
            ));
        };
        self.refuse_from_command(state, request, "approve a profile proposal")?;
        let person = &self.identity.principal;
        let tools = self.own_tools()?;
        let placeholder = warrant_kernel::Reply::Applied {
            revision: revision + 1,
            profile_digest: String::new(),
        };
        let checked = self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
            Ok(ring.check_reply(state, request, person, &placeholder))
        })?;
        if let Err(e) = checked {
            if matches!(e, warrant_kernel::AskError::Expired { .. }) {
                // Records the expiry (and ends the proposal's run), as any late reply does.
                self.reply(state, request, placeholder)?;
            }
            return Err(HostError::bad_input(&e));
        }
        let actor = format!("{}@{}", person.actor, person.tenant);
        let applied = warrant_oap::proposal::apply_approved(
            &self.agent_profiles(),
            &warrant_oap::proposal::Target {
                name: profile,
                revision: *revision,
                digest,
                spec_digest,
            },
            operations,
            &warrant_oap::proposal::ApprovedBy {
                actor: &actor,
                session,
                now: None,
            },
        );
        let applied = match applied {
            Ok(a) => a,
            Err(e) => {
                let detail = format!("[{}] {e}", e.code());
                let via = crate::origin::via_from(self.front);
                self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
                    ring.record_refused_proposal(state, request, person, via.as_str(), detail)
                        .map_err(|e| HostError::failed(&e))
                })?;
                self.deliver();
                return Err(host_error(&e));
            }
        };
        self.reply(
            state,
            request,
            warrant_kernel::Reply::Applied {
                revision: applied.to_revision,
                profile_digest: applied.profile_digest,
            },
        )?;
        Ok(crate::requests::Replied {
            request: request.clone(),
            run: state.run.clone(),
            reply: "approved",
            by: person.actor.clone(),
        })
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
        let target = ProposedFor {
            profile: pin.name.clone(),
            revision: pin.revision,
            digest: pin.profile_digest.clone(),
            spec_digest: pin.spec_digest.clone(),
        };
        match self.raise_proposals(&target, &session.id, &proposals) {
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

/// The proposal an ask carries, as listed (the request's own fields filled in by the caller).
fn pending_of(ask: &warrant_kernel::Ask) -> Option<PendingProposal> {
    let warrant_kernel::Ask::Proposal {
        profile,
        revision,
        operations,
        diff,
        rationale,
        risk,
        risk_raised,
        session,
        ..
    } = ask
    else {
        return None;
    };
    let first = operations.first();
    Some(PendingProposal {
        id: String::new(),
        status: "open",
        run: String::new(),
        profile: profile.clone(),
        revision: *revision,
        session: session.clone(),
        proposal: Proposal {
            path: first.map(|o| o.path.clone()).unwrap_or_default(),
            op: first.map(|o| o.op.clone()).unwrap_or_default(),
            value: first.and_then(|o| o.value.clone()),
            rationale: rationale.clone(),
            risk: risk.clone(),
            risk_raised: *risk_raised,
        },
        diff: diff.clone(),
        asked_of: Vec::new(),
        expires_at: None,
    })
}
