//! Path canonicalization: absolute, `.` and `..` removed, every symlink on the way resolved.
//! The algorithm is pure; the one question it asks the filesystem ("is this a link, and to
//! what?") goes through [`LinkResolver`], so it can be tested without a disk and the real
//! resolver stays in the I/O rooms. Components that do not exist yet (a file about to be
//! created) are kept as written.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};
use thiserror::Error;

use crate::error::Coded;

/// Symlinks followed before giving up, as Linux does (`ELOOP` after 40).
pub const MAX_LINKS: usize = 40;

/// An absolute, normalized, symlink-free UTF-8 path. Only [`canonicalize`] and
/// [`CanonicalPath::from_normalized`] (which checks the shape) make one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct CanonicalPath(String);

impl CanonicalPath {
    /// Accepts a path that is already absolute and normalized (from the journal, or the
    /// workspace root after the OS resolved it). Does not touch the filesystem.
    pub fn from_normalized(s: &str) -> Result<Self, PathError> {
        let ok = s.starts_with('/')
            && (s == "/" || !s.ends_with('/'))
            && !s.contains('\0')
            && s.split('/')
                .skip(1)
                .all(|c| s == "/" || !(c.is_empty() || c == "." || c == ".."));
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(PathError::NotNormalized(s.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn as_path(&self) -> &Path {
        Path::new(&self.0)
    }

    /// The last component, or `/` for the root.
    pub fn file_name(&self) -> &str {
        self.0
            .rsplit('/')
            .next()
            .filter(|s| !s.is_empty())
            .unwrap_or("/")
    }

    /// True when `self` is `root` or lies beneath it.
    pub fn starts_with(&self, root: &CanonicalPath) -> bool {
        root.0 == "/"
            || self.0 == root.0
            || (self.0.starts_with(&root.0) && self.0.as_bytes().get(root.0.len()) == Some(&b'/'))
    }

    /// `self` relative to `root`, when beneath it (`.` for the root itself).
    pub fn relative_to(&self, root: &CanonicalPath) -> Option<String> {
        if self.0 == root.0 {
            Some(".".into())
        } else if self.starts_with(root) {
            let skip = if root.0 == "/" { 1 } else { root.0.len() + 1 };
            Some(self.0[skip..].to_owned())
        } else {
            None
        }
    }

    pub fn join_component(&self, name: &str) -> CanonicalPath {
        if self.0 == "/" {
            Self(format!("/{name}"))
        } else {
            Self(format!("{}/{name}", self.0))
        }
    }
}

impl fmt::Display for CanonicalPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for CanonicalPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::from_normalized(&s).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PathError {
    #[error("path is empty")]
    Empty,
    #[error("path {0:?} contains a NUL byte")]
    Nul(String),
    #[error("path {0:?} is not valid UTF-8")]
    NotUtf8(String),
    #[error("path {0:?} is not absolute and normalized")]
    NotNormalized(String),
    #[error("too many symbolic links (more than {MAX_LINKS}) while resolving {0:?}")]
    TooManyLinks(String),
    #[error("could not read the link {path:?}: {message}")]
    Io { path: String, message: String },
}

impl Coded for PathError {
    fn code(&self) -> &'static str {
        match self {
            Self::Empty => "W-PATH-001",
            Self::Nul(_) => "W-PATH-002",
            Self::NotUtf8(_) => "W-PATH-003",
            Self::NotNormalized(_) => "W-PATH-004",
            Self::TooManyLinks(_) => "W-PATH-005",
            Self::Io { .. } => "W-PATH-006",
        }
    }
}

/// The one filesystem question canonicalization asks.
pub trait LinkResolver {
    /// `Some(target)` when `path` is a symbolic link, `None` when it is anything else or does
    /// not exist.
    fn read_link(&self, path: &Path) -> std::io::Result<Option<PathBuf>>;
}

/// Resolve `input` (absolute, or relative to `base`) to a [`CanonicalPath`].
pub fn canonicalize(
    base: &CanonicalPath,
    input: &str,
    resolver: &dyn LinkResolver,
) -> Result<CanonicalPath, PathError> {
    if input.is_empty() {
        return Err(PathError::Empty);
    }
    if input.contains('\0') {
        return Err(PathError::Nul(input.to_owned()));
    }
    // Work list of components still to walk, in order (front = next).
    let mut pending: Vec<String> = Vec::new();
    let start_at_root = Path::new(input).is_absolute();
    push_front(&mut pending, Path::new(input))?;
    let mut resolved: Vec<String> = if start_at_root {
        Vec::new()
    } else {
        split(base.as_str())
    };
    let mut links = 0usize;
    while let Some(component) = pending.pop() {
        match component.as_str() {
            "" | "." => {}
            ".." => {
                resolved.pop();
            }
            name => {
                resolved.push(name.to_owned());
                let here = join(&resolved);
                let link = resolver
                    .read_link(Path::new(&here))
                    .map_err(|e| PathError::Io {
                        path: here.clone(),
                        message: e.to_string(),
                    })?;
                if let Some(target) = link {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(PathError::TooManyLinks(input.to_owned()));
                    }
                    resolved.pop();
                    if target.is_absolute() {
                        resolved.clear();
                    }
                    push_front(&mut pending, &target)?;
                }
            }
        }
    }
    Ok(CanonicalPath(join(&resolved)))
}

fn split(s: &str) -> Vec<String> {
    s.split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect()
}

fn join(components: &[String]) -> String {
    if components.is_empty() {
        "/".to_owned()
    } else {
        format!("/{}", components.join("/"))
    }
}

/// Put the components of `p` at the front of the work list (which is stored reversed).
fn push_front(pending: &mut Vec<String>, p: &Path) -> Result<(), PathError> {
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => {}
            Component::CurDir => parts.push(".".to_owned()),
            Component::ParentDir => parts.push("..".to_owned()),
            Component::Normal(os) => parts.push(
                os.to_str()
                    .ok_or_else(|| PathError::NotUtf8(p.to_string_lossy().into_owned()))?
                    .to_owned(),
            ),
        }
    }
    pending.extend(parts.into_iter().rev());
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// An in-memory set of symlinks.
    struct Links(BTreeMap<String, String>);

    impl LinkResolver for Links {
        fn read_link(&self, path: &Path) -> std::io::Result<Option<PathBuf>> {
            Ok(self.0.get(path.to_str().unwrap_or("")).map(PathBuf::from))
        }
    }

    fn links(pairs: &[(&str, &str)]) -> Links {
        Links(
            pairs
                .iter()
                .map(|(a, b)| ((*a).into(), (*b).into()))
                .collect(),
        )
    }

    fn ws() -> CanonicalPath {
        CanonicalPath::from_normalized("/work/ws").unwrap()
    }

    #[test]
    fn resolves_dots_and_links() {
        let fs = links(&[
            ("/work/ws/out", "/etc"),
            ("/work/ws/rel", "sub/../other"),
            ("/work/ws/loop", "/work/ws/loop"),
        ]);
        let cases = [
            ("a/b/../c", Ok("/work/ws/a/c")),
            ("./a/./b", Ok("/work/ws/a/b")),
            ("../../../../etc/passwd", Ok("/etc/passwd")),
            ("/abs/./x/..", Ok("/abs")),
            ("out/shadow", Ok("/etc/shadow")),
            ("rel/f", Ok("/work/ws/other/f")),
            (".", Ok("/work/ws")),
            ("..", Ok("/work")),
        ];
        for (input, want) in cases {
            let got = canonicalize(&ws(), input, &fs).map(|p| p.as_str().to_owned());
            assert_eq!(got, want.map(str::to_owned), "input {input}");
        }
        assert_eq!(
            canonicalize(&ws(), "loop/x", &fs),
            Err(PathError::TooManyLinks("loop/x".into()))
        );
        assert_eq!(canonicalize(&ws(), "", &fs), Err(PathError::Empty));
        assert_eq!(
            canonicalize(&ws(), "a\0b", &fs),
            Err(PathError::Nul("a\0b".into()))
        );
    }

    #[test]
    fn containment_is_by_component() {
        let root = ws();
        let inside = CanonicalPath::from_normalized("/work/ws/a").unwrap();
        let sibling = CanonicalPath::from_normalized("/work/wsx/a").unwrap();
        assert!(inside.starts_with(&root));
        assert!(root.starts_with(&root));
        assert!(!sibling.starts_with(&root));
        assert_eq!(inside.relative_to(&root).as_deref(), Some("a"));
        assert_eq!(root.relative_to(&root).as_deref(), Some("."));
        assert_eq!(sibling.relative_to(&root), None);
        assert!(CanonicalPath::from_normalized("/a/../b").is_err());
        assert!(CanonicalPath::from_normalized("a/b").is_err());
        assert!(CanonicalPath::from_normalized("/a/").is_err());
        assert!(CanonicalPath::from_normalized("/").is_ok());
    }

    proptest! {
        #[test]
        fn output_is_always_normalized_and_idempotent(
            parts in proptest::collection::vec(prop_oneof!["[a-c]{1,2}", Just("..".to_string()), Just(".".to_string())], 1..12)
        ) {
            let fs = links(&[]);
            let input = parts.join("/");
            let once = canonicalize(&ws(), &input, &fs).unwrap();
            prop_assert!(CanonicalPath::from_normalized(once.as_str()).is_ok());
            let twice = canonicalize(&ws(), once.as_str(), &fs).unwrap();
            prop_assert_eq!(once, twice);
        }
    }
}
