//! `activate_skill {name}`: the second tier of progressive loading. The name is looked up in
//! the run's pinned catalog only; the call normalizes to an `fs.read` of that skill's SKILL.md,
//! so policy decides it like any read, and the result (the instructions, the list of the
//! skill's other files, and the digest) is journaled and audited as every result is. A skill
//! whose files changed since the run started is not loaded. The other files are read on
//! demand with `read_file`, again under policy: nothing here reads around the ring.

use serde_json::{Value, json};
use warrant_core::{Action, CanonicalPath, ToolSpec};
use warrant_kernel::skills::SkillPin;
use warrant_kernel::{
    Authorized, EffectResult, Presentation, ReadFilter, Refusal, StopCheck, Tool, ToolEnv,
};

use crate::skill::{SKILL_FILE, Skill};

pub const TOOL: &str = "activate_skill";

/// The tool, offered only to a run with at least one usable skill. It holds the skills as
/// this process found them: a call is loaded only when the run's pin, this catalog and the
/// files on disk all have the same digest.
#[derive(Debug)]
pub struct ActivateSkill {
    spec: ToolSpec,
    current: Vec<SkillPin>,
}

impl ActivateSkill {
    /// The tool over `current`, the usable skills as discovered now.
    pub fn new(current: Vec<SkillPin>) -> Self {
        Self {
            spec: ToolSpec {
                name: TOOL.to_owned(),
                description: "Load the full instructions of one Agent Skill from this run's skill catalog (listed, with descriptions, in a fenced message of the conversation). Its other files can then be read with read_file.".to_owned(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 64}},
                    "required": ["name"],
                    "additionalProperties": false
                }),
            },
            current,
        }
    }
}

fn pinned<'a>(args: &Value, env: &'a ToolEnv) -> Result<&'a SkillPin, Refusal> {
    let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
    let skills = env.run.as_ref().map(|r| r.skills.as_slice()).unwrap_or(&[]);
    skills
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| Refusal {
            code: "W-SKILL-012".to_owned(),
            message: format!(
                "no skill `{name}` in this run's catalog; its skills: {}",
                if skills.is_empty() {
                    "none".to_owned()
                } else {
                    skills
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        })
}

fn changed(pin: &SkillPin, now: &str) -> crate::SkillError {
    crate::SkillError::Changed {
        name: pin.name.clone(),
        approved: pin.digest.clone(),
        now: now.to_owned(),
        files: vec!["since this run started".to_owned()],
    }
}

impl Tool for ActivateSkill {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let pin = pinned(args, env)?;
        // The skill as this process found it must be the one the run was shown (a resumed
        // run meets the files as they are now).
        match self
            .current
            .iter()
            .find(|c| c.name == pin.name && c.dir == pin.dir)
        {
            Some(c) if c.digest == pin.digest => {}
            Some(c) => return Err(Refusal::of(&changed(pin, &c.digest))),
            None => {
                return Err(Refusal::of(&changed(
                    pin,
                    "not usable any more (changed, untrusted or gone)",
                )));
            }
        }
        let file = std::path::Path::new(&pin.dir).join(SKILL_FILE);
        let refuse = |detail: String| Refusal {
            code: "W-SKILL-010".to_owned(),
            message: format!("skill `{}` cannot be loaded: {detail}", pin.name),
        };
        // The file as it is now, links resolved: it must still be inside the pinned directory.
        let real = std::fs::canonicalize(&file).map_err(|e| refuse(e.to_string()))?;
        if real != file {
            return Err(refuse(format!(
                "{} now resolves to {}",
                file.display(),
                real.display()
            )));
        }
        let path = CanonicalPath::from_normalized(&real.to_string_lossy())
            .map_err(|e| refuse(e.to_string()))?;
        Ok(vec![Action::FsRead { path }])
    }

    fn present(&self, actions: &[Action], _env: &ToolEnv) -> Presentation {
        let paths: Vec<String> = actions
            .iter()
            .filter_map(|a| {
                if let Action::FsRead { path } = a {
                    Some(path.to_string())
                } else {
                    None
                }
            })
            .collect();
        Presentation {
            title: "activate a skill (read its instructions)".to_owned(),
            body: paths.join("\n"),
        }
    }

    fn execute(
        &self,
        actions: &[Authorized<Action>],
        _env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        let Some(Action::FsRead { path }) = actions.first().map(Authorized::get) else {
            return EffectResult::failed("W-TOOL-004", "expected one authorized fs.read");
        };
        let Some(pin) = self.current.iter().find(|s| {
            std::path::Path::new(&s.dir).join(SKILL_FILE) == std::path::Path::new(path.as_str())
        }) else {
            return EffectResult::failed(
                "W-SKILL-012",
                "the authorized file is no skill of this run",
            );
        };
        // The digest covers every file: reading them to hash is not showing them; only
        // SKILL.md (the authorized read) reaches the model.
        let skill = match Skill::load(std::path::Path::new(&pin.dir)) {
            Ok(s) => s,
            Err(e) => return EffectResult::failure(&e),
        };
        if skill.digest != pin.digest {
            return EffectResult::failure(&changed(pin, &skill.digest));
        }
        EffectResult {
            ok: true,
            result: json!({
                "skill": pin.name,
                "scope": pin.scope.label(),
                "digest": skill.digest,
                "directory": pin.dir,
                "instructions": skill.body,
                "resources": skill.files.iter().filter(|f| f.path != SKILL_FILE).map(|f| &f.path).collect::<Vec<_>>(),
                "allowed_tools_requested": pin.allowed_tools,
                "note": "Resources are read with read_file (path relative to the directory above); each read is decided by policy. allowed-tools is a request, never a grant.",
            }),
        }
    }
}
