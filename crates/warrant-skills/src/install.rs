//! Reviewed installs. `stage` reads a source (a skill directory, or a `.zip` archive unpacked
//! into a scratch directory with every entry's path checked) into everything a person must see
//! before approving: every file, the scripts marked, the text of each, the digest. `commit`
//! copies exactly what was shown (the digest is checked again after the copy) into the user
//! skills root and records the approval in the install ledger.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::catalog::{Installed, Ledger};
use crate::error::SkillError;
use crate::skill::{MAX_BYTES, MAX_FILES, SKILL_FILE, Skill};

/// A file as a person reviews it.
#[derive(Clone, Debug, Serialize)]
pub struct ReviewFile {
    pub path: String,
    pub size: u64,
    pub digest: String,
    pub script: bool,
    /// The whole text, or `None` for a file that is not UTF-8 text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Everything a person is shown before approving an install.
#[derive(Clone, Debug, Serialize)]
pub struct Review {
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// Requested, never granted: policy decides every call.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    pub digest: String,
    pub source: PathBuf,
    pub files: Vec<ReviewFile>,
    /// The digest of the installed skill this replaces, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
}

/// A source read and validated, ready to be shown; a scratch copy is removed when dropped.
#[derive(Debug)]
pub struct Staged {
    pub skill: Skill,
    pub source: PathBuf,
    scratch: Option<PathBuf>,
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(s) = &self.scratch {
            let _ = std::fs::remove_dir_all(s);
        }
    }
}

impl Staged {
    /// What the person is shown.
    pub fn review(&self, ledger: &Ledger) -> Review {
        let f = &self.skill.front;
        Review {
            name: f.name.clone(),
            description: f.description.clone(),
            license: f.license.clone(),
            compatibility: f.compatibility.clone(),
            metadata: f.metadata.clone(),
            allowed_tools: f.allowed_tools.clone(),
            digest: self.skill.digest.clone(),
            source: self.source.clone(),
            files: self
                .skill
                .files
                .iter()
                .map(|file| ReviewFile {
                    path: file.path.clone(),
                    size: file.size,
                    digest: file.digest.clone(),
                    script: file.script,
                    text: std::fs::read(self.skill.dir.join(&file.path))
                        .ok()
                        .and_then(|b| String::from_utf8(b).ok()),
                })
                .collect(),
            replaces: ledger.skills.get(&f.name).map(|i| i.digest.clone()),
        }
    }
}

fn unreadable(path: &Path, detail: impl std::fmt::Display) -> SkillError {
    SkillError::Unreadable {
        path: path.to_path_buf(),
        detail: detail.to_string(),
    }
}

/// Reads `source` (a directory or a `.zip`), unpacking an archive under `scratch_root`.
pub fn stage(source: &Path, scratch_root: &Path) -> Result<Staged, SkillError> {
    let source = std::fs::canonicalize(source).map_err(|e| unreadable(source, e))?;
    if source.is_dir() {
        let skill = Skill::load(&source)?;
        return Ok(Staged {
            skill,
            source,
            scratch: None,
        });
    }
    let is_zip = source
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("zip"));
    if !is_zip {
        return Err(unreadable(
            &source,
            "a skill is installed from its directory or from a .zip archive of it",
        ));
    }
    let scratch = scratch_root.join(format!(".staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).map_err(|e| SkillError::Write {
        path: scratch.clone(),
        detail: e.to_string(),
    })?;
    let mut staged = Staged {
        skill: Skill {
            front: crate::skill::Frontmatter {
                name: String::new(),
                description: String::new(),
                license: None,
                compatibility: None,
                metadata: BTreeMap::new(),
                allowed_tools: Vec::new(),
            },
            dir: PathBuf::new(),
            body: String::new(),
            files: Vec::new(),
            digest: String::new(),
        },
        source: source.clone(),
        scratch: Some(scratch.clone()),
    };
    let stem = source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let unpacked = scratch.join("unpacked");
    unzip(&source, &unpacked)?;
    // The archive holds the skill's directory, or the skill's files at its top (then the
    // archive's name is the directory's).
    let dir = if unpacked.join(SKILL_FILE).is_file() {
        let named = scratch.join(&stem);
        std::fs::rename(&unpacked, &named).map_err(|e| SkillError::Write {
            path: named.clone(),
            detail: e.to_string(),
        })?;
        named
    } else {
        let tops: Vec<PathBuf> = std::fs::read_dir(&unpacked)
            .map_err(|e| unreadable(&unpacked, e))?
            .flatten()
            .map(|e| e.path())
            .collect();
        match tops.as_slice() {
            [one] if one.join(SKILL_FILE).is_file() => one.clone(),
            _ => {
                return Err(unreadable(
                    &source,
                    format!(
                        "the archive holds no {SKILL_FILE} at its top or in a single directory"
                    ),
                ));
            }
        }
    };
    staged.skill = Skill::load(&dir)?;
    Ok(staged)
}

