//! The six tools of the CLI contract. Normalization is where paths become canonical and limits
//! are clamped; execution only ever sees what the ring authorized.

use serde::Serialize;
use serde_json::{Value, json};
use similar::TextDiff;
use warrant_core::path::canonicalize;
use warrant_core::{
    Action, CanonicalPath, Coded, Judging, Payload, RiskClass, ShellExec, ToolSpec,
};
use warrant_exec::OsLinks;
use warrant_kernel::{
    Authorized, EffectResult, Presentation, ReadFilter, Refusal, StopCheck, Tool, ToolEnv,
};

pub(crate) fn all() -> Vec<Box<dyn Tool>> {
    let mut tools: Vec<Box<dyn Tool>> = vec![
        Box::new(ReadFile(spec(
            "read_file",
            "Read a UTF-8 text file in the workspace. Returns its content (large files are cut).",
            json!({"type": "object", "properties": {"path": {"type": "string", "minLength": 1}}, "required": ["path"], "additionalProperties": false}),
        ))),
        Box::new(WriteFile(spec(
            "write_file",
            "Create or replace a text file with the given content.",
            json!({"type": "object", "properties": {"path": {"type": "string", "minLength": 1}, "content": {"type": "string"}}, "required": ["path", "content"], "additionalProperties": false}),
        ))),
        Box::new(ListDir(spec(
            "list_dir",
            "List the entries of a directory.",
            json!({"type": "object", "properties": {"path": {"type": "string", "minLength": 1}}, "required": ["path"], "additionalProperties": false}),
        ))),
        Box::new(SearchFiles(spec(
            "search_files",
            "Find lines containing a text pattern in files under a directory (default: the workspace).",
            json!({"type": "object", "properties": {"pattern": {"type": "string", "minLength": 1}, "path": {"type": "string", "minLength": 1}}, "required": ["pattern"], "additionalProperties": false}),
        ))),
        Box::new(DeletePath(spec(
            "delete_path",
            "Delete a file, or a directory when recursive is true.",
            json!({"type": "object", "properties": {"path": {"type": "string", "minLength": 1}, "recursive": {"type": "boolean"}}, "required": ["path"], "additionalProperties": false}),
        ))),
        Box::new(RunCommand(spec(
            "run_command",
            "Run a program (no shell) with arguments, in the workspace or a directory inside it, under a subprocess profile.",
            json!({"type": "object", "properties": {
                "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "cwd": {"type": "string", "minLength": 1},
                "profile": {"type": "string", "minLength": 1},
                "timeout_ms": {"type": "integer", "minimum": 1}
            }, "required": ["argv"], "additionalProperties": false}),
        ))),
    ];
    // Edits, git, tests: the coding tools (issue 15).
    tools.extend(crate::edits::all());
    tools.extend(crate::git::all());
    tools.extend(crate::test_runner::all());
    tools.extend(crate::web::all());
    // Subagents: started and driven by the ring's spawner.
    tools.extend(crate::spawn::all());
    // Requests of a person (question, secret, resource): the ring raises them, no effect.
    tools.extend(crate::requests::all());
    tools
}

pub(crate) fn spec(name: &str, description: &str, schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: schema,
    }
}

fn arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// Canonicalizes a model-given path against the workspace, resolving symlinks on disk.
pub fn normalize_path(env: &ToolEnv, input: &str) -> Result<CanonicalPath, Refusal> {
    canonicalize(&env.workspace, input, &OsLinks).map_err(|e| Refusal {
        code: e.code().into(),
        message: e.to_string(),
    })
}

fn path_arg(args: &Value, env: &ToolEnv, key: &str) -> Result<CanonicalPath, Refusal> {
    let raw = arg(args, key).ok_or_else(|| Refusal {
        code: "W-TOOL-002".into(),
        message: format!("missing string argument `{key}`"),
    })?;
    normalize_path(env, raw)
}

