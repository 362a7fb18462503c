//! Who is asked, who may answer, what a risk class needs, and what a `session` approval covers.
//! Pure rules over the identity directory and the resolved `[risk.*]` configuration; the ring
//! applies them when it opens a request, when a person answers, and at time of use.

use serde::{Deserialize, Serialize};
use serde_json::json;
use warrant_core::directory::Directory;
use warrant_core::risk::{Needs, RiskRules};
use warrant_core::{Action, CanonicalPath, Digest, Principal, PrincipalKind, RiskClass, digest_of};

use crate::events::{ReasonRecord, Verdict};
use crate::ring::{DecisionPoint, PolicyVerdict};

/// Everything that decides approvals besides policy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ApprovalRules {
    pub risk: RiskRules,
    /// The identity directory of the managed layer; `None` when there is none (then any person
    /// who is not an agent may answer, as before directories existed).
    pub directory: Option<Directory>,
    /// The project's responsible team (`[approvals] team`).
    pub team: Option<String>,
    /// Approver keys enrolled in this installation (actor → hex Ed25519 public key), for a
    /// machine with no identity directory; a directory, when there is one, is the only source.
    pub enrolled: std::collections::BTreeMap<String, String>,
    /// Negative controls only: take unauthenticated answers from another process for the
    /// classes that always need a person. Never set outside a debug build's test switch.
    pub allow_unauthenticated: bool,
}

/// Who a request is put to, recorded with the request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskedOf {
    /// The team asked, when it is a team.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// `true` when the administrators are asked.
    #[serde(default)]
    pub admins: bool,
    /// Who may answer (empty with no directory: any person who is not an agent).
    #[serde(default)]
    pub people: Vec<String>,
    /// Why the request fell through to the administrators (or to anyone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fell_through: Option<String>,
    /// The person the run acts for; with four-eyes they may not answer.
    pub requester: String,
    /// The requester may not approve this request themselves.
    #[serde(default)]
    pub four_eyes: bool,
}

impl AskedOf {
    /// One line for listings and prompts.
    pub fn describe(&self) -> String {
        let who = match (&self.team, self.admins) {
            (Some(t), _) => format!("team {t} ({})", self.people.join(", ")),
            (None, true) if self.people.is_empty() => "the administrators (none listed)".into(),
            (None, true) => format!("the administrators ({})", self.people.join(", ")),
            (None, false) => "any person who is not an agent (no identity directory)".into(),
        };
        let mut s = who;
        if let (Some(why), true) = (&self.fell_through, self.admins) {
            s.push_str(&format!(": {why}"));
        }
        if self.four_eyes {
            s.push_str(&format!("; not {} (four eyes)", self.requester));
        }
        s
    }
}

/// Why an approval was refused. Recorded in `ApprovalRejected`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// The proof does not verify under this installation's secret over what the record claims.
    Forged,
    /// The record is bound to another run.
    OtherRun,
    /// The record is bound to another park (request) of this run.
    OtherPark,
    /// The record is a replay of an approval that was already used.
    AlreadyUsed,
    /// What would run now differs from what was shown (the model re-planned, a file changed).
    ActionChanged,
    /// The approval's expiry passed before it was used.
    Expired,
    /// The answering person is not among those the request was put to.
    NotEligible,
    /// The person the run acts for may not approve their own request of this class.
    FourEyes,
    /// The answering process acts for someone else (an agent, or on behalf of a person).
    OnBehalf,
    /// The identity directory registers a key for the person, and the answer was not signed
    /// with it.
    Unsigned,
    /// The request needs an authenticated answer (a class that always needs a person, or four
    /// eyes) and the answer came from another process with no approver key enrolled for the
    /// person: only the run's own prompt or a signed answer counts.
    Unauthenticated,
    /// The answer came from a process a Warrant run started (or one of its descendants): a
    /// command can never answer a request.
    FromCommand,
    /// The answer to an MCP server's elicitation holds what the secret scanner takes for a
    /// secret: a server may not ask for one in a form, so it is never sent.
    SecretInAnswer,
    /// An approved proposal to change an agent profile could not be applied: the profile
    /// changed since it was proposed (or the change no longer applies); nothing was written.
    StaleProposal,
}

