//! Loading a layered policy set (strict, fail closed) and deciding requests against it.
//! Cedar evaluates; this module adds ids from `@id`, the `@ask` third outcome, the built-in
//! "destructive, secret and irreversible always ask" rule, and the agent-for-person rule.

use std::collections::BTreeMap;
use std::str::FromStr;

use cedar_policy::{
    Authorizer, Effect, Entities, PolicyId, PolicySet, Request, ValidationError, ValidationMode,
    Validator,
};
use miette::Diagnostic;
use warrant_core::config::LayerKind;
use warrant_core::risk::Recognizers;
use warrant_core::{Action, Coded, Digest, PrincipalKind, RiskClass, digest_of};

use crate::decision::{
    Decision, DecisionRequest, PolicyEffect, PolicyLayer, PolicyReason, Verdict,
};
use crate::error::PolicyError;
use crate::explain::{CedarDecision, CedarRequest, EvaluatedAs, Evaluation, Explanation};
use crate::request::RequestSpec;
use crate::schema::{CedarNames, SCHEMA_JSON};

/// One policy file as read from disk by the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicySource {
    pub layer: LayerKind,
    /// Where the text came from, for messages and explanations.
    pub path: String,
    pub text: String,
}

/// What we keep about each loaded policy besides its Cedar form.
#[derive(Clone, Debug)]
pub(crate) struct PolicyMeta {
    layer: LayerKind,
    file: String,
    effect: PolicyEffect,
    reason: Option<String>,
    ask: Option<RiskClass>,
    pub(crate) text: String,
    /// Verbs this permit would let through without a person although their class always
    /// needs one (reported at load; `builtin:always-ask` still asks).
    silent: Vec<warrant_core::Verb>,
}

/// Remembers which policy sets passed strict validation, so that a process need not repeat a
/// check an earlier process of the same build made of the same set (validation is most of what
/// loading a set costs, and a command line loads one at every start).
///
/// Validation is a function of the schema and the policies alone: [`validation_key`] names
/// both, and an implementation must add the build of the validator (a memo must never carry a
/// pass from one build of Warrant to another). A wrong "passed" loads a set that strict
/// validation would refuse; Cedar still evaluates every policy, and a forbid whose evaluation
/// errors still denies. Memos are therefore kept where only the person running Warrant can
/// write, as their policy files are.
pub trait ValidationMemo {
    /// Whether a set with this key passed strict validation before, in this build.
    fn passed(&self, key: &Digest) -> bool;
    /// That a set with this key passed.
    fn remember(&self, key: &Digest);
}

/// The memo that remembers nothing: every load validates.
#[derive(Clone, Copy, Debug)]
pub struct NoMemo;

impl ValidationMemo for NoMemo {
    fn passed(&self, _key: &Digest) -> bool {
        false
    }

    fn remember(&self, _key: &Digest) {}
}

/// What strict validation of a set depends on: the schema and every policy of the set by id
/// and text (`digest`, the set's [`PolicyEngine::digest`]).
pub fn validation_key(digest: &Digest) -> Digest {
    let mut text = String::with_capacity(SCHEMA_JSON.len() + 128);
    text.push_str("warrant policy strict validation\0");
    text.push_str(SCHEMA_JSON);
    text.push('\0');
    text.push_str(digest.as_str());
    Digest::of_bytes(text.as_bytes())
}

/// The id of the built-in escalation rule.
pub const ALWAYS_ASK_ID: &str = "builtin:always-ask";

/// A validated policy set, ready to decide.
#[derive(Debug)]
pub struct PolicyEngine {
    set: PolicySet,
    meta: BTreeMap<String, PolicyMeta>,
    digest: Digest,
    authorizer: Authorizer,
    /// How far the risk recognizers read a command line (following is off only in the
    /// negative controls of tests).
    recognizers: Recognizers,
    /// The managed identity directory and the project's team (`[approvals] team`): where the
    /// roles and teams of the principal and of the person it acts for come from.
    directory: Option<(warrant_core::directory::Directory, Option<String>)>,
}