/// An argv as one line a person reads the same way a shell would: each word rendered (no control
/// characters) and quoted when it holds a space, a quote or nothing, so `["rm", "-rf ~"]` and
/// `["rm", "-rf", "~"]` never look alike.
pub(crate) fn shown_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let word = warrant_core::render::inline(a);
            let plain = !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_alphanumeric() || "-_./=:,+@%^~".contains(c));
            if plain {
                word.into_owned()
            } else {
                format!("'{}'", word.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A path as a person is shown it: relative to the workspace when inside it, and always one line
/// (a line feed or carriage return in a name cannot fake a line of the presentation).
pub(crate) fn shown(path: &CanonicalPath, env: &ToolEnv) -> String {
    let text = path
        .relative_to(&env.workspace)
        .unwrap_or_else(|| path.as_str().to_owned());
    warrant_core::render::inline(&text).into_owned()
}

pub(crate) fn ok<T: Serialize>(value: &T) -> EffectResult {
    match serde_json::to_value(value) {
        Ok(result) => EffectResult { ok: true, result },
        Err(e) => fail("W-TOOL-003", &format!("could not encode the result: {e}")),
    }
}

pub(crate) fn fail(code: &str, message: &str) -> EffectResult {
    EffectResult {
        ok: false,
        result: json!({"error": message, "code": code}),
    }
}

fn from_exec<T: Serialize>(r: Result<T, warrant_exec::ExecError>) -> EffectResult {
    match r {
        Ok(v) => ok(&v),
        Err(e) => fail(e.code(), &e.to_string()),
    }
}

/// Runs an executor over exactly one authorized action (the built-ins normalize to one),
/// narrowed to the payload the executor takes; an action of another kind reaches no executor
/// (`W-EXEC-001`, a wiring bug: each tool normalizes to its own kind).
fn single<P: Payload, T: Serialize>(
    actions: &[Authorized<Action>],
    executor: &'static str,
    run: impl Fn(&Authorized<P>) -> Result<T, warrant_exec::ExecError>,
) -> EffectResult {
    match actions {
        [one] => from_exec(match one.narrow::<P>() {
            Some(payload) => run(&payload),
            None => Err(warrant_exec::ExecError::WrongAction {
                executor,
                verb: one.get().verb(),
            }),
        }),
        [] | [_, _, ..] => fail(
            "W-TOOL-004",
            &format!("expected one authorized action, got {}", actions.len()),
        ),
    }
}

/// A unified diff of a proposed write against what is on disk now, for the person to see.
pub fn preview_write(path: &CanonicalPath, content: &str, env: &ToolEnv) -> String {
    let name = shown(path, env);
    let before = warrant_exec::fs::preview_text(path).unwrap_or_default();
    TextDiff::from_lines(before.as_str(), content)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string()
}

/// The content hash of every file a write, create or delete would change (`null` where there
/// is no regular file): the base a diff or a deletion was shown against.
pub(crate) fn file_bases(actions: &[Action]) -> Value {
    Value::Array(
        actions
            .iter()
            .map(|a| {
                let changed = warrant_core::FsWrite::of(a)
                    .map(|w| w.path)
                    .or_else(|| warrant_core::FsDelete::of(a).map(|d| d.path));
                changed.map_or(Value::Null, |path| {
                    json!(warrant_exec::fs::content_digest(&path))
                })
            })
            .collect(),
    )
}

struct ReadFile(ToolSpec);
struct WriteFile(ToolSpec);
struct ListDir(ToolSpec);
struct SearchFiles(ToolSpec);
struct DeletePath(ToolSpec);
pub(crate) struct RunCommand(ToolSpec);

impl RunCommand {
    /// `run_command` itself, for tools that run a command the same way (`run_tests`).
    pub(crate) fn tool() -> Self {
        Self(spec("run_command", "", json!({})))
    }
}

impl Tool for ReadFile {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Read)
    }
    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        Ok(vec![Action::FsRead {
            path: path_arg(args, env, "path")?,
        }])
    }
    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
        describe_paths("read", actions, env)
    }
    fn execute(
        &self,
        actions: &[Authorized<Action>],
        env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        single(actions, "read_file", |a| {
            warrant_exec::fs::read_file(a, &env.workspace)
        })
    }
}

