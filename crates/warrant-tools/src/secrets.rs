//! Secrets for commands: the variables a profile's commands receive from the vault
//! (`[secret_env.<profile>]`), resolved just before the command runs, and redacted from what
//! the command printed, so a value never reaches the journal, the audit trail or the model.

use serde_json::Value;
use warrant_core::Action;
use warrant_kernel::{Authorized, EffectResult, ToolEnv};

/// One secret given to a command: the variable, the secret's name, its value.
pub(crate) struct Given {
    var: String,
    name: String,
    value: String,
}

/// The secrets for the profile of these (shell) actions. An unknown or undecryptable secret is
/// a failure of the call, with its code: the command does not run without what it was promised.
pub(crate) fn for_actions(
    actions: &[Authorized<Action>],
    env: &ToolEnv,
) -> Result<Vec<Given>, (String, String)> {
    let Some(source) = &env.secrets else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for a in actions {
        // Only a command receives secrets; every other kind of action has none to give.
        let Some(exec) = a.narrow::<warrant_core::ShellExec>() else {
            continue;
        };
        let profile = &exec.get().profile;
        for (var, name) in source.env_for(profile) {
            let value = source.value(&name)?;
            out.push(Given { var, name, value });
        }
    }
    Ok(out)
}

pub(crate) fn as_env(given: &[Given]) -> Vec<(String, String)> {
    given
        .iter()
        .map(|g| (g.var.clone(), g.value.clone()))
        .collect()
}

/// What a person approving a command under `profile` is told it receives.
pub(crate) fn shown(profile: &str, env: &ToolEnv) -> String {
    env.secrets
        .as_ref()
        .map(|s| {
            s.env_for(profile)
                .into_iter()
                .map(|(var, name)| format!("{var}=secret:{name}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

fn scrub(v: &mut Value, given: &[Given]) {
    match v {
        Value::String(s) => {
            for g in given {
                if !g.value.is_empty() && s.contains(&g.value) {
                    *s = s.replace(&g.value, &format!("[secret:{}]", g.name));
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| scrub(i, given)),
        Value::Object(map) => map.values_mut().for_each(|i| scrub(i, given)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Replaces every whole occurrence of a given value in the result by `[secret:NAME]`.
pub(crate) fn redact(mut outcome: EffectResult, given: &[Given]) -> EffectResult {
    if !given.is_empty() {
        scrub(&mut outcome.result, given);
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    /// Redaction replaces every whole occurrence, at any depth; with nothing given (the guard
    /// off) the same output keeps the value, which is what would reach the journal.
    #[test]
    fn printed_values_are_redacted_and_only_when_given() {
        let printed = EffectResult {
            ok: true,
            result: json!({"stdout": {"head": "token=s3cr3t-v4lue\nagain s3cr3t-v4lue", "tail": ""},
                           "exit_code": 0, "lines": ["s3cr3t-v4lue"]}),
        };
        let given = vec![Given {
            var: "DEPLOY_TOKEN".into(),
            name: "DEPLOY_TOKEN".into(),
            value: "s3cr3t-v4lue".into(),
        }];
        assert_eq!(
            redact(printed.clone(), &given).result,
            json!({"stdout": {"head": "token=[secret:DEPLOY_TOKEN]\nagain [secret:DEPLOY_TOKEN]", "tail": ""},
                   "exit_code": 0, "lines": ["[secret:DEPLOY_TOKEN]"]})
        );
        assert_eq!(redact(printed.clone(), &[]).result, printed.result);
        assert_eq!(
            as_env(&given),
            vec![("DEPLOY_TOKEN".to_owned(), "s3cr3t-v4lue".to_owned())]
        );
    }
}
