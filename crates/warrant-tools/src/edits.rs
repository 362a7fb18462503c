//! `edit_file` and `apply_patch`: exact replacements and unified diffs, normalized into the
//! whole-file `fs.write` / `fs.create` / `fs.delete` actions that `write_file` and `delete_path`
//! make, so policy, approvals (the diff against the file's current content, bound to its hash)
//! and audit treat them alike. The new content is computed when the call is normalized; a file
//! changed after that no longer matches the base an approval was bound to, and the approval is
//! refused at the time of use.
//!
//! Limits: only text files up to `MAX_EDIT_BYTES`; file modes are not carried; a patch's binary
//! and copy sections are refused.

use diffy::patch_set::{FileOperation, ParseOptions, PatchSet};
use serde_json::{Value, json};
use warrant_core::{Action, CanonicalPath, FsDelete, FsWrite, RiskClass, ToolSpec};
use warrant_exec::fs::EditBase;
use warrant_kernel::{
    Authorized, EffectResult, Presentation, ReadFilter, Refusal, StopCheck, Tool, ToolEnv,
};

use crate::builtin::{file_bases, normalize_path, ok, preview_write, shown, spec};

pub(crate) fn all() -> Vec<Box<dyn Tool>> {
    vec![
        Box::new(EditFile(spec(
            "edit_file",
            "Replace exact text in a file: `old` must occur exactly `count` times (default 1); each occurrence becomes `new`. Refused, with the line numbers of the candidates, when it occurs another number of times.",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "minLength": 1},
                "old": {"type": "string", "minLength": 1},
                "new": {"type": "string"},
                "count": {"type": "integer", "minimum": 1}
            }, "required": ["path", "old", "new"], "additionalProperties": false}),
        ))),
        Box::new(ApplyPatch(spec(
            "apply_patch",
            "Apply a unified diff (several files; `--- /dev/null` creates a file, `+++ /dev/null` deletes one, git's `rename from/to` renames). All files or none; a hunk that does not apply is reported with its file, number and line.",
            json!({"type": "object", "properties": {
                "patch": {"type": "string", "minLength": 1}
            }, "required": ["patch"], "additionalProperties": false}),
        ))),
    ]
}

fn refuse(code: &str, message: String) -> Refusal {
    Refusal {
        code: code.into(),
        message,
    }
}

/// The path of an edit, refused before its file is opened when it is not an ordinary file of
/// the workspace: a file policy keeps from the agent (credentials, `.git`, `.warrant`) is never
/// read to compute an edit, so a refusal cannot tell the model what the file holds.
fn edit_path(env: &ToolEnv, raw: &str) -> Result<CanonicalPath, Refusal> {
    let path = normalize_path(env, raw)?;
    if !path.starts_with(&env.workspace) || path == env.workspace {
        return Err(refuse(
            "W-EDIT-006",
            format!(
                "{path} is outside the workspace {}; edits change files of the workspace only",
                env.workspace
            ),
        ));
    }
    let rel = path.relative_to(&env.workspace).unwrap_or_default();
    let tool_dir = rel.split('/').any(|c| c == ".git" || c == ".warrant");
    let secret = warrant_core::risk::classify(&Action::FsWrite {
        path: path.clone(),
        content: String::new(),
    })
    .0 == RiskClass::Secret;
    // The names the default pack's `no-secret-files` forbids, whatever this policy says.
    let denied_name = {
        let name = path.file_name();
        name == ".env"
            || name.starts_with(".env.")
            || name.ends_with(".pem")
            || name.ends_with(".key")
            || ["id_rsa", "id_ed25519", "id_ecdsa"]
                .iter()
                .any(|k| name.starts_with(k))
            || rel.split('/').any(|c| c == ".ssh")
    };
    if tool_dir || secret || denied_name {
        return Err(refuse(
            "W-EDIT-007",
            format!(
                "{} is not edited by edit_file or apply_patch: it is git's or Warrant's own state, or holds credentials",
                shown(&path, env)
            ),
        ));
    }
    Ok(path)
}