fn unzip(archive: &Path, into: &Path) -> Result<(), SkillError> {
    let file = std::fs::File::open(archive).map_err(|e| unreadable(archive, e))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| unreadable(archive, e))?;
    if zip.len() > MAX_FILES {
        return Err(SkillError::Unsafe {
            path: archive.to_path_buf(),
            what: format!("more than {MAX_FILES} entries"),
        });
    }
    let mut total = 0u64;
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| unreadable(archive, e))?;
        let unsafe_entry = |what: String| SkillError::Unsafe {
            path: archive.to_path_buf(),
            what,
        };
        let Some(rel) = entry.enclosed_name() else {
            return Err(unsafe_entry(
                "an entry whose path leaves the archive's directory".to_owned(),
            ));
        };
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(unsafe_entry(format!(
                "an entry with `..` or `.` in its path ({})",
                rel.display()
            )));
        }
        if entry.is_symlink() {
            return Err(unsafe_entry(format!("a symbolic link ({})", rel.display())));
        }
        let target = into.join(&rel);
        let write = |e: std::io::Error| SkillError::Write {
            path: target.clone(),
            detail: e.to_string(),
        };
        if entry.is_dir() {
            std::fs::create_dir_all(&target).map_err(write)?;
            continue;
        }
        total += entry.size();
        if total > MAX_BYTES {
            return Err(unsafe_entry(format!(
                "more than {MAX_BYTES} bytes unpacked"
            )));
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(write)?;
        }
        let mut out = std::fs::File::create(&target).map_err(write)?;
        std::io::copy(&mut (&mut entry).take(MAX_BYTES), &mut out).map_err(write)?;
        // Only the executable bits are kept from the archive (never set-id or sticky).
        if let Some(mode) = entry.unix_mode() {
            use std::os::unix::fs::PermissionsExt;
            let perm = std::fs::Permissions::from_mode(0o644 | (mode & 0o111));
            std::fs::set_permissions(&target, perm).map_err(write)?;
        }
    }
    Ok(())
}

use std::io::Read as _;

fn copy_tree(from: &Path, to: &Path) -> Result<(), SkillError> {
    let write = |p: &Path, e: std::io::Error| SkillError::Write {
        path: p.to_path_buf(),
        detail: e.to_string(),
    };
    std::fs::create_dir_all(to).map_err(|e| write(to, e))?;
    for e in std::fs::read_dir(from).map_err(|e| unreadable(from, e))? {
        let e = e.map_err(|err| unreadable(from, err))?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let kind = e.file_type().map_err(|err| unreadable(&src, err))?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_file() {
            std::fs::copy(&src, &dst).map_err(|err| write(&dst, err))?;
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&src)
                .map(|m| m.permissions().mode())
                .unwrap_or(0o644);
            std::fs::set_permissions(
                &dst,
                std::fs::Permissions::from_mode(0o644 | (mode & 0o111)),
            )
            .map_err(|err| write(&dst, err))?;
        } else {
            return Err(SkillError::Unsafe {
                path: src,
                what: "a symbolic link or special file".to_owned(),
            });
        }
    }
    Ok(())
}