/// The result of evaluating one principal, before the results for several are combined.
struct Evaluated {
    spec: RequestSpec,
    cedar: CedarDecision,
    verdict: Verdict,
    reasons: Vec<PolicyReason>,
    errors: Vec<String>,
}

impl PolicyEngine {
    /// Parse, name and validate every source. Any problem in any file stops loading.
    pub fn load(sources: &[PolicySource]) -> Result<PolicyEngine, PolicyError> {
        Self::load_remembering(sources, &NoMemo)
    }

    /// [`PolicyEngine::load`], skipping strict validation of a set that `memo` says passed it
    /// before (same schema, same policies by id and text; see [`ValidationMemo`]), and telling
    /// `memo` of a set that passes now.
    pub fn load_remembering(
        sources: &[PolicySource],
        memo: &dyn ValidationMemo,
    ) -> Result<PolicyEngine, PolicyError> {
        let mut set = PolicySet::new();
        let mut meta: BTreeMap<String, PolicyMeta> = BTreeMap::new();
        for source in sources {
            for (id, policy, m) in parse_source(source)? {
                if let Some(first) = meta.get(&id) {
                    return Err(PolicyError::DuplicateId {
                        id,
                        first_file: first.file.clone(),
                        second_file: m.file,
                    });
                }
                set.add(policy).map_err(|e| PolicyError::Parse {
                    layer: source.layer,
                    file: source.path.clone(),
                    message: e.to_string(),
                })?;
                meta.insert(id, m);
            }
        }
        let listing: Vec<(&str, &str)> = meta
            .iter()
            .map(|(id, m)| (id.as_str(), m.text.as_str()))
            .collect();
        // Serializing string pairs cannot fail; the fallback keeps the digest total anyway.
        let digest = digest_of(&listing)
            .unwrap_or_else(|_| Digest::of_bytes(format!("{listing:?}").as_bytes()));
        let key = validation_key(&digest);
        if !memo.passed(&key) {
            validate(CedarNames::shared()?, &set, &meta)?;
            memo.remember(&key);
        }
        Ok(PolicyEngine {
            set,
            meta,
            digest,
            authorizer: Authorizer::new(),
            recognizers: Recognizers::default(),
            directory: None,
        })
    }

    /// Builds the Cedar schema and names this process decides with, if not built yet. A
    /// policy set whose validation is remembered loads without them, and the first decision
    /// builds them (a few milliseconds of Cedar parsing): a host that will decide soon calls
    /// this on a thread of its own first, so the wait is not on its path.
    pub fn prewarm_schema() {
        let _ = CedarNames::shared();
    }

    /// The engine with the risk recognizers set as given (`follow: false` only for the
    /// negative controls of the security tests).
    pub fn with_recognizers(mut self, recognizers: Recognizers) -> Self {
        self.recognizers = recognizers;
        self
    }

    /// Decides with the roles and teams the identity directory gives: the principal's (beside
    /// those its identity names) and those of the person an agent acts for, with a team's
    /// roles counting only on `project_team`'s projects. Without it the person is evaluated
    /// by name alone.
    pub fn with_directory(
        mut self,
        directory: Option<warrant_core::directory::Directory>,
        project_team: Option<String>,
    ) -> Self {
        self.directory = directory.map(|d| (d, project_team));
        self
    }

    /// `actor`'s standing in the directory on this project; `None` without a directory or
    /// when it does not know them.
    pub fn standing(&self, actor: &str) -> Option<warrant_core::directory::Standing> {
        let (d, team) = self.directory.as_ref()?;
        d.standing(actor, team.as_deref())
    }

    /// The class of `action` as this engine's recognizers read it, and why it was raised.
    pub fn classify(&self, action: &Action) -> (RiskClass, Option<String>) {
        warrant_core::risk::classify_with(action, self.recognizers)
    }

