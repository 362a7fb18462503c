//! Executors behind the effect ring (Linux): subprocess profiles (env minimization, process
//! groups, timeouts, output caps) and the filesystem. Every executor takes the authorized payload
//! of its one kind (`Authorized<FsRead>`, `Authorized<ShellExec>`, …, narrowed by the kernel from
//! an authorized action) and reads every target from it, so what runs is exactly what was
//! decided.

pub mod census;
pub mod cgroup;
pub mod changeset;
pub mod child;
pub mod egress;
pub mod env;
pub mod error;
pub mod fs;
pub mod git;
pub mod gitlog;
pub mod grants;
pub mod judged;
pub mod keyring;
pub mod netns;
pub mod output;
pub mod program;
pub mod resource;
pub mod sandbox;
pub mod spawn;
pub mod vault;
pub mod view;
pub mod web;

pub use changeset::{Applied, Change, Changeset, Effect, EffectClass, Finding, Node};
pub use env::{COMMAND_MARK, minimize_env, secret_pattern, validate_profile};
pub use error::ExecError;
pub use fs::{
    DeleteReceipt, DirEntry, DirListing, EntryKind, FileContent, OsLinks, SearchResult, SkipCounts,
    WriteReceipt, delete_path, list_dir, read_file, search, write_file,
};
pub use output::{CapturedStream, HeadTail};
pub use sandbox::{
    Launcher, LauncherChoice, Mechanism, OverlaySpec, SMALL_LAUNCHER, SandboxPlan, SandboxReport,
    sandbox_main,
};
pub use spawn::{
    Confinement, ExecOutcome, STOP_POLL, run_command, run_command_confined, run_command_until,
};
