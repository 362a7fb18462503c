//! The risk class of one concrete action, and what each class needs before it may run.
//!
//! A verb has a default class (`Verb::default_risk`); the action itself can only make it
//! worse: a command line that pushes or talks to the network is `external`, one that deletes,
//! force-pushes or drops a table is `destructive`, one that touches credentials is `secret`.
//! The command-line recognizers (`argv`) follow wrappers, shells and inline code up to a depth
//! bound; they raise the class of what they recognize and never lower anything.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::action::{Action, RiskClass};

mod argv;

pub use argv::{MAX_DEPTH, Recognizers, classify_argv, program_name};

/// The class of `action` and, when it is worse than the verb's default, why.
pub fn classify(action: &Action) -> (RiskClass, Option<String>) {
    classify_with(action, Recognizers::default())
}

/// [`classify`] with the recognizers set as given (tests switch following off).
pub fn classify_with(action: &Action, rec: Recognizers) -> (RiskClass, Option<String>) {
    // An MCP tool's class is the operator's (or, unless overridden, the server's annotations'):
    // it is the action's own, and may be lower than the verb's default.
    if let Action::McpCall { risk, .. } = action {
        return (*risk, None);
    }
    let default = action.verb().default_risk();
    let raised = match action {
        Action::FsRead { path }
        | Action::FsList { path }
        | Action::FsSearch { path, .. }
        | Action::FsWrite { path, .. }
        | Action::FsCreate { path, .. }
        | Action::FsDelete { path, .. } => argv::credential_path(path.as_str())
            .then(|| (RiskClass::Secret, format!("{path} holds credentials"))),
        Action::ShellExec { argv, program, .. } => classify_command(argv, program.as_ref(), rec),
        Action::ProviderCall { .. }
        | Action::MemoryWrite { .. }
        | Action::MemoryRead { .. }
        | Action::MemoryDelete { .. }
        | Action::MemoryPropose { .. }
        | Action::MemoryPublish { .. }
        | Action::GitRead { .. }
        | Action::GitCommit { .. }
        | Action::GitBranch { .. }
        | Action::GitCheckout { .. }
        | Action::GitPush { .. }
        | Action::McpCall { .. }
        | Action::AgentSpawn { .. }
        | Action::CatalogList { .. }
        | Action::CatalogRead { .. }
        | Action::ArtifactCreate { .. }
        | Action::WebFetch { .. } => None,
    };
    match raised {
        Some((class, why)) if class > default => (class, Some(why)),
        Some(_) | None => (default, None),
    }
}

/// A command line known by its words and, when it was found, by the executable argv[0]
/// resolved to: the worse of the two readings, so `./ls` linked to `rm` is `rm` and a program
/// whose file has another name (`/bin/rm` → `busybox`) keeps the class of what argv[0] says.
pub fn classify_command(
    argv: &[String],
    program: Option<&crate::CanonicalPath>,
    rec: Recognizers,
) -> Option<(RiskClass, String)> {
    let by_words = classify_argv(argv, rec);
    let Some((first, resolved)) = argv.first().zip(program) else {
        return by_words;
    };
    if argv::program_name(first) == resolved.file_name() {
        return by_words;
    }
    let mut as_run = argv.to_vec();
    as_run[0] = resolved.as_str().to_owned();
    let by_file = classify_argv(&as_run, rec)
        .map(|(class, why)| (class, format!("`{first}` is {resolved}: {why}")));
    match (by_words, by_file) {
        (Some(w), Some(f)) => Some(if f.0 > w.0 { f } else { w }),
        (w, f) => w.or(f),
    }
}

/// Who must agree before an action of a class runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Needs {
    /// Policy decides alone (a permit without `@ask` lets it run).
    Policy,
    /// A person is always asked, whatever policy permits.
    Person,
}

impl Needs {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Policy => "policy",
            Self::Person => "person",
        }
    }
}

/// `[risk.<class>]` in a config layer. Every field optional: a higher layer wins per field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RiskRuleConfig {
    pub needs: Option<Needs>,
    /// The person the run acts for may not approve it themselves.
    pub four_eyes: Option<bool>,
    /// How long a `once` approval stays valid: `30s`, `15m`, `1h`, `2d`.
    pub expiry: Option<String>,
    /// How long a `session` approval stays valid (it never outlives its run).
    pub session_expiry: Option<String>,
}

/// `[approvals]` in a config layer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// The team (of the identity directory) responsible for this project: asked first.
    pub team: Option<String>,
}

/// What one class needs, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RiskRule {
    pub needs: Needs,
    pub four_eyes: bool,
    pub expiry_secs: u64,
    pub session_expiry_secs: u64,
}

/// The resolved rules for every class.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RiskRules {
    pub rules: BTreeMap<RiskClass, RiskRule>,
}

pub const DEFAULT_EXPIRY_SECS: u64 = 3600;
pub const DEFAULT_SESSION_EXPIRY_SECS: u64 = 8 * 3600;

