//! Which executable a command line names: argv[0] looked up as `execvp` does, with the
//! command's own PATH and working directory, symlinks followed to the canonical file. Policy
//! and the risk recognizers match the program by this file's name, not by argv[0]'s text, so
//! `./ls` linked to `rm` is `rm`. A lookup that finds nothing leaves argv[0] as all there is.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use warrant_core::CanonicalPath;

/// The PATH `execvp` searches when the environment has none (glibc's default).
pub const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// The canonical executable `argv0` names when run in `cwd` with `path_var` as PATH, or `None`
/// when no executable file answers to it.
pub fn resolve(argv0: &str, cwd: &Path, path_var: Option<&str>) -> Option<CanonicalPath> {
    if argv0.is_empty() {
        return None;
    }
    let candidates: Vec<PathBuf> = if argv0.contains('/') {
        vec![cwd.join(argv0)]
    } else {
        path_var
            .unwrap_or(DEFAULT_PATH)
            .split(':')
            // An empty entry means the working directory; relative entries are relative to it.
            .map(|dir| cwd.join(dir).join(argv0))
            .collect()
    };
    candidates.into_iter().find_map(|c| {
        let real = std::fs::canonicalize(&c).ok()?;
        let meta = std::fs::metadata(&real).ok()?;
        let runnable = meta.is_file() && meta.permissions().mode() & 0o111 != 0;
        if !runnable {
            return None;
        }
        CanonicalPath::from_normalized(real.to_str()?).ok()
    })
}

/// The PATH a command's environment holds, if any.
pub fn path_of(env: &[(String, String)]) -> Option<&str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn exe(path: &Path) {
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn argv0_resolves_by_path_cwd_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let bin = root.join("bin");
        let ws = root.join("ws");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        exe(&bin.join("rm"));
        std::fs::write(bin.join("notexec"), "").unwrap();
        std::os::unix::fs::symlink(bin.join("rm"), ws.join("ls")).unwrap();
        let path = bin.to_str().unwrap().to_owned();
        let rm = CanonicalPath::from_normalized(bin.join("rm").to_str().unwrap()).unwrap();
        let got = [
            "rm",
            "./ls",
            "ls",
            "notexec",
            "missing",
            "",
            &format!("{}/ls", ws.display()),
        ]
        .map(|a| resolve(a, &ws, Some(&path)));
        assert_eq!(
            got,
            [
                Some(rm.clone()),
                Some(rm.clone()),
                None,
                None,
                None,
                None,
                Some(rm.clone())
            ]
        );
        // An empty PATH entry is the working directory.
        assert_eq!(resolve("ls", &ws, Some(&format!("{path}:"))), Some(rm));
    }
}