impl Tool for WriteFile {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Change)
    }
    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let path = path_arg(args, env, "path")?;
        let content = arg(args, "content").unwrap_or_default().to_owned();
        // Whether this creates or replaces is part of what is decided and shown.
        let exists = warrant_exec::fs::exists(&path);
        Ok(vec![if exists {
            Action::FsWrite { path, content }
        } else {
            Action::FsCreate { path, content }
        }])
    }
    fn base(&self, actions: &[Action], _env: &ToolEnv) -> Value {
        file_bases(actions)
    }
    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
        let mut title = Vec::new();
        let mut body = String::new();
        for a in actions {
            if let Action::FsWrite { path, content } | Action::FsCreate { path, content } = a {
                let verb = if matches!(a, Action::FsCreate { .. }) {
                    "create"
                } else {
                    "write"
                };
                title.push(format!("{verb} {}", shown(path, env)));
                // A file that holds credentials is shown by size and digest: a person
                // approving it must not be handed the secret (nor the journal, which keeps
                // what was shown).
                if warrant_core::risk::classify(a).0 == warrant_core::RiskClass::Secret {
                    body.push_str(&format!(
                        "{} holds credentials; its content is not shown: {} bytes, {}\n",
                        shown(path, env),
                        content.len(),
                        warrant_core::Digest::of_bytes(content.as_bytes())
                    ));
                } else {
                    body.push_str(&preview_write(path, content, env));
                }
            }
        }
        Presentation {
            title: title.join(", "),
            body,
        }
    }
    fn execute(
        &self,
        actions: &[Authorized<Action>],
        _env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        single(actions, "write_file", warrant_exec::fs::write_file)
    }
}

impl Tool for ListDir {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Read)
    }
    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        Ok(vec![Action::FsList {
            path: path_arg(args, env, "path")?,
        }])
    }
    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
        describe_paths("list", actions, env)
    }
    fn execute(
        &self,
        actions: &[Authorized<Action>],
        _env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        single(actions, "list_dir", warrant_exec::fs::list_dir)
    }
}

impl Tool for SearchFiles {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Read)
    }
    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let path = match arg(args, "path") {
            Some(p) => normalize_path(env, p)?,
            None => env.workspace.clone(),
        };
        Ok(vec![Action::FsSearch {
            path,
            pattern: arg(args, "pattern").unwrap_or_default().to_owned(),
        }])
    }
    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
        describe_paths("search", actions, env)
    }
    fn execute(
        &self,
        actions: &[Authorized<Action>],
        _env: &ToolEnv,
        may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        single(actions, "search", |a| warrant_exec::fs::search(a, may_read))
    }
}

impl Tool for DeletePath {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Destructive)
    }
    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        Ok(vec![Action::FsDelete {
            path: path_arg(args, env, "path")?,
            recursive: args
                .get("recursive")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        }])
    }
    fn base(&self, actions: &[Action], _env: &ToolEnv) -> Value {
        file_bases(actions)
    }
    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
        let mut p = describe_paths("delete", actions, env);
        if actions.iter().any(|a| {
            matches!(
                a,
                Action::FsDelete {
                    recursive: true,
                    ..
                }
            )
        }) {
            p.title.push_str(" (recursively, with everything inside)");
        }
        p
    }
    fn execute(
        &self,
        actions: &[Authorized<Action>],
        _env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        single(actions, "delete_path", warrant_exec::fs::delete_path)
    }
}