    /// SHA-256 over the canonical JSON of the sorted `(id, text)` list.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }

    /// Permits that try to allow an always-ask class silently (no `@ask`), one line each.
    /// They load (the built-in rule still asks a person) but are reported at load, by
    /// `doctor` and by `explain`.
    pub fn warnings(&self) -> Vec<String> {
        self.meta
            .iter()
            .filter(|(_, m)| !m.silent.is_empty())
            .map(|(id, m)| crate::warnings::silent_permit(id, &m.file, &m.silent))
            .collect()
    }

    /// The loaded policy ids (`layer:id`), sorted.
    pub fn policy_ids(&self) -> impl Iterator<Item = &str> {
        self.meta.keys().map(String::as_str)
    }

    /// The Cedar policy set, for cross-checks against Cedar itself (benchmarks, tooling).
    pub fn cedar_policy_set(&self) -> &PolicySet {
        &self.set
    }

    /// The Cedar request and entities `decide` builds for the request's own principal.
    pub fn cedar_request(
        &self,
        req: &DecisionRequest<'_>,
    ) -> Result<(Request, Entities), PolicyError> {
        RequestSpec::for_principal(req.principal, req.action, req.workspace)
            .with_installed_skills(req.action, req.installed_skills)
            .to_cedar(CedarNames::shared()?)
    }

    /// Allow, ask or deny, with the policies that determined it.
    pub fn decide(&self, req: &DecisionRequest<'_>) -> Decision {
        let evaluated = self.evaluate_all(req);
        combine(req, &evaluated, self.classify(req.action))
    }

    /// The decision plus everything that produced it: Cedar requests, entities, context.
    pub fn explain(&self, req: &DecisionRequest<'_>) -> Explanation {
        let evaluated = self.evaluate_all(req);
        let decision = combine(req, &evaluated, self.classify(req.action));
        let note = default_deny_note(req, &decision, &evaluated);
        let evaluations = evaluated
            .into_iter()
            .enumerate()
            .map(|(i, e)| Evaluation {
                evaluated_as: if i == 0 {
                    EvaluatedAs::Principal
                } else {
                    EvaluatedAs::OnBehalfOf
                },
                request: CedarRequest {
                    principal: e.spec.principal.uid_string(),
                    action: e.spec.action_uid_string(),
                    resource: e.spec.resource.uid_string(),
                },
                cedar_decision: e.cedar,
                verdict: e.verdict,
                reasons: e.reasons,
                errors: e.errors,
                entities: e.spec.entities_json(),
                context: e.spec.context_json(),
            })
            .collect();
        Explanation {
            verb: req.action.verb(),
            target: req.action.target(),
            workspace: req.workspace.as_str().to_owned(),
            decision,
            note,
            evaluations,
            policy_digest: self.digest.clone(),
        }
    }

    /// The principal itself, then (for an agent acting for a person) that person.
    fn evaluate_all(&self, req: &DecisionRequest<'_>) -> Vec<Evaluated> {
        // The principal's own roles and teams, and what the directory adds for it.
        let mut principal = req.principal.clone();
        if let Some(s) = self.standing(&principal.actor) {
            principal.roles.extend(s.roles);
            principal.teams.extend(s.teams);
        }
        let mut specs = vec![RequestSpec::for_principal(
            &principal,
            req.action,
            req.workspace,
        )];
        match (req.principal.kind, &req.principal.on_behalf_of) {
            (PrincipalKind::Agent, Some(person)) => specs.push(RequestSpec::for_person(
                person,
                self.standing(person).as_ref(),
                req.principal,
                req.action,
                req.workspace,
            )),
            (PrincipalKind::Agent, None) | (PrincipalKind::User | PrincipalKind::Service, _) => {}
        }
        let risk = self.classify(req.action).0;
        specs
            .into_iter()
            .map(|s| s.with_installed_skills(req.action, req.installed_skills))
            .map(|s| self.evaluate(s, risk))
            .collect()
    }