impl RejectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forged => "forged",
            Self::OtherRun => "other_run",
            Self::OtherPark => "other_park",
            Self::AlreadyUsed => "already_used",
            Self::ActionChanged => "action_changed",
            Self::Expired => "expired",
            Self::NotEligible => "not_eligible",
            Self::FourEyes => "four_eyes",
            Self::OnBehalf => "on_behalf",
            Self::Unsigned => "unsigned",
            Self::Unauthenticated => "unauthenticated",
            Self::FromCommand => "from_command",
            Self::SecretInAnswer => "secret_in_answer",
            Self::StaleProposal => "stale_proposal",
        }
    }

    /// Refusals found when the approval is about to be used: the person is asked again.
    /// The others are refusals of an answer: the request stays open.
    pub fn at_time_of_use(self) -> bool {
        match self {
            Self::Forged
            | Self::OtherRun
            | Self::OtherPark
            | Self::AlreadyUsed
            | Self::ActionChanged
            | Self::Expired => true,
            Self::NotEligible
            | Self::FourEyes
            | Self::OnBehalf
            | Self::Unsigned
            | Self::Unauthenticated
            | Self::FromCommand
            | Self::SecretInAnswer
            | Self::StaleProposal => false,
        }
    }
}

/// The person a run acts for: the person an agent acts on behalf of, else the actor.
pub fn requester(principal: &Principal) -> String {
    principal
        .on_behalf_of
        .clone()
        .unwrap_or_else(|| principal.actor.clone())
}

impl ApprovalRules {
    /// Who a request of `risk` for a run acting for `principal` is put to.
    pub fn asked_of(&self, principal: &Principal, risk: RiskClass) -> AskedOf {
        let requester = requester(principal);
        let four_eyes = self.risk.rule(risk).four_eyes;
        let Some(dir) = &self.directory else {
            return AskedOf {
                team: None,
                admins: false,
                people: Vec::new(),
                fell_through: Some("no identity directory (directory.toml in the managed configuration): any person who is not an agent may answer".into()),
                requester,
                four_eyes,
            };
        };
        let admins = |why: String| AskedOf {
            team: None,
            admins: true,
            people: dir.admins().into_iter().collect(),
            fell_through: Some(why),
            requester: requester.clone(),
            four_eyes,
        };
        match &self.team {
            None => admins(
                "the project names no responsible team ([approvals] team in .warrant/config.toml)"
                    .into(),
            ),
            Some(team) => {
                let members = dir.team_members(team);
                if members.is_empty() {
                    admins(format!(
                        "the project's team `{team}` has no members in the identity directory"
                    ))
                } else {
                    AskedOf {
                        team: Some(team.clone()),
                        admins: false,
                        people: members.into_iter().collect(),
                        fell_through: None,
                        requester,
                        four_eyes,
                    }
                }
            }
        }
    }

    /// Whether `approver` may answer a request put to `asked`; `Err` names why not.
    pub fn may_answer(
        &self,
        approver: &Principal,
        asked: &AskedOf,
    ) -> Result<(), (RejectReason, String)> {
        match approver.kind {
            PrincipalKind::Agent => {
                return Err((
                    RejectReason::OnBehalf,
                    format!("{} is an agent; an agent can never approve", approver.actor),
                ));
            }
            PrincipalKind::User | PrincipalKind::Service => {}
        }
        if let Some(person) = &approver.on_behalf_of {
            return Err((
                RejectReason::OnBehalf,
                format!(
                    "{} acts on behalf of {person}; an approval must come from the person, never from someone acting for them",
                    approver.actor
                ),
            ));
        }
        if asked.four_eyes && approver.actor == asked.requester {
            return Err((
                RejectReason::FourEyes,
                format!(
                    "{} asked for this run; four eyes: someone else must approve it",
                    approver.actor
                ),
            ));
        }
        let Some(dir) = &self.directory else {
            return Ok(());
        };
        if asked.people.contains(&approver.actor) || dir.is_admin(&approver.actor) {
            return Ok(());
        }
        Err((
            RejectReason::NotEligible,
            format!(
                "{} may not answer this request; it is put to {}",
                approver.actor,
                asked.describe()
            ),
        ))
    }

    /// The hex Ed25519 public key registered for `actor`: by the identity directory when there
    /// is one (administrators own it), otherwise by this installation's enrollment.
    pub fn registered_key(&self, actor: &str) -> Option<&str> {
        match &self.directory {
            Some(d) => d.people.get(actor).and_then(|p| p.public_key.as_deref()),
            None => self.enrolled.get(actor).map(String::as_str),
        }
    }

    /// Whether an answer to a `risk` request put to `asked` must be authenticated beyond the
    /// answering process's say-so: the classes that always need a person, and four eyes (which
    /// compares identities, so both must be proven).
    pub fn needs_authentication(&self, risk: RiskClass, asked: &AskedOf) -> bool {
        !self.allow_unauthenticated && (risk.always_needs_person() || asked.four_eyes)
    }

    /// Seconds an approval of `scope` for `risk` stays valid.
    pub fn expiry_secs(&self, risk: RiskClass, session: bool) -> u64 {
        let rule = self.risk.rule(risk);
        if session {
            rule.session_expiry_secs
        } else {
            rule.expiry_secs
        }
    }
}