impl Tool for RunCommand {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    /// Any class: the command line is the model's (`cargo publish` is irreversible).
    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Irreversible)
    }
    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let argv: Vec<String> = args
            .get("argv")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if argv.is_empty() || argv[0].is_empty() {
            return Err(Refusal {
                code: "W-TOOL-002".into(),
                message: "argv must name a program".into(),
            });
        }
        let cwd = match arg(args, "cwd") {
            Some(c) => normalize_path(env, c)?,
            None => env.workspace.clone(),
        };
        // A subagent held to a profile runs its commands under it unless told otherwise (the
        // ring refuses any other).
        let held = env.run.as_ref().and_then(|r| r.held_profile());
        let profile_name = arg(args, "profile")
            .or(held)
            .unwrap_or("default")
            .to_owned();
        let profile = env.profiles.get(&profile_name).ok_or_else(|| Refusal {
            code: "W-TOOL-005".into(),
            message: format!(
                "unknown subprocess profile `{profile_name}`; configured: {}",
                env.profiles.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        })?;
        // The model may ask for less time than the profile allows, never more.
        let timeout_ms = args
            .get("timeout_ms")
            .and_then(Value::as_u64)
            .map_or(profile.timeout_ms, |t| t.min(profile.timeout_ms));
        // The program as the command will find it: its own PATH (the profile's minimized
        // environment) and working directory, symlinks followed.
        let env_of = warrant_exec::minimize_env(profile, env.parent_env.iter().cloned());
        let program = warrant_exec::program::resolve(
            &argv[0],
            cwd.as_path(),
            warrant_exec::program::path_of(&env_of),
        );
        Ok(vec![Action::ShellExec {
            argv,
            cwd,
            profile: profile_name,
            timeout_ms,
            program,
            contained: profile.is_contained(),
            judged: judging(profile, env),
        }])
    }
    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
        let mut title = Vec::new();
        let mut body = String::new();
        for a in actions {
            if let Action::ShellExec {
                argv,
                cwd,
                profile,
                timeout_ms,
                program,
                contained,
                judged,
            } = a
            {
                title.push(format!("run {}", shown_argv(argv)));
                let found = match program {
                    Some(p) => warrant_core::render::inline(p.as_str()).into_owned(),
                    None => "not found on the command's PATH; known only by argv[0]".to_owned(),
                };
                let inherit = env
                    .profiles
                    .get(profile)
                    .map(|p| format!("{:?}", p.inherit_env).to_lowercase())
                    .unwrap_or_else(|| "?".into());
                let given = crate::secrets::shown(profile, env);
                let mut confinement = env
                    .profiles
                    .get(profile)
                    .map(|p| confinement_words(p, *contained))
                    .unwrap_or_else(|| "unknown profile".into());
                if *contained && *judged == Judging::Argv {
                    confinement.push_str(JUDGED_BY_ARGV);
                }
                body.push_str(&format!(
                    "argv:    {}\nprogram: {found}\ncwd:     {cwd}\nprofile: {profile} (timeout {timeout_ms} ms, environment: {inherit} + profile settings, secrets {})\nconfinement: {confinement}\n",
                    serde_json::to_string(argv).unwrap_or_default(),
                    if given.is_empty() { "never".to_owned() } else { given }
                ));
            }
        }
        Presentation {
            title: title.join(", "),
            body,
        }
    }
    fn execute(
        &self,
        actions: &[Authorized<Action>],
        env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        stop: StopCheck<'_>,
    ) -> EffectResult {
        // The secrets this profile's commands receive, resolved before anything runs.
        let secrets = match crate::secrets::for_actions(actions, env) {
            Ok(s) => s,
            Err((code, message)) => return fail(&code, &message),
        };
        let outcome = single(actions, "run_command", |a: &Authorized<ShellExec>| {
            let profile_name = a.get().profile.as_str();
            let profile = env.profiles.get(profile_name).cloned().unwrap_or_default();
            // A sandboxed profile runs through this same binary's hidden `__sandbox` entry point.
            let confinement = match warrant_exec::SandboxPlan::from_profile(
                profile_name,
                &profile,
                &env.workspace,
                &warrant_exec::fs::OsLinks,
            )? {
                Some(plan) => Some(warrant_exec::Confinement {
                    plan,
                    launcher: warrant_exec::Launcher::current_exe()?,
                }),
                None => None,
            };
            warrant_exec::spawn::run_command_with_secrets(
                a,
                &profile,
                &env.parent_env,
                stop,
                confinement.as_ref(),
                &crate::secrets::as_env(&secrets),
            )
        });
        // A command may print what it was given: its values never reach the journal or the model.
        let mut result = crate::secrets::redact(outcome, &secrets);
        // Changes that wait for a person: the ring asks, showing exactly what they are.
        let pending = result
            .result
            .get("changes")
            .filter(|c| c.get("pending").is_some_and(|p| !p.is_null()))
            .cloned();
        if let (Some(changes), Some(map)) = (pending, result.result.as_object_mut()) {
            let argv = actions
                .first()
                .map(|a| match a.get() {
                    Action::ShellExec { argv, .. } => shown_argv(argv),
                    other @ (Action::FsRead { .. }
                    | Action::FsList { .. }
                    | Action::FsSearch { .. }
                    | Action::FsWrite { .. }
                    | Action::FsCreate { .. }
                    | Action::FsDelete { .. }
                    | Action::ProviderCall { .. }
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
                    | Action::WebFetch { .. }
                    | Action::AgentSpawn { .. }
                    | Action::McpCall { .. }
                    | Action::CatalogList { .. }
                    | Action::CatalogRead { .. }
                    | Action::ArtifactCreate { .. }) => other.target(),
                })
                .unwrap_or_default();
            let shown = changes.get("shown").and_then(Value::as_str).unwrap_or("");
            map.insert(
                warrant_kernel::PENDING_JUDGEMENT.to_owned(),
                warrant_kernel::PendingJudgement {
                    risk: RiskClass::Destructive,
                    title: format!("let the changes of `{argv}` land"),
                    body: format!(
                        "The command ran contained; what it changed is held apart and reaches the workspace only if you approve.\nIt deletes or shortens files that existed:\n\n{shown}"
                    ),
                    digest: changes
                        .get("digest")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                }
                .to_value(),
            );
        }
        result
    }

    fn settle(
        &self,
        actions: &[Authorized<Action>],
        result: &Value,
        approved: bool,
        env: &ToolEnv,
    ) -> EffectResult {
        let [action] = actions else {
            return fail(
                "W-TOOL-004",
                &format!("expected one authorized action, got {}", actions.len()),
            );
        };

        let judgement = result
            .get("changes")
            .cloned()
            .and_then(|c| serde_json::from_value::<warrant_exec::judged::Judgement>(c).ok());
        let Some(judgement) = judgement else {
            return EffectResult {
                ok: false,
                result: serde_json::json!({"error": "the command's result holds no changes to settle", "result": result}),
            };
        };
        let mut out = result.clone();
        let settled = match action.narrow::<ShellExec>() {
            Some(exec) => warrant_exec::judged::settle(&exec, &judgement, &env.workspace, approved),
            None => Err(warrant_exec::ExecError::WrongAction {
                executor: "settle",
                verb: action.get().verb(),
            }),
        };
        match settled {
            Ok(settled) => {
                out["changes"] = serde_json::to_value(&settled).unwrap_or(Value::Null);
                EffectResult {
                    ok: result.get("exit_code").is_some_and(|c| c == 0),
                    result: out,
                }
            }
            Err(e) => {
                out["changes"]["error"] =
                    serde_json::json!({"code": e.code(), "message": e.to_string()});
                EffectResult {
                    ok: false,
                    result: out,
                }
            }
        }
    }
}