impl Default for RiskRules {
    fn default() -> Self {
        let rules = RiskClass::ALL
            .into_iter()
            .map(|c| {
                (
                    c,
                    RiskRule {
                        needs: if c.always_needs_person() {
                            Needs::Person
                        } else {
                            Needs::Policy
                        },
                        four_eyes: false,
                        expiry_secs: DEFAULT_EXPIRY_SECS,
                        session_expiry_secs: DEFAULT_SESSION_EXPIRY_SECS,
                    },
                )
            })
            .collect();
        Self { rules }
    }
}

impl RiskRules {
    pub fn rule(&self, class: RiskClass) -> RiskRule {
        self.rules.get(&class).copied().unwrap_or(RiskRule {
            needs: Needs::Person,
            four_eyes: false,
            expiry_secs: DEFAULT_EXPIRY_SECS,
            session_expiry_secs: DEFAULT_SESSION_EXPIRY_SECS,
        })
    }

    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Merges `[risk.*]` tables, highest precedence first (managed, user, project). A class
    /// that must always go to a person cannot be configured to `needs = "policy"`.
    pub fn resolve(
        tables: &[(&str, &BTreeMap<String, RiskRuleConfig>)],
    ) -> Result<Self, RiskConfigError> {
        let mut out = Self::default();
        for (path, table) in tables {
            for name in table.keys() {
                if RiskClass::parse(name).is_none() {
                    return Err(RiskConfigError {
                        path: (*path).to_owned(),
                        message: format!(
                            "[risk.{name}]: not a risk class; use one of {}",
                            RiskClass::ALL.map(RiskClass::as_str).join(", ")
                        ),
                    });
                }
            }
        }
        for class in RiskClass::ALL {
            let mut rule = out.rule(class);
            let find = |f: &dyn Fn(&RiskRuleConfig) -> Option<String>| {
                tables
                    .iter()
                    .find_map(|(p, t)| t.get(class.as_str()).and_then(f).map(|v| (*p, v)))
            };
            if let Some((path, needs)) = find(&|r| r.needs.map(|n| n.as_str().to_owned())) {
                if needs == "policy" && class.always_needs_person() {
                    return Err(RiskConfigError {
                        path: path.to_owned(),
                        message: format!(
                            "[risk.{}] needs = \"policy\": {} actions always need a person; only \"person\" is allowed",
                            class.as_str(),
                            class.as_str()
                        ),
                    });
                }
                rule.needs = if needs == "policy" {
                    Needs::Policy
                } else {
                    Needs::Person
                };
            }
            if let Some((_, v)) = find(&|r| r.four_eyes.map(|b| b.to_string())) {
                rule.four_eyes = v == "true";
            }
            for (field, slot) in [
                ("expiry", &mut rule.expiry_secs),
                ("session_expiry", &mut rule.session_expiry_secs),
            ] {
                let got = find(&|r| {
                    if field == "expiry" {
                        r.expiry.clone()
                    } else {
                        r.session_expiry.clone()
                    }
                });
                if let Some((path, text)) = got {
                    *slot = parse_duration_secs(&text).ok_or_else(|| RiskConfigError {
                        path: path.to_owned(),
                        message: format!(
                            "[risk.{}] {field} = \"{text}\": not a duration; write e.g. 90s, 15m, 1h or 2d (more than zero)",
                            class.as_str()
                        ),
                    })?;
                }
            }
            out.rules.insert(class, rule);
        }
        Ok(out)
    }
}