    fn evaluate(&self, spec: RequestSpec, default_risk: RiskClass) -> Evaluated {
        let (request, entities) = match CedarNames::shared().and_then(|n| spec.to_cedar(n)) {
            Ok(pair) => pair,
            Err(e) => {
                return Evaluated {
                    spec,
                    cedar: CedarDecision::NotEvaluated,
                    verdict: Verdict::Deny,
                    reasons: Vec::new(),
                    errors: vec![coded(&e)],
                };
            }
        };
        let response = self
            .authorizer
            .is_authorized(&request, &self.set, &entities);
        let mut ids: Vec<&PolicyId> = response.diagnostics().reason().collect();
        ids.sort_by_key(|id| AsRef::<str>::as_ref(*id));
        let reasons: Vec<PolicyReason> = ids.iter().filter_map(|id| self.reason(id)).collect();
        let errors: Vec<String> = response
            .diagnostics()
            .errors()
            .map(|e| {
                coded(&PolicyError::Evaluation {
                    message: e.to_string(),
                })
            })
            .collect();
        let cedar = match response.decision() {
            cedar_policy::Decision::Allow => CedarDecision::Allow,
            cedar_policy::Decision::Deny => CedarDecision::Deny,
        };
        let (verdict, reasons) = match cedar {
            // An erroring policy is skipped by Cedar; a skipped forbid must not let anything
            // through, so any error denies. Satisfied forbids still explain a Cedar deny.
            CedarDecision::Allow if !errors.is_empty() => (Verdict::Deny, Vec::new()),
            CedarDecision::Deny | CedarDecision::NotEvaluated => (Verdict::Deny, reasons),
            CedarDecision::Allow => {
                let ask = reasons.iter().filter_map(|r| r.ask).max();
                match ask {
                    Some(risk) => (
                        Verdict::Ask {
                            risk: risk.max(default_risk),
                        },
                        reasons,
                    ),
                    None => (Verdict::Allow, reasons),
                }
            }
        };
        Evaluated {
            spec,
            cedar,
            verdict,
            reasons,
            errors,
        }
    }

    fn reason(&self, id: &PolicyId) -> Option<PolicyReason> {
        let key: &str = id.as_ref();
        self.meta.get(key).map(|m| PolicyReason {
            id: key.to_owned(),
            layer: m.layer.into(),
            file: m.file.clone(),
            effect: m.effect,
            reason: m.reason.clone(),
            ask: m.ask,
        })
    }
}

fn coded(e: &PolicyError) -> String {
    format!("{}: {e}", e.code())
}

/// The id recorded when a contained command's destructive class is left to the judgement of its
/// changeset instead of asking before it runs.
pub const JUDGED_AFTER_ID: &str = "builtin:judged-after";

/// A contained command (its own view, writes only through the judged layer over the workspace)
/// whose worst effect is destructive: a person is asked after it ran, with its changeset, not
/// before from its argv. Secret and irreversible classes still ask before. A contained command
/// judged by its argv (no overlays on this machine: its writes land directly) is not: its
/// destructive argv asks before it runs, as before confinement.
pub fn judged_after(action: &Action, risk: RiskClass) -> bool {
    risk == RiskClass::Destructive
        && matches!(
            action,
            Action::ShellExec {
                contained: true,
                judged: warrant_core::Judging::Changeset,
                ..
            }
        )
}