/// How a command of `profile` is judged here: a contained one by its changeset, unless this
/// machine builds the view but cannot layer the workspace (no overlays), in which case by its
/// argv before it runs. Where even the view cannot be built, by its changeset still: the
/// executor then refuses it, as the default confinement requires.
pub(crate) fn judging(profile: &warrant_core::config::ProfileConfig, env: &ToolEnv) -> Judging {
    if !profile.is_contained() {
        return Judging::Changeset;
    }
    if env.no_overlays {
        return Judging::Argv;
    }
    let (Ok(launcher), Some(scratch)) = (
        warrant_exec::Launcher::current_exe(),
        warrant_exec::judged::layers_dir(),
    ) else {
        return Judging::Changeset;
    };
    if std::fs::create_dir_all(&scratch).is_err() {
        return Judging::Changeset;
    }
    match warrant_exec::sandbox::overlays(&launcher, &scratch) {
        warrant_exec::sandbox::Overlays::Unavailable(_) => Judging::Argv,
        warrant_exec::sandbox::Overlays::Available | warrant_exec::sandbox::Overlays::NoView(_) => {
            Judging::Changeset
        }
    }
}

/// Added to a contained command's confinement words where overlays are unavailable.
pub const JUDGED_BY_ARGV: &str = "; NO OVERLAYS on this machine: its writes land in the workspace directly, so it was judged by its argv before it ran, not by what it changed";

