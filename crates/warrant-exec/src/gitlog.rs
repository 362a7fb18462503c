//! `git_log` read through `gix`, without the `git` program: the repository is opened isolated
//! (its own configuration only, no environment, no global or system files), and a history walk
//! reads objects and nothing else, so no program a configuration names (fsmonitor, filters,
//! pagers, hooks) can run. The output is the one the hardened `git log` printed before
//! (`--format=%H%x09%an <%ae>%x09%ad%x09%s --date=iso-strict -n MAX [-- PATH]`, a zero offset
//! written `Z` as git 2.4x does), and a test compares the two on the same repository.
//!
//! The walk is git's default one: newest commit date first (ties in the order commits were
//! reached); with a path, a commit is shown when its entry at the path differs from every
//! parent's, and a merge whose entry equals one parent's is followed through that parent only
//! (git's history simplification). Limits: no `log.follow` (renames are not followed), no
//! mailmap, no `i18n.logOutputEncoding` re-encoding (a message is read as UTF-8, lossily).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::path::{Component, Path, PathBuf};

use gix::ObjectId;
use gix::bstr::ByteSlice;

use crate::git::{GitError, GitOutcome, OUTPUT_CAP};

/// `git log -n max [-- path]` in the repository at `repo` (a work tree whose `.git` is a
/// directory).
pub fn log(repo: &Path, max: u32, path: Option<&str>) -> Result<GitOutcome, GitError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| GitError::Failed {
        repo: repo.display().to_string(),
        args: format!("log (gix: {what})"),
        code: 128,
        stderr: e.to_string(),
    };
    let repository = gix::open_opts(repo.join(".git"), gix::open::Options::isolated())
        .map_err(|e| fail("open", &e))?;
    let head = repository
        .head_id()
        .map_err(|e| fail("HEAD has no commit", &e))?
        .detach();
    let path = path.map(normalize).filter(|p| !p.as_os_str().is_empty());
    let entry = |id: ObjectId| -> Result<Option<(ObjectId, u32)>, GitError> {
        let Some(path) = &path else {
            return Ok(None);
        };
        let commit = repository
            .find_commit(id)
            .map_err(|e| fail("read commit", &e))?;
        let tree = commit.tree().map_err(|e| fail("read tree", &e))?;
        let found = tree
            .lookup_entry_by_path(path)
            .map_err(|e| fail("read tree", &e))?;
        Ok(found.map(|e| (e.object_id(), u32::from(e.mode().value()))))
    };

    let mut out = String::new();
    let mut cut = false;
    let mut shown = 0u32;
    let mut seen: HashSet<ObjectId> = HashSet::new();
    // Newest commit time first; among equal times, the one reached first.
    let mut queue: BinaryHeap<(i64, Reverse<u64>, ObjectId)> = BinaryHeap::new();
    let mut order = 0u64;
    let time_of = |id: ObjectId| -> Result<i64, GitError> {
        let commit = repository
            .find_commit(id)
            .map_err(|e| fail("read commit", &e))?;
        Ok(commit.time().map_err(|e| fail("read commit", &e))?.seconds)
    };
    seen.insert(head);
    queue.push((time_of(head)?, Reverse(order), head));
    while let Some((_, _, id)) = queue.pop() {
        if shown >= max {
            break;
        }
        let commit = repository
            .find_commit(id)
            .map_err(|e| fail("read commit", &e))?;
        let parents: Vec<ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
        let (show, follow) = if path.is_none() {
            (true, parents)
        } else {
            let mine = entry(id)?;
            let mut same = None;
            for p in &parents {
                if entry(*p)? == mine {
                    same = Some(*p);
                    break;
                }
            }
            match same {
                // Equal to one parent: not shown, and history continues through it alone.
                Some(p) => (false, vec![p]),
                // A root commit is shown when the path exists in it at all.
                None if parents.is_empty() => (mine.is_some(), parents),
                None => (true, parents),
            }
        };
        for p in follow {
            if seen.insert(p) {
                order += 1;
                queue.push((time_of(p)?, Reverse(order), p));
            }
        }
        if !show {
            continue;
        }
        shown += 1;
        let author = commit.author().map_err(|e| fail("read author", &e))?;
        let time = author.time().map_err(|e| fail("read author date", &e))?;
        let mut date = time
            .format(gix::date::time::format::ISO8601_STRICT)
            .map_err(|e| fail("format author date", &e))?;
        // git writes a zero offset as `Z` in this format.
        if time.offset == 0
            && let Some(local) = date.strip_suffix("+00:00")
        {
            date = format!("{local}Z");
        }
        let message = commit.message_raw().map_err(|e| fail("read message", &e))?;
        let line = format!(
            "{id}\t{} <{}>\t{date}\t{}\n",
            author.name.to_str_lossy(),
            author.email.to_str_lossy(),
            subject(message.as_bytes()),
        );
        if out.len() + line.len() > OUTPUT_CAP {
            let room = OUTPUT_CAP - out.len();
            let mut end = room;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            out.push_str(line.get(..end).unwrap_or_default());
            cut = true;
            break;
        }
        out.push_str(&line);
    }
    Ok(GitOutcome {
        op: "log",
        output: out,
        truncated: cut,
        commit: None,
        files: Vec::new(),
    })
}

/// `%s`: the message's first paragraph, its lines stripped of trailing blanks and joined by a
/// space (leading blank lines skipped), as git's `format_subject` does.
fn subject(message: &[u8]) -> String {
    let text = String::from_utf8_lossy(message);
    let mut lines = text.split('\n').skip_while(|l| l.trim().is_empty());
    let mut out = String::new();
    for line in lines.by_ref() {
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(line);
    }
    out
}

/// The path as git reads a literal pathspec at the top of the work tree: `.` components and a
/// trailing slash dropped.
fn normalize(path: &str) -> PathBuf {
    Path::new(path)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_subject_is_the_first_paragraph_on_one_line() {
        assert_eq!(subject(b"\n\nfix: a\nand b  \n\nbody\n"), "fix: a and b");
        assert_eq!(subject(b"one"), "one");
        assert_eq!(normalize("./src/./a/"), PathBuf::from("src/a"));
    }
}