/// Strictest verdict wins; then the built-in rule that some risk classes always ask.
fn combine(
    req: &DecisionRequest<'_>,
    evaluated: &[Evaluated],
    (default_risk, raised_because): (RiskClass, Option<String>),
) -> Decision {
    let mut verdict = evaluated
        .iter()
        .map(|e| e.verdict)
        .fold(Verdict::Allow, Verdict::strictest);
    if evaluated.is_empty() {
        verdict = Verdict::Deny;
    }
    let mut reasons: Vec<PolicyReason> = Vec::new();
    for e in evaluated.iter().filter(|e| e.verdict == verdict) {
        for r in &e.reasons {
            if !reasons.iter().any(|have| have.id == r.id) {
                reasons.push(r.clone());
            }
        }
    }
    let errors: Vec<String> = evaluated.iter().flat_map(|e| e.errors.clone()).collect();
    if verdict == Verdict::Allow && judged_after(req.action, default_risk) {
        reasons.push(PolicyReason {
            id: JUDGED_AFTER_ID.to_owned(),
            layer: PolicyLayer::Builtin,
            file: String::new(),
            effect: PolicyEffect::Permit,
            reason: Some(format!(
                "the command is contained, so what makes it {} is judged from what it actually changed: its deletions wait for a person, shown as the files they remove",
                default_risk.as_str()
            )),
            ask: None,
        });
    } else if verdict == Verdict::Allow && default_risk.always_needs_person() {
        verdict = Verdict::Ask { risk: default_risk };
        reasons.push(PolicyReason {
            id: ALWAYS_ASK_ID.to_owned(),
            layer: PolicyLayer::Builtin,
            file: String::new(),
            effect: PolicyEffect::Ask,
            reason: Some(format!(
                "{} is {}{}: destructive, secret and irreversible actions always go to a person, \
                 whatever policy permits",
                req.action.verb().as_str(),
                default_risk.as_str(),
                raised_because
                    .map(|why| format!(" ({why})"))
                    .unwrap_or_default()
            )),
            ask: Some(default_risk),
        });
    }
    let risk = match verdict {
        Verdict::Ask { risk } => risk,
        Verdict::Allow | Verdict::Deny => default_risk,
    };
    Decision {
        verdict,
        risk,
        reasons,
        errors,
    }
}

/// For a deny that no forbid and no error explains: say that nothing permits it, and why the
/// usual permits did not apply when the target is outside the workspace.
fn default_deny_note(
    req: &DecisionRequest<'_>,
    decision: &Decision,
    evaluated: &[Evaluated],
) -> Option<String> {
    if decision.verdict != Verdict::Deny
        || !decision.reasons.is_empty()
        || !decision.errors.is_empty()
    {
        return None;
    }
    let verb = req.action.verb().as_str();
    let target = req.action.target();
    let denied: Vec<&Evaluated> = evaluated
        .iter()
        .filter(|e| e.verdict == Verdict::Deny)
        .collect();
    let whom = if evaluated.len() > 1 {
        let list: Vec<String> = denied
            .iter()
            .map(|e| e.spec.principal.uid_string())
            .collect();
        format!(" for {}", list.join(" and "))
    } else {
        String::new()
    };
    // A model call and a memory namespace have no place in the workspace to be outside of.
    let outside = !matches!(
        req.action,
        Action::ProviderCall { .. }
            | Action::MemoryWrite { .. }
            | Action::MemoryRead { .. }
            | Action::MemoryDelete { .. }
            | Action::MemoryPropose { .. }
            | Action::MemoryPublish { .. }
            | Action::WebFetch { .. }
            | Action::CatalogList { .. }
            | Action::CatalogRead { .. }
    ) && evaluated.first().is_some_and(|e| !e.spec.in_workspace);
    let place = match req.action {
        Action::ShellExec { cwd, .. } => format!(" in {cwd}"),
        Action::ProviderCall { .. }
        | Action::MemoryWrite { .. }
        | Action::MemoryRead { .. }
        | Action::MemoryDelete { .. }
        | Action::MemoryPropose { .. }
        | Action::McpCall { .. }
        | Action::AgentSpawn { .. }
        | Action::CatalogList { .. }
        | Action::CatalogRead { .. }
        | Action::ArtifactCreate { .. }
        | Action::MemoryPublish { .. } => String::new(),
        Action::FsRead { .. }
        | Action::FsList { .. }
        | Action::FsSearch { .. }
        | Action::FsWrite { .. }
        | Action::FsCreate { .. }
        | Action::FsDelete { .. }
        | Action::GitRead { .. }
        | Action::GitCommit { .. }
        | Action::GitBranch { .. }
        | Action::GitCheckout { .. }
        | Action::GitPush { .. }
        | Action::WebFetch { .. } => String::new(),
    };
    let place = if outside {
        format!("{place}, which is outside the workspace {}", req.workspace)
    } else {
        place
    };
    Some(format!("no policy permits {verb} on {target}{whom}{place}"))
}