/// `90s`, `15m`, `1h`, `2d` → seconds (zero is refused).
pub fn parse_duration_secs(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    n.checked_mul(mult).filter(|v| *v > 0)
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct RiskConfigError {
    pub path: String,
    pub message: String,
}

impl crate::Coded for RiskConfigError {
    fn code(&self) -> &'static str {
        "W-CONFIG-020"
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::CanonicalPath;
    use pretty_assertions::assert_eq;

    /// Fuzz regression (fuzz/artifacts-regressions/risk/): a command inside a `{ …; }` group
    /// was classified as the word `{`, so `sh -c '{ curl …; }'` lost its class.
    #[test]
    fn a_brace_group_keeps_the_class_of_its_commands() {
        let inner = classify(&exec(&["curl", "https://example.com"])).0;
        assert_eq!(inner, RiskClass::External);
        let grouped = classify(&exec(&["sh", "-c", "{ curl https://example.com; }"])).0;
        assert_eq!(grouped, inner);
        let rm = classify(&exec(&["bash", "-c", "{ rm -rf src; }"])).0;
        assert_eq!(rm, RiskClass::Destructive);
    }

    fn exec(argv: &[&str]) -> Action {
        Action::ShellExec {
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
            cwd: CanonicalPath::from_normalized("/w").unwrap(),
            profile: "default".into(),
            timeout_ms: 1000,
            program: None,
            contained: false,
            judged: crate::Judging::Changeset,
        }
    }

    #[test]
    fn commands_get_the_class_of_what_they_do() {
        let table: Vec<(&[&str], RiskClass)> = vec![
            (&["ls", "-la"], RiskClass::Change),
            (&["git", "status"], RiskClass::Change),
            (&["git", "push", "origin", "main"], RiskClass::External),
            (
                &["git", "push", "--force", "origin", "main"],
                RiskClass::Destructive,
            ),
            (&["git", "push", "origin", "+main"], RiskClass::Destructive),
            (
                &["git", "reset", "--hard", "HEAD~1"],
                RiskClass::Destructive,
            ),
            (&["curl", "https://example.com"], RiskClass::External),
            (&["/usr/bin/rm", "-rf", "build"], RiskClass::Destructive),
            (&["psql", "-c", "DROP TABLE users"], RiskClass::Destructive),
            (&["sqlite3", "db", "drop table t"], RiskClass::Destructive),
            (&["cat", ".env"], RiskClass::Secret),
            (&["vault", "kv", "get", "x"], RiskClass::Secret),
            (&["cargo", "publish"], RiskClass::Irreversible),
            (&["sh", "-c", "echo hi > a.txt"], RiskClass::Change),
            (
                &["sh", "-c", "make && rm -rf build"],
                RiskClass::Destructive,
            ),
            (
                &["bash", "-c", "cd x; git push origin main"],
                RiskClass::External,
            ),
        ];
        let got: Vec<(String, RiskClass)> = table
            .iter()
            .map(|(argv, _)| (argv.join(" "), classify(&exec(argv)).0))
            .collect();
        let want: Vec<(String, RiskClass)> =
            table.iter().map(|(argv, c)| (argv.join(" "), *c)).collect();
        assert_eq!(got, want);
    }

    /// The program is known by the file argv[0] resolved to as well as by argv[0]: the worse
    /// reading wins, and the reason names the file.
    #[test]
    fn a_command_is_classified_by_the_file_it_runs_too() {
        let p = |s: &str| CanonicalPath::from_normalized(s).unwrap();
        let argv = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let rec = Recognizers::default();
        let got = [
            classify_command(&argv(&["./ls", "x"]), Some(&p("/usr/bin/rm")), rec),
            // /bin/rm linked to busybox still reads as rm.
            classify_command(&argv(&["rm", "x"]), Some(&p("/usr/bin/busybox")), rec),
            classify_command(&argv(&["ls"]), Some(&p("/usr/bin/ls")), rec),
            classify_command(&argv(&["ls"]), None, rec),
        ];
        assert_eq!(
            got,
            [
                Some((
                    RiskClass::Destructive,
                    "`./ls` is /usr/bin/rm: `rm` deletes data".to_owned()
                )),
                Some((RiskClass::Destructive, "`rm` deletes data".to_owned())),
                None,
                None,
            ]
        );
    }

    #[test]
    fn files_holding_credentials_are_secret_and_deletes_destructive() {
        let p = |s: &str| CanonicalPath::from_normalized(s).unwrap();
        assert_eq!(
            classify(&Action::FsRead { path: p("/w/.env") }).0,
            RiskClass::Secret
        );
        assert_eq!(
            classify(&Action::FsRead {
                path: p("/w/a.txt")
            }),
            (RiskClass::Read, None)
        );
        assert_eq!(
            classify(&Action::FsDelete {
                path: p("/w/a.txt"),
                recursive: false
            })
            .0,
            RiskClass::Destructive
        );
    }

    #[test]
    fn rules_resolve_by_precedence_and_refuse_to_relax_person_classes() {
        let managed: BTreeMap<String, RiskRuleConfig> = BTreeMap::from([(
            "destructive".to_owned(),
            RiskRuleConfig {
                four_eyes: Some(true),
                expiry: Some("15m".into()),
                ..Default::default()
            },
        )]);
        let project: BTreeMap<String, RiskRuleConfig> = BTreeMap::from([(
            "change".to_owned(),
            RiskRuleConfig {
                needs: Some(Needs::Person),
                ..Default::default()
            },
        )]);
        let rules = RiskRules::resolve(&[("managed", &managed), ("project", &project)]).unwrap();
        assert_eq!(
            rules.rule(RiskClass::Destructive),
            RiskRule {
                needs: Needs::Person,
                four_eyes: true,
                expiry_secs: 900,
                session_expiry_secs: DEFAULT_SESSION_EXPIRY_SECS
            }
        );
        assert_eq!(rules.rule(RiskClass::Change).needs, Needs::Person);
        let relax: BTreeMap<String, RiskRuleConfig> = BTreeMap::from([(
            "secret".to_owned(),
            RiskRuleConfig {
                needs: Some(Needs::Policy),
                ..Default::default()
            },
        )]);
        let err = RiskRules::resolve(&[("p.toml", &relax)]).unwrap_err();
        assert!(err.message.contains("always need a person"), "{err}");
        let typo: BTreeMap<String, RiskRuleConfig> =
            BTreeMap::from([("destructve".to_owned(), RiskRuleConfig::default())]);
        assert!(RiskRules::resolve(&[("p.toml", &typo)]).is_err());
        assert_eq!(parse_duration_secs("0s"), None);
        assert_eq!(parse_duration_secs("2d"), Some(172_800));
    }
}