/// Line numbers (1-based) where `needle` starts in `text`.
fn lines_of(text: &str, needle: &str) -> Vec<usize> {
    text.match_indices(needle)
        .map(|(i, _)| text.get(..i).unwrap_or_default().matches('\n').count() + 1)
        .collect()
}

fn list(lines: &[usize]) -> String {
    let shown: Vec<String> = lines.iter().take(20).map(ToString::to_string).collect();
    let more = lines.len().saturating_sub(20);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Where a missing `old` might have been meant: lines holding its first non-blank line,
/// trimmed (an indentation or line-ending difference is the usual cause).
fn near_misses(text: &str, old: &str) -> Vec<usize> {
    let Some(first) = old.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return Vec::new();
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(first))
        .map(|(i, _)| i + 1)
        .collect()
}

struct EditFile(ToolSpec);

impl Tool for EditFile {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Change)
    }

    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let raw = args.get("path").and_then(Value::as_str).unwrap_or_default();
        let old = args.get("old").and_then(Value::as_str).unwrap_or_default();
        let new = args.get("new").and_then(Value::as_str).unwrap_or_default();
        let count = args.get("count").and_then(Value::as_u64).unwrap_or(1) as usize;
        if old.is_empty() {
            return Err(refuse("W-TOOL-002", "`old` must not be empty".into()));
        }
        let path = edit_path(env, raw)?;
        let text = match warrant_exec::fs::edit_base(&path) {
            EditBase::Text(t) => t,
            EditBase::Missing => {
                return Err(refuse(
                    "W-EDIT-001",
                    format!(
                        "{} does not exist; create it with write_file",
                        shown(&path, env)
                    ),
                ));
            }
            EditBase::Unusable(why) => {
                return Err(refuse(
                    "W-EDIT-005",
                    format!("{} cannot be edited: {why}", shown(&path, env)),
                ));
            }
        };
        let found = lines_of(&text, old);
        if found.len() != count {
            let name = shown(&path, env);
            let message = if found.is_empty() {
                let near = near_misses(&text, old);
                if near.is_empty() {
                    format!(
                        "`old` does not occur in {name}, and no line holds its first line; read the file again and copy the text exactly"
                    )
                } else {
                    format!(
                        "`old` does not occur in {name}; its first line (trimmed) is on line(s) {}: check indentation and line endings",
                        list(&near)
                    )
                }
            } else {
                format!(
                    "`old` occurs {} times in {name} (lines {}), expected {count}; add surrounding lines to make it unique, or set `count` to {}",
                    found.len(),
                    list(&found),
                    found.len()
                )
            };
            return Err(refuse("W-EDIT-002", message));
        }
        if old == new {
            return Err(refuse(
                "W-EDIT-002",
                "`old` and `new` are the same text; nothing would change".into(),
            ));
        }
        Ok(vec![Action::FsWrite {
            path,
            content: text.replace(old, new),
        }])
    }

    fn base(&self, actions: &[Action], _env: &ToolEnv) -> Value {
        file_bases(actions)
    }

    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
        present_changes("edit", actions, env)
    }

    fn execute(
        &self,
        actions: &[Authorized<Action>],
        env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        apply_all(actions, env)
    }
}

struct ApplyPatch(ToolSpec);

/// One file's part of a patch, normalized.
enum FileChange {
    Write(CanonicalPath, String),
    Create(CanonicalPath, String),
    Delete(CanonicalPath),
}

/// Strips git's `a/` / `b/` prefixes when the patch uses them.
fn strip_ab<'a>(p: &'a str, prefix: &str) -> &'a str {
    p.strip_prefix(prefix).unwrap_or(p)
}