/// Parse one file into `(full id, policy renamed to it, metadata)`, in file order.
pub(crate) fn parse_source(
    source: &PolicySource,
) -> Result<Vec<(String, cedar_policy::Policy, PolicyMeta)>, PolicyError> {
    let parse_err = |message: String| PolicyError::Parse {
        layer: source.layer,
        file: source.path.clone(),
        message,
    };
    let parsed = PolicySet::from_str(&source.text).map_err(|errs| {
        parse_err(
            errs.iter()
                .map(|e| {
                    let line = e
                        .labels()
                        .and_then(|mut l| l.next())
                        .map(|l| format!("line {}: ", line_of(&source.text, l.offset())))
                        .unwrap_or_default();
                    format!("{line}{}", with_help(e))
                })
                .collect::<Vec<_>>()
                .join("; "),
        )
    })?;
    if let Some(t) = parsed.templates().next() {
        return Err(parse_err(format!(
            "templates (policies with ?principal or ?resource slots) are not supported here: `{}`",
            first_line(&t.to_string())
        )));
    }
    let mut out = Vec::new();
    let mut policies: Vec<(usize, &cedar_policy::Policy, String)> = parsed
        .policies()
        .map(|p| {
            let text = p.to_cedar().unwrap_or_else(|| p.to_string());
            // The policy text is a slice of the file, so its offset gives its place.
            let offset = source.text.find(&text).unwrap_or(usize::MAX);
            (offset, p, text)
        })
        .collect();
    policies.sort_by_key(|(offset, _, _)| *offset);
    for (index, (offset, policy, text)) in policies.into_iter().enumerate() {
        let id = match policy.annotation("id").map(str::trim) {
            Some(id) if !id.is_empty() => id.to_owned(),
            Some(_) | None => {
                return Err(PolicyError::MissingId {
                    layer: source.layer,
                    file: source.path.clone(),
                    index: index + 1,
                    line: line_of(&source.text, offset),
                    start: first_line(&text),
                });
            }
        };
        let full = format!("{}:{id}", source.layer.as_str());
        let effect = match policy.effect() {
            Effect::Permit => PolicyEffect::Permit,
            Effect::Forbid => PolicyEffect::Forbid,
        };
        let ask = match (policy.annotation("ask"), effect) {
            (None, PolicyEffect::Permit | PolicyEffect::Forbid | PolicyEffect::Ask) => None,
            (Some(value), PolicyEffect::Permit) => {
                Some(RiskClass::parse(value).ok_or_else(|| PolicyError::BadAsk {
                    file: source.path.clone(),
                    id: full.clone(),
                    value: value.to_owned(),
                    problem: format!(
                        "not a risk class; use one of {}",
                        RiskClass::ALL.map(RiskClass::as_str).join(", ")
                    ),
                })?)
            }
            (Some(value), PolicyEffect::Forbid | PolicyEffect::Ask) => {
                return Err(PolicyError::BadAsk {
                    file: source.path.clone(),
                    id: full,
                    value: value.to_owned(),
                    problem: "@ask belongs on a permit; a forbid always denies".to_owned(),
                });
            }
        };
        let silent = match (effect, ask) {
            (PolicyEffect::Permit, None) => crate::warnings::person_verbs(policy),
            (PolicyEffect::Permit, Some(_)) | (PolicyEffect::Forbid | PolicyEffect::Ask, _) => {
                Vec::new()
            }
        };
        let meta = PolicyMeta {
            layer: source.layer,
            file: source.path.clone(),
            effect,
            reason: policy.annotation("reason").map(str::to_owned),
            ask,
            text,
            silent,
        };
        let renamed = policy.new_id(PolicyId::new(&full));
        out.push((full, renamed, meta));
    }
    Ok(out)
}