/// What confines a profile's commands, in the words an approval prompt shows.
pub fn confinement_words(profile: &warrant_core::config::ProfileConfig, contained: bool) -> String {
    use warrant_core::config::{Enforcement, Isolation, NetworkPolicy};
    let Some(sandbox) = profile.sandbox.as_ref().filter(|_| !profile.unconfined) else {
        return "NONE: this profile is unconfined, so the command can read, change and send anything this user can; every command of it is asked".to_owned();
    };
    let network = match &sandbox.network {
        NetworkPolicy::None => "no network".to_owned(),
        NetworkPolicy::Host => "the HOST NETWORK, unfiltered".to_owned(),
        NetworkPolicy::Allow(list) => format!("network only to {}", list.join(", ")),
    };
    let view = match sandbox.isolation {
        Isolation::Namespaces => {
            "writes only inside the workspace; .git read-only; .warrant, .env and key files hidden; a private home and /tmp"
        }
        Isolation::Landlock => {
            "Landlock rules over the host's view: writes only inside the workspace; .git read-only; denied names unreadable"
        }
    };
    let enforcement = match sandbox.enforcement {
        Enforcement::Required => "",
        Enforcement::BestEffort => {
            "; best effort: it may run with less where this machine lacks a mechanism"
        }
    };
    let asked = if contained {
        ""
    } else {
        "; wider than the default confinement, so it is asked"
    };
    format!("{network}; {view}{enforcement}{asked}")
}

fn describe_paths(verb: &str, actions: &[Action], env: &ToolEnv) -> Presentation {
    let targets: Vec<String> = actions
        .iter()
        .map(|a| match a {
            Action::FsRead { path }
            | Action::FsList { path }
            | Action::FsSearch { path, .. }
            | Action::FsWrite { path, .. }
            | Action::FsCreate { path, .. }
            | Action::FsDelete { path, .. } => shown(path, env),
            Action::ShellExec { .. }
            | Action::ProviderCall { .. }
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
            | Action::WebFetch { .. } => a.target(),
        })
        .collect();
    Presentation {
        title: format!("{verb} {}", targets.join(", ")),
        body: actions
            .iter()
            .map(|a| format!("{} {}\n", a.verb().as_str(), a.target()))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::{shown_argv, single};
    use warrant_core::{Action, CanonicalPath};
    use warrant_kernel::Authorized;

    #[test]
    fn an_action_of_another_kind_reaches_no_executor() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let ws = CanonicalPath::from_normalized(real.to_str().unwrap()).unwrap();
        let file = ws.join_component("f");
        std::fs::write(file.as_path(), "x").unwrap();
        let actions = [Authorized::for_tests(Action::FsDelete {
            path: file.clone(),
            recursive: false,
        })];
        // A delete routed to the read executor narrows to no read: refused, nothing touched.
        let refused = single(&actions, "read_file", |a| {
            warrant_exec::fs::read_file(a, &ws)
        });
        assert!(!refused.ok);
        assert_eq!(refused.result["code"], "W-EXEC-001");
        assert!(file.as_path().exists());
        // Routed to its own executor, the same action runs.
        let done = single(&actions, "delete_path", warrant_exec::fs::delete_path);
        assert!(done.ok, "{}", done.result);
        assert!(!file.as_path().exists());
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn an_argv_is_shown_on_one_line_with_its_word_boundaries() {
        assert_eq!(shown_argv(&argv(&["ls", "-la"])), "ls -la");
        assert_eq!(shown_argv(&argv(&["rm", "-rf ~"])), "rm '-rf ~'");
        assert_eq!(shown_argv(&argv(&["rm", "-rf", "~"])), "rm -rf ~");
        assert_eq!(shown_argv(&argv(&["echo", ""])), "echo ''");
        assert_eq!(shown_argv(&argv(&["echo", "it's"])), r"echo 'it'\''s'");
        assert_eq!(
            shown_argv(&argv(&["sh", "-c", "rm -rf ~\rls"])),
            r"sh -c 'rm -rf ~\rls'"
        );
        assert_eq!(shown_argv(&argv(&["x\ny"])), r"'x\ny'");
    }
}