#[cfg(feature = "testing")]
thread_local! {
    static COARSE_SESSIONS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether session patterns are precise (a delete's `recursive`, a command's exact argv and
/// profile). Always `true` in the shipped binary; the kernel's `testing` feature lets a test
/// switch back to the old coarse patterns on its own thread (the negative control).
fn precise_sessions() -> bool {
    #[cfg(feature = "testing")]
    {
        !COARSE_SESSIONS.with(std::cell::Cell::get)
    }
    #[cfg(not(feature = "testing"))]
    {
        true
    }
}

/// Test only: use the old coarse session patterns (`false`) or the precise ones (`true`) on the
/// calling thread.
#[cfg(feature = "testing")]
pub fn set_precise_sessions_for_this_thread(enabled: bool) {
    COARSE_SESSIONS.with(|c| c.set(!enabled));
}

/// What a `session` approval of `action` covers, in the words the person is shown: the verb,
/// and the resource pattern exactly. Files: the same verb on the same directory
/// (`fs.write /w/src/*`); a delete also says whether it is recursive, and a recursive one
/// covers exactly that tree (`fs.delete /w/build (recursive: the directory and everything in
/// it)`), so a grant for deleting one file never covers a tree. Commands: the exact argv (as a
/// JSON array, so `["rm","a b"]` is not `["rm","a","b"]`) in the same directory and profile.
pub fn session_pattern(action: &Action) -> String {
    let dir_of = |p: &CanonicalPath| {
        let s = p.as_str();
        match s.rfind('/') {
            Some(0) | None => "/*".to_owned(),
            Some(i) => format!("{}/*", &s[..i]),
        }
    };
    let precise = precise_sessions();
    match action {
        Action::FsDelete { path, recursive } if precise => {
            if *recursive {
                format!("fs.delete {path} (recursive: the directory and everything in it)")
            } else {
                format!(
                    "fs.delete {} (one entry at a time, not recursive)",
                    dir_of(path)
                )
            }
        }
        Action::FsRead { path }
        | Action::FsList { path }
        | Action::FsSearch { path, .. }
        | Action::FsWrite { path, .. }
        | Action::FsCreate { path, .. }
        | Action::FsDelete { path, .. } => format!("{} {}", action.verb().as_str(), dir_of(path)),
        Action::ShellExec {
            argv, cwd, profile, ..
        } => {
            if precise {
                let exact = serde_json::to_string(argv).unwrap_or_else(|_| format!("{argv:?}"));
                format!("shell.exec argv {exact} in {cwd}, profile {profile}")
            } else {
                format!("shell.exec `{}` in {cwd}", argv.join(" "))
            }
        }
        Action::ProviderCall { provider, model } => format!("provider.call {provider}:{model}"),
        // A session grant covers the namespace, not one entry or one text.
        Action::MemoryWrite {
            scope, namespace, ..
        }
        | Action::MemoryRead {
            scope, namespace, ..
        }
        | Action::MemoryDelete {
            scope, namespace, ..
        } => format!(
            "{} {}",
            action.verb().as_str(),
            warrant_core::memory_resource(*scope, namespace)
        ),
        Action::MemoryPropose { namespace, .. } | Action::MemoryPublish { namespace, .. } => {
            format!(
                "{} {}",
                action.verb().as_str(),
                warrant_core::memory_resource(warrant_core::MemoryScope::Shared, namespace)
            )
        }
        Action::GitRead { .. }
        | Action::GitCommit { .. }
        | Action::GitBranch { .. }
        | Action::GitCheckout { .. }
        | Action::GitPush { .. }
        | Action::WebFetch { .. }
        | Action::AgentSpawn { .. }
        | Action::CatalogList { .. }
        | Action::CatalogRead { .. }
        | Action::ArtifactCreate { .. } => {
            format!("{} {}", action.verb().as_str(), action.target())
        }
        Action::McpCall {
            server,
            tool,
            arguments,
            ..
        } => {
            if precise {
                format!("mcp.call {server}/{tool} with {arguments}")
            } else {
                format!("mcp.call {server}/{tool}")
            }
        }
    }
}

/// The digest an approval binds to: the actions (content included), what the person was
/// shown, and the state of what the actions change (e.g. the hash of the file a diff was made
/// against). Any of them changing means the person saw something else.
pub fn bound_digest(
    actions_digest: &Digest,
    shown: &crate::events::Presentation,
    base: &serde_json::Value,
) -> Digest {
    let v = json!({"actions": actions_digest, "shown": shown, "base": base});
    digest_of(&v).unwrap_or_else(|_| Digest::of_bytes(v.to_string().as_bytes()))
}

/// A decision point with the `[risk.*]` rules and the identity directory on top: a class that
/// is configured to need a person is asked even when policy allows it.
pub struct Governed<'a> {
    pub inner: &'a dyn DecisionPoint,
    pub rules: ApprovalRules,
}

impl std::fmt::Debug for Governed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Governed")
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

/// The id recorded when a `[risk.<class>] needs = "person"` rule turned an allow into ask.
pub const RISK_RULE_ID: &str = "builtin:risk-rule";
/// The id recorded when an allowed command of an unconfined profile was sent to a person.
pub const UNCONFINED_RULE_ID: &str = "builtin:unconfined";

impl DecisionPoint for Governed<'_> {
    fn decide(
        &self,
        principal: &Principal,
        action: &Action,
        workspace: &CanonicalPath,
    ) -> PolicyVerdict {
        let mut v = self.inner.decide(principal, action, workspace);
        // Model calls never wait for a person (an `ask` refuses them; budgets and policy
        // govern them), so a rule meant for the agent's effects on the world, such as
        // `[risk.external] needs = "person"` for pushes and network tools, leaves them alone.
        let model_call = matches!(action, Action::ProviderCall { .. });
        // A command nothing confines can do anything this user can: a person sees every one,
        // whatever the policy permits.
        if v.verdict == Verdict::Allow
            && matches!(
                action,
                Action::ShellExec {
                    contained: false,
                    ..
                }
            )
        {
            v.verdict = Verdict::Ask;
            v.risk = v.risk.max(RiskClass::Change);
            v.reasons.push(ReasonRecord {
                policy: UNCONFINED_RULE_ID.into(),
                reason: Some(
                    "this profile does not confine its commands (no own view, or a wider network), so a person approves each one"
                        .to_owned(),
                ),
            });
        }
        if v.verdict == Verdict::Allow
            && !model_call
            && !warrant_policy::judged_after(action, v.risk)
            && self.rules.risk.rule(v.risk).needs == Needs::Person
        {
            v.verdict = Verdict::Ask;
            v.reasons.push(ReasonRecord {
                policy: RISK_RULE_ID.into(),
                reason: Some(format!(
                    "[risk.{}] needs = \"person\": {} actions go to a person here",
                    v.risk.as_str(),
                    v.risk.as_str()
                )),
            });
        }
        v
    }

    /// The policy digest, combined with the rules when they differ from the defaults, so a
    /// resume under other rules re-decides what is pending.
    fn digest(&self) -> Digest {
        let inner = self.inner.digest();
        if self.rules.risk.is_default() {
            return inner;
        }
        digest_of(&json!({"policy": inner, "risk": self.rules.risk})).unwrap_or(inner)
    }

    fn approval_rules(&self) -> Option<&ApprovalRules> {
        Some(&self.rules)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use warrant_core::risk::RiskRuleConfig;

    struct AllowAll;
    impl DecisionPoint for AllowAll {
        fn decide(&self, _: &Principal, action: &Action, _: &CanonicalPath) -> PolicyVerdict {
            PolicyVerdict {
                verdict: Verdict::Allow,
                risk: warrant_core::risk::classify(action).0,
                reasons: vec![],
                errors: vec![],
            }
        }
        fn digest(&self) -> Digest {
            Digest::of_bytes(b"allow-all")
        }
    }

    #[test]
    fn a_person_rule_for_external_asks_for_a_push_but_leaves_model_calls_to_policy() {
        let table = BTreeMap::from([(
            "external".to_owned(),
            RiskRuleConfig {
                needs: Some(Needs::Person),
                four_eyes: None,
                expiry: None,
                session_expiry: None,
            },
        )]);
        let risk = RiskRules::resolve(&[("config.toml", &table)]).unwrap();
        let governed = Governed {
            inner: &AllowAll,
            rules: ApprovalRules {
                risk,
                ..Default::default()
            },
        };
        let ws = CanonicalPath::from_normalized("/w").unwrap();
        let p = Principal {
            tenant: "t".into(),
            actor: "alice".into(),
            kind: PrincipalKind::User,
            on_behalf_of: None,
            roles: vec![],
            teams: vec![],
            attrs: Default::default(),
        };
        let push = Action::ShellExec {
            argv: vec!["git".into(), "push".into()],
            cwd: ws.clone(),
            profile: "default".into(),
            timeout_ms: 1000,
            program: None,
            contained: false,
            judged: warrant_core::Judging::Changeset,
        };
        assert_eq!(governed.decide(&p, &push, &ws).verdict, Verdict::Ask);
        let call = Action::ProviderCall {
            provider: "openai".into(),
            model: "gpt-4.1".into(),
        };
        assert_eq!(AllowAll.decide(&p, &call, &ws).risk, RiskClass::External);
        assert_eq!(governed.decide(&p, &call, &ws).verdict, Verdict::Allow);
    }
}