/// Strict validation of the whole set; warnings count as errors (an impossible forbid is a
/// hole, a confusable identifier may be an attack).
fn validate(
    names: &CedarNames,
    set: &PolicySet,
    meta: &BTreeMap<String, PolicyMeta>,
) -> Result<(), PolicyError> {
    let result = Validator::new(names.schema.clone()).validate(set, ValidationMode::Strict);
    let file_of = |id: &PolicyId| {
        let key: &str = id.as_ref();
        meta.get(key).map(|m| m.file.clone()).unwrap_or_default()
    };
    // Unknown actions first (the likeliest typo), then type errors, then warnings; within a
    // rank, a stable order regardless of Cedar's iteration order.
    let mut problems: Vec<(u8, PolicyError)> = result
        .validation_errors()
        .map(|e| {
            let id = e.policy_id();
            let (file, id_s, message) = (file_of(id), id.to_string(), with_help(e));
            if matches!(e, ValidationError::UnrecognizedActionId(_)) {
                (
                    0,
                    PolicyError::UnknownAction {
                        file,
                        id: id_s,
                        message,
                    },
                )
            } else {
                (
                    1,
                    PolicyError::Validation {
                        file,
                        id: id_s,
                        message,
                    },
                )
            }
        })
        .chain(result.validation_warnings().map(|w| {
            (
                2,
                PolicyError::Validation {
                    file: file_of(w.policy_id()),
                    id: w.policy_id().to_string(),
                    message: with_help(w),
                },
            )
        }))
        .collect();
    problems.sort_by_key(|(rank, p)| (*rank, p.to_string()));
    match problems.into_iter().next().map(|(_, p)| p) {
        Some(first) => Err(first),
        None => Ok(()),
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_owned()
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map(|before| before.matches('\n').count() + 1)
        .unwrap_or(1)
}

/// Cedar's message plus its help line, which often names the fix ("did you mean `path`?").
fn with_help(d: &dyn Diagnostic) -> String {
    match d.help() {
        Some(help) => format!("{d} (help: {help})"),
        None => d.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use std::collections::BTreeMap;
    use warrant_core::{CanonicalPath, Principal};

    /// An engine over policies that skipped validation, to reach Cedar's runtime errors.
    fn unvalidated(text: &str) -> PolicyEngine {
        let source = PolicySource {
            layer: LayerKind::Project,
            path: "p.cedar".into(),
            text: text.into(),
        };
        let mut set = PolicySet::new();
        let mut meta = BTreeMap::new();
        for (id, policy, m) in parse_source(&source).unwrap() {
            set.add(policy).unwrap();
            meta.insert(id, m);
        }
        PolicyEngine {
            set,
            meta,
            digest: Digest::of_bytes(b""),
            authorizer: Authorizer::new(),
            recognizers: Recognizers::default(),
            directory: None,
        }
    }

    /// A memo in memory: what it was told, and what it claims to have seen.
    #[derive(Default)]
    struct Remembered {
        told: std::cell::RefCell<Vec<Digest>>,
        claims: Vec<Digest>,
    }

    impl ValidationMemo for Remembered {
        fn passed(&self, key: &Digest) -> bool {
            self.claims.contains(key) || self.told.borrow().contains(key)
        }
        fn remember(&self, key: &Digest) {
            self.told.borrow_mut().push(key.clone());
        }
    }

    fn project(text: &str) -> Vec<PolicySource> {
        vec![PolicySource {
            layer: LayerKind::Project,
            path: "p.cedar".into(),
            text: text.into(),
        }]
    }

    #[test]
    fn a_validation_memo_is_keyed_by_every_policy_and_told_only_of_a_pass() {
        let good = project(
            r#"@id("reads") permit (principal, action == Warrant::Action::"fs.read", resource);"#,
        );
        let memo = Remembered::default();
        let first = PolicyEngine::load_remembering(&good, &memo).unwrap();
        let key = validation_key(first.digest());
        assert_eq!(
            *memo.told.borrow(),
            vec![key.clone()],
            "a pass is remembered"
        );
        // The same set again: the memo answers, nothing new is told.
        PolicyEngine::load_remembering(&good, &memo).unwrap();
        assert_eq!(memo.told.borrow().len(), 1);

        // One character of one policy changes the key.
        let other = project(
            r#"@id("reads") permit (principal, action == Warrant::Action::"fs.list", resource);"#,
        );
        let second = PolicyEngine::load_remembering(&other, &memo).unwrap();
        assert_ne!(validation_key(second.digest()), key);
        assert_eq!(memo.told.borrow().len(), 2);

        // A set that fails validation is refused and never remembered.
        let bad = project(
            r#"@id("typo") forbid (principal, action, resource) when { resource.no_such_attr == "x" };"#,
        );
        let before = memo.told.borrow().len();
        assert!(PolicyEngine::load_remembering(&bad, &memo).is_err());
        assert_eq!(memo.told.borrow().len(), before);
    }

    #[test]
    fn a_memo_that_claims_a_pass_is_what_skips_validation() {
        let bad = project(
            r#"@id("typo") forbid (principal, action, resource) when { resource.no_such_attr == "x" };"#,
        );
        assert!(PolicyEngine::load_remembering(&bad, &NoMemo).is_err());
        // A claim for exactly this set's key loads it (which is why memos are kept where only
        // the person's own files are; its broken forbid still denies, see below) …
        let key = validation_key(
            PolicyEngine::load_remembering(&bad, &Claims)
                .unwrap()
                .digest(),
        );
        let memo = Remembered {
            claims: vec![key],
            ..Remembered::default()
        };
        assert!(PolicyEngine::load_remembering(&bad, &memo).is_ok());
        // … a claim for any other set does not.
        let memo = Remembered {
            claims: vec![Digest::of_bytes(b"another set")],
            ..Remembered::default()
        };
        assert!(PolicyEngine::load_remembering(&bad, &memo).is_err());
    }

    /// A memo that claims every set passed.
    struct Claims;

    impl ValidationMemo for Claims {
        fn passed(&self, _key: &Digest) -> bool {
            true
        }
        fn remember(&self, _key: &Digest) {}
    }

    #[test]
    fn a_forbid_that_errors_still_denies() {
        // Cedar skips the erroring forbid and allows; Warrant must not.
        let engine = unvalidated(
            r#"
            @id("allow-reads")
            permit (principal, action, resource);
            @id("broken-forbid")
            forbid (principal, action, resource) when { resource.no_such_attr == "x" };
            "#,
        );
        let who = Principal {
            tenant: "t".into(),
            actor: "a".into(),
            kind: PrincipalKind::User,
            on_behalf_of: None,
            roles: Vec::new(),
            teams: Vec::new(),
            attrs: BTreeMap::new(),
        };
        let ws = CanonicalPath::from_normalized("/ws").unwrap();
        let action = Action::FsRead {
            path: CanonicalPath::from_normalized("/ws/a").unwrap(),
        };
        let req = DecisionRequest {
            principal: &who,
            action: &action,
            workspace: &ws,
            installed_skills: &[],
        };
        let got = engine.decide(&req);
        assert_eq!(
            (got.verdict, got.reasons, got.errors.len()),
            (Verdict::Deny, Vec::new(), 1)
        );
        assert!(
            got.errors[0].starts_with("W-POLICY-007: evaluating the request failed: error while evaluating policy `project:broken-forbid`"),
            "{}",
            got.errors[0]
        );
        let ex = engine.explain(&req);
        assert_eq!(ex.evaluations[0].cedar_decision, CedarDecision::Allow);
        assert_eq!(ex.note, None);
    }
}