/// A patch's path, checked like `write_file`'s and stricter: relative, no `..`, and not
/// through a symbolic link (its canonical form must be the workspace joined with it).
fn patch_path(env: &ToolEnv, raw: &str) -> Result<CanonicalPath, Refusal> {
    let raw = raw.trim();
    if raw.is_empty()
        || raw.starts_with('/')
        || raw.split('/').any(|c| c == ".." || c == ".")
        || raw.contains('\0')
    {
        return Err(refuse(
            "W-EDIT-004",
            format!(
                "the patch names the path {:?}; patch paths are relative to the workspace, without `.` or `..` components",
                warrant_core::render::inline(raw)
            ),
        ));
    }
    let path = edit_path(env, raw)?;
    let literal = format!(
        "{}/{}",
        env.workspace.as_str().trim_end_matches('/'),
        raw.trim_end_matches('/')
    );
    if path.as_str() != literal {
        return Err(refuse(
            "W-EDIT-004",
            format!(
                "the patch path {:?} goes through a symbolic link (it resolves to {path}); patch the file by its real path",
                warrant_core::render::inline(raw)
            ),
        ));
    }
    Ok(path)
}

/// The text a patch is applied to, for a file that must exist.
fn existing_text(path: &CanonicalPath, env: &ToolEnv) -> Result<String, Refusal> {
    match warrant_exec::fs::edit_base(path) {
        EditBase::Text(t) => Ok(t),
        EditBase::Missing => Err(refuse(
            "W-EDIT-003",
            format!(
                "the patch changes {}, which does not exist",
                shown(path, env)
            ),
        )),
        EditBase::Unusable(why) => Err(refuse(
            "W-EDIT-005",
            format!("{} cannot be patched: {why}", shown(path, env)),
        )),
    }
}

/// Applies one file's hunks, or says which hunk failed, at which line, and what it expected.
fn apply_hunks(base: &str, patch: &diffy::Patch<'_, str>, name: &str) -> Result<String, Refusal> {
    diffy::apply(base, patch).map_err(|e| {
        let text = e.to_string();
        let n: usize = text
            .rsplit('#')
            .next()
            .and_then(|d| d.trim().parse().ok())
            .unwrap_or(0);
        let detail = patch
            .hunks()
            .get(n.saturating_sub(1))
            .map(|h| {
                let expected = h
                    .lines()
                    .iter()
                    .find_map(|l| match l {
                        diffy::Line::Context(t) | diffy::Line::Delete(t) => Some(t.trim_end()),
                        diffy::Line::Insert(_) => None,
                    })
                    .unwrap_or_default();
                format!(
                    "hunk #{n} (@@ -{} @@) does not match {name} at line {}: expected {:?} there or nearby",
                    h.old_range(),
                    h.old_range().start(),
                    warrant_core::render::inline(expected)
                )
            })
            .unwrap_or(text);
        refuse(
            "W-EDIT-003",
            format!("the patch does not apply, nothing was changed: {detail}; the file may have changed since it was read: read it again and make a new patch"),
        )
    })
}