/// Who approved, how, when.
#[derive(Clone, Debug)]
pub struct Approval {
    pub by: String,
    pub via: String,
    pub at: String,
}

/// Installs what was staged into `<user>/skills/<name>/` and records the approval. The copy
/// is checked against the digest the person was shown; a difference undoes the install.
pub fn commit(
    staged: &Staged,
    shown_digest: &str,
    user: &Path,
    approval: &Approval,
) -> Result<Installed, SkillError> {
    let skill = &staged.skill;
    if skill.digest != shown_digest {
        return Err(SkillError::ChangedDuringReview {
            path: staged.source.clone(),
            shown: shown_digest.to_owned(),
            now: skill.digest.clone(),
        });
    }
    let root = user.join("skills");
    let dest = root.join(&skill.front.name);
    let same_place = std::fs::canonicalize(&dest).ok().as_deref() == Some(skill.dir.as_path());
    if !same_place {
        let incoming = root.join(format!(
            ".incoming-{}-{}",
            skill.front.name,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&incoming);
        copy_tree(&skill.dir, &incoming)?;
        let copied = crate::skill::walk(&incoming).map(|f| crate::skill::digest(&f));
        if copied.as_deref().ok() != Some(shown_digest) {
            let _ = std::fs::remove_dir_all(&incoming);
            return Err(SkillError::ChangedDuringReview {
                path: staged.source.clone(),
                shown: shown_digest.to_owned(),
                now: copied.unwrap_or_default(),
            });
        }
        if dest.exists() {
            std::fs::remove_dir_all(&dest).map_err(|e| SkillError::Write {
                path: dest.clone(),
                detail: e.to_string(),
            })?;
        }
        std::fs::rename(&incoming, &dest).map_err(|e| SkillError::Write {
            path: dest.clone(),
            detail: e.to_string(),
        })?;
    } else {
        // Approving the installed copy again: it must still be what was shown.
        let now = Skill::load(&dest)?.digest;
        if now != shown_digest {
            return Err(SkillError::ChangedDuringReview {
                path: dest,
                shown: shown_digest.to_owned(),
                now,
            });
        }
    }
    let record = Installed {
        digest: skill.digest.clone(),
        files: skill
            .files
            .iter()
            .map(|f| (f.path.clone(), f.digest.clone()))
            .collect(),
        source: staged.source.to_string_lossy().into_owned(),
        installed_at: approval.at.clone(),
        approved_by: approval.by.clone(),
        via: approval.via.clone(),
    };
    let mut ledger = Ledger::load(user)?;
    ledger.version = 1;
    ledger
        .skills
        .insert(skill.front.name.clone(), record.clone());
    ledger.save(user)?;
    Ok(record)
}

/// Removes an installed skill (its directory and its ledger entry). `NotFound` when neither
/// exists.
pub fn remove(name: &str, user: &Path) -> Result<Option<Installed>, SkillError> {
    let dir = user.join("skills").join(name);
    let mut ledger = Ledger::load(user)?;
    let record = ledger.skills.remove(name);
    let named_ok = crate::skill::name_problems(name).is_empty();
    if !named_ok || (record.is_none() && !dir.is_dir()) {
        return Err(SkillError::NotFound {
            name: name.to_owned(),
            where_: format!(" installed in {}", user.join("skills").display()),
        });
    }
    if dir.is_dir() {
        std::fs::remove_dir_all(&dir).map_err(|e| SkillError::Write {
            path: dir.clone(),
            detail: e.to_string(),
        })?;
    }
    ledger.save(user)?;
    Ok(record)
}