impl ApplyPatch {
    fn changes(&self, patch: &str, env: &ToolEnv) -> Result<Vec<FileChange>, Refusal> {
        let opts = if patch.lines().any(|l| l.starts_with("diff --git ")) {
            ParseOptions::gitdiff()
        } else {
            ParseOptions::unidiff()
        };
        let mut out: Vec<FileChange> = Vec::new();
        let mut touched: Vec<CanonicalPath> = Vec::new();
        let mut claim = |p: &CanonicalPath| -> Result<(), Refusal> {
            if touched.contains(p) {
                return Err(refuse(
                    "W-EDIT-004",
                    format!(
                        "the patch changes {} twice; give each file one section",
                        shown(p, env)
                    ),
                ));
            }
            touched.push(p.clone());
            Ok(())
        };
        for (i, section) in PatchSet::parse(patch, opts).enumerate() {
            let section = section
                .map_err(|e| refuse("W-EDIT-008", format!("the patch cannot be read: {e}")))?;
            let Some(text_patch) = section.patch().as_text() else {
                return Err(refuse(
                    "W-EDIT-008",
                    format!(
                        "section {} of the patch is binary; apply_patch changes text files only",
                        i + 1
                    ),
                ));
            };
            // git's prefixes (a/, b/) are stripped when both sides use them.
            let op = section.operation();
            let (old_p, new_p): (Option<&str>, Option<&str>) = match op {
                FileOperation::Create(p) => (None, Some(strip_ab(p, "b/"))),
                FileOperation::Delete(p) => (Some(strip_ab(p, "a/")), None),
                FileOperation::Modify { original, modified }
                | FileOperation::Rename {
                    from: original,
                    to: modified,
                } => {
                    let ab = original.starts_with("a/") && modified.starts_with("b/");
                    if ab {
                        (
                            Some(strip_ab(original, "a/")),
                            Some(strip_ab(modified, "b/")),
                        )
                    } else {
                        (Some(original.as_ref()), Some(modified.as_ref()))
                    }
                }
                FileOperation::Copy { .. } => {
                    return Err(refuse(
                        "W-EDIT-008",
                        format!(
                            "section {} of the patch copies a file; write the copy with write_file",
                            i + 1
                        ),
                    ));
                }
            };
            match (old_p, new_p) {
                (None, Some(new)) => {
                    let path = patch_path(env, new)?;
                    claim(&path)?;
                    if warrant_exec::fs::exists(&path) {
                        return Err(refuse(
                            "W-EDIT-003",
                            format!(
                                "the patch creates {}, which already exists",
                                shown(&path, env)
                            ),
                        ));
                    }
                    let content = apply_hunks("", text_patch, &shown(&path, env))?;
                    out.push(FileChange::Create(path, content));
                }
                (Some(old), None) => {
                    let path = patch_path(env, old)?;
                    claim(&path)?;
                    let base = existing_text(&path, env)?;
                    let rest = apply_hunks(&base, text_patch, &shown(&path, env))?;
                    if !rest.is_empty() {
                        return Err(refuse(
                            "W-EDIT-003",
                            format!(
                                "the patch deletes {}, but its hunks do not remove all of it: the file changed since the patch was made",
                                shown(&path, env)
                            ),
                        ));
                    }
                    out.push(FileChange::Delete(path));
                }
                (Some(old), Some(new)) => {
                    let from = patch_path(env, old)?;
                    let base = existing_text(&from, env)?;
                    let content = apply_hunks(&base, text_patch, &shown(&from, env))?;
                    if old == new {
                        claim(&from)?;
                        out.push(FileChange::Write(from, content));
                    } else {
                        let to = patch_path(env, new)?;
                        claim(&from)?;
                        claim(&to)?;
                        if warrant_exec::fs::exists(&to) {
                            return Err(refuse(
                                "W-EDIT-003",
                                format!(
                                    "the patch renames {} to {}, which already exists",
                                    shown(&from, env),
                                    shown(&to, env)
                                ),
                            ));
                        }
                        out.push(FileChange::Create(to, content));
                        out.push(FileChange::Delete(from));
                    }
                }
                (None, None) => {
                    return Err(refuse(
                        "W-EDIT-008",
                        format!("section {} of the patch names no file", i + 1),
                    ));
                }
            }
        }
        if out.is_empty() {
            return Err(refuse(
                "W-EDIT-008",
                "the patch holds no file section (`--- a/path` / `+++ b/path` and `@@` hunks)"
                    .into(),
            ));
        }
        Ok(out)
    }
}

impl Tool for ApplyPatch {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Destructive)
    }

    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let patch = args
            .get("patch")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Ok(self
            .changes(patch, env)?
            .into_iter()
            .map(|c| match c {
                FileChange::Write(path, content) => Action::FsWrite { path, content },
                FileChange::Create(path, content) => Action::FsCreate { path, content },
                FileChange::Delete(path) => Action::FsDelete {
                    path,
                    recursive: false,
                },
            })
            .collect())
    }

    fn base(&self, actions: &[Action], _env: &ToolEnv) -> Value {
        file_bases(actions)
    }

    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
        present_changes("patch", actions, env)
    }

    fn execute(
        &self,
        actions: &[Authorized<Action>],
        env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        apply_all(actions, env)
    }
}

/// What a person is shown for file changes: one title naming each file and what happens to it,
/// and the diff of each against what is on disk now (a file holding credentials by size only).
pub(crate) fn present_changes(what: &str, actions: &[Action], env: &ToolEnv) -> Presentation {
    let mut title = Vec::new();
    let mut body = String::new();
    for a in actions {
        match a {
            Action::FsWrite { path, content } | Action::FsCreate { path, content } => {
                let verb = if matches!(a, Action::FsCreate { .. }) {
                    "create"
                } else {
                    "change"
                };
                title.push(format!("{verb} {}", shown(path, env)));
                if warrant_core::risk::classify(a).0 == RiskClass::Secret {
                    body.push_str(&format!(
                        "{} holds credentials; its content is not shown: {} bytes\n",
                        shown(path, env),
                        content.len()
                    ));
                } else {
                    body.push_str(&preview_write(path, content, env));
                }
            }
            Action::FsDelete { path, .. } => {
                title.push(format!("delete {}", shown(path, env)));
                body.push_str(&preview_write(path, "", env));
            }
            Action::FsRead { .. }
            | Action::FsList { .. }
            | Action::FsSearch { .. }
            | Action::ShellExec { .. }
            | Action::ProviderCall { .. }
            | Action::GitRead { .. }
            | Action::GitCommit { .. }
            | Action::GitBranch { .. }
            | Action::GitCheckout { .. }
            | Action::GitPush { .. }
            | Action::MemoryWrite { .. }
            | Action::MemoryRead { .. }
            | Action::MemoryDelete { .. }
            | Action::MemoryPropose { .. }
            | Action::MemoryPublish { .. }
            | Action::McpCall { .. }
            | Action::AgentSpawn { .. }
            | Action::CatalogList { .. }
            | Action::CatalogRead { .. }
            | Action::ArtifactCreate { .. }
            | Action::WebFetch { .. } => {}
        }
    }
    Presentation {
        title: format!("{what}: {}", title.join(", ")),
        body,
    }
}

/// Runs every change or none: each file is written atomically by its executor, and when one
/// fails the files already changed are put back as they were.
fn apply_all(actions: &[Authorized<Action>], _env: &ToolEnv) -> EffectResult {
    let undo = warrant_exec::fs::Undo::before(actions);
    let mut done = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        let step = if let Some(w) = a.narrow::<FsWrite>() {
            warrant_exec::fs::write_file(&w).map(|r| json!(r))
        } else if let Some(d) = a.narrow::<FsDelete>() {
            warrant_exec::fs::delete_path(&d).map(|r| json!(r))
        } else {
            Err(warrant_exec::ExecError::WrongAction {
                executor: "apply_patch",
                verb: a.get().verb(),
            })
        };
        match step {
            Ok(r) => done.push(r),
            Err(e) => {
                let restored = undo.restore(i);
                return EffectResult {
                    ok: false,
                    result: json!({
                        "error": format!(
                            "{e}; the {i} file(s) changed before it were {}",
                            if restored { "put back: no file was changed" } else { "NOT all put back: see `restore_failed`" }
                        ),
                        "code": warrant_core::Coded::code(&e),
                        "restore_failed": !restored,
                    }),
                };
            }
        }
    }
    ok(&json!({ "changed": done }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn occurrences_are_named_by_line() {
        assert_eq!(lines_of("a\nb x\nc\nx", "x"), vec![2, 4]);
        assert_eq!(near_misses("  fn a()\nfn b()\n", "fn a()  \n"), vec![1]);
        assert!(list(&(1..=25).collect::<Vec<_>>()).ends_with("and 5 more"));
    }
}
