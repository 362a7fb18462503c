//! Where things are and how they are loaded: the workspace and its `.warrant/`, the three
//! configuration layers, the principal of this process, the policy set, the store, the keys.
//! Each loader turns its failure into a coded, specific message before anything runs.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use warrant_audit::{AuditKey, Checkpointer, InstallationSealer, JsonlSink, PublicKeys};
use warrant_core::config::{
    Layer, LayerKind, ResolvedIdentity, Settings, merge_settings, resolve_identity,
};
use warrant_core::{CanonicalPath, IdSource, RandomIds, SystemClock};
use warrant_policy::{PolicyEngine, PolicySource};
use warrant_store::EventStore;

use crate::notice::{Notice, Notices};
use crate::{Class, HostError};

pub const DOT: &str = ".warrant";
pub const CONFIG_FILE: &str = "config.toml";
pub const POLICY_DIR: &str = "policies";
pub const KEYS_DIR: &str = "keys";
pub const STORE_FILE: &str = "store.db";
pub const SECRET_FILE: &str = "installation.secret";
pub const INSTALLATION_FILE: &str = "installation.id";

#[derive(Debug, Clone)]
pub struct Paths {
    /// `--store`: a PostgreSQL URL or a SQLite file, instead of the configured store.
    pub store_override: Option<String>,
    pub workspace: PathBuf,
    pub dot: PathBuf,
    pub managed: PathBuf,
    pub user: Option<PathBuf>,
}

impl Paths {
    pub fn keys(&self) -> PathBuf {
        self.dot.join(KEYS_DIR)
    }

    pub fn store(&self) -> PathBuf {
        self.dot.join(STORE_FILE)
    }

    pub fn workspace_canonical(&self) -> Result<CanonicalPath, HostError> {
        let s = self.workspace.to_str().ok_or_else(|| {
            HostError::usage(
                "W-PATH-003",
                format!("workspace path {:?} is not UTF-8", self.workspace),
            )
        })?;
        CanonicalPath::from_normalized(s).map_err(|e| HostError::bad_input(&e))
    }
}

fn env_map() -> BTreeMap<String, String> {
    std::env::vars().collect()
}

/// Resolves the workspace: `--workspace`, else the nearest ancestor with `.warrant/`, else the
/// current directory (for `init`).
pub fn paths(at: &crate::Where, for_init: bool) -> Result<Paths, HostError> {
    let arg = at.workspace();
    let store_override = at.store.clone();
    let env = env_map();
    let start = match arg {
        Some(p) => p.to_owned(),
        None => std::env::current_dir().map_err(|e| {
            HostError::usage(
                "W-CLI-001",
                format!("cannot read the current directory: {e}"),
            )
        })?,
    };
    let start = fs::canonicalize(&start).map_err(|e| {
        HostError::usage(
            "W-CLI-001",
            format!("workspace {} is not accessible: {e}", start.display()),
        )
    })?;
    let workspace = if for_init || arg.is_some() {
        start
    } else {
        start
            .ancestors()
            .find(|d| d.join(DOT).is_dir())
            .map(Path::to_owned)
            .ok_or_else(|| {
                HostError::usage(
                    "W-CLI-002",
                    format!("no .warrant/ in {} or any parent", start.display()),
                )
                .with_hint(crate::Hint::Init)
            })?
    };
    if !for_init && !workspace.join(DOT).is_dir() {
        return Err(HostError::usage(
            "W-CLI-002",
            format!("{} has no .warrant/", workspace.display()),
        )
        .with_hint(crate::Hint::Init));
    }
    let managed = at
        .managed_dir
        .clone()
        .or_else(|| env.get("WARRANT_MANAGED_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/etc/warrant"));
    let user = at.user_dir.clone().or_else(|| {
        env.get("XDG_CONFIG_HOME")
            .filter(|s| !s.is_empty())
            .map(|x| PathBuf::from(x).join("warrant"))
            .or_else(|| {
                env.get("HOME")
                    .map(|h| PathBuf::from(h).join(".config/warrant"))
            })
    });
    Ok(Paths {
        store_override,
        dot: workspace.join(DOT),
        workspace,
        managed,
        user,
    })
}

fn layer_dirs(paths: &Paths) -> Vec<(LayerKind, PathBuf)> {
    let mut v = vec![(LayerKind::Managed, paths.managed.clone())];
    if let Some(u) = &paths.user {
        v.push((LayerKind::User, u.clone()));
    }
    v.push((LayerKind::Project, paths.dot.clone()));
    v
}

pub fn read_layers(paths: &Paths) -> Result<Vec<Layer>, HostError> {
    crate::config_check::verify_managed_pin(paths)?;
    let mut layers = Vec::new();
    for (kind, dir) in layer_dirs(paths) {
        let file = dir.join(CONFIG_FILE);
        match fs::read_to_string(&file) {
            Ok(text) => layers.push(
                Layer::parse(kind, &file.display().to_string(), &text)
                    .map_err(|e| HostError::bad_input(&e))?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(HostError::usage(
                    "W-CONFIG-006",
                    format!("cannot read {}: {e}", file.display()),
                ));
            }
        }
    }
    Ok(layers)
}

/// The operating system user: the account of our uid, else `$USER`.
fn os_user() -> Option<String> {
    let uid = rustix::process::getuid().as_raw().to_string();
    let from_passwd = fs::read_to_string("/etc/passwd").ok().and_then(|text| {
        text.lines().find_map(|l| {
            let mut parts = l.split(':');
            let name = parts.next()?;
            let _pw = parts.next()?;
            (parts.next()? == uid).then(|| name.to_owned())
        })
    });
    from_passwd.or_else(|| std::env::var("USER").ok())
}

pub fn identity(layers: &[Layer]) -> Result<ResolvedIdentity, HostError> {
    resolve_identity(layers, &env_map(), os_user().as_deref()).map_err(|e| HostError::bad_input(&e))
}

pub fn settings(layers: &[Layer]) -> Result<Settings, HostError> {
    let settings = merge_settings(layers);
    for (name, profile) in &settings.profiles {
        warrant_exec::validate_profile(name, profile).map_err(|e| HostError::bad_input(&e))?;
    }
    Ok(settings)
}

/// Reads `policies/*.cedar` of every layer and validates them strictly: one bad policy and
/// nothing runs.
pub fn policy(paths: &Paths) -> Result<PolicyEngine, HostError> {
    policy_with(paths, &ValidatedSets::of_this_build())
}

/// [`policy`], validating the set whatever was remembered: for the commands that exist to
/// check (`warrant config check`, `doctor`).
pub fn policy_fully_checked(paths: &Paths) -> Result<PolicyEngine, HostError> {
    policy_with(paths, &warrant_policy::NoMemo)
}

fn policy_with(
    paths: &Paths,
    memo: &dyn warrant_policy::ValidationMemo,
) -> Result<PolicyEngine, HostError> {
    PolicyEngine::load_remembering(&policy_sources(paths)?, memo)
        .map(|engine| engine.with_recognizers(crate::controls::recognizers()))
        .map_err(|e| HostError::bad_input(&e))
}

/// The policy sets this build of `warrant` validated before: an empty file per set in the
/// user's state directory (`validated/` under [`warrant_exec::judged::state_dir`], mode
/// 0700), named for the set's validation key and for this executable (its inode, size,
/// modification and change times, so a rebuilt or replaced binary validates afresh). Only the
/// person running Warrant can write there, as with their own policy files: a command's view
/// hides the home directory. Where the directory or the executable cannot be read, nothing is
/// remembered and every load validates.
struct ValidatedSets {
    dir: Option<PathBuf>,
    build: Option<String>,
}

impl ValidatedSets {
    fn of_this_build() -> Self {
        use std::os::unix::fs::MetadataExt;
        let build = std::env::current_exe()
            .and_then(fs::metadata)
            .ok()
            .map(|m| {
                format!(
                    "{}:{}:{}.{}:{}.{}",
                    m.ino(),
                    m.len(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ctime(),
                    m.ctime_nsec()
                )
            });
        Self {
            dir: warrant_exec::judged::state_dir().map(|d| d.join("validated")),
            build,
        }
    }

    fn marker(&self, key: &warrant_core::Digest) -> Option<PathBuf> {
        let (dir, build) = (self.dir.as_ref()?, self.build.as_ref()?);
        let name = warrant_core::Digest::of_bytes(format!("{key}\0{build}").as_bytes());
        let hex = name.as_str().strip_prefix("sha256:")?;
        Some(dir.join(hex))
    }
}

impl warrant_policy::ValidationMemo for ValidatedSets {
    fn passed(&self, key: &warrant_core::Digest) -> bool {
        self.marker(key)
            .is_some_and(|m| fs::symlink_metadata(m).is_ok_and(|m| m.is_file()))
    }

    fn remember(&self, key: &warrant_core::Digest) {
        use std::os::unix::fs::DirBuilderExt;
        let (Some(marker), Some(dir)) = (self.marker(key), self.dir.as_ref()) else {
            return;
        };
        // Best effort: a home that cannot be written only means the next load validates too.
        let _ = fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .and_then(|()| fs::File::create(marker));
    }
}

/// The policy files of every layer, in load order.
pub fn policy_sources(paths: &Paths) -> Result<Vec<PolicySource>, HostError> {
    let mut sources = Vec::new();
    for (kind, dir) in layer_dirs(paths) {
        let pdir = dir.join(POLICY_DIR);
        let entries = match fs::read_dir(&pdir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(HostError::usage(
                    "W-POLICY-010",
                    format!("cannot read {}: {e}", pdir.display()),
                ));
            }
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "cedar"))
            .collect();
        files.sort();
        for file in files {
            let text = fs::read_to_string(&file).map_err(|e| {
                HostError::usage(
                    "W-POLICY-010",
                    format!("cannot read {}: {e}", file.display()),
                )
            })?;
            sources.push(PolicySource {
                layer: kind,
                path: file.display().to_string(),
                text,
            });
        }
    }
    Ok(sources)
}

/// The installation's store, keys and sink.
pub struct Installation {
    pub store: Box<dyn EventStore + Send + Sync>,
    /// The tenant of this process's identity: every read a person's command makes of the
    /// store is scoped to it ([`Installation::scoped`]).
    pub tenant: warrant_store::Tenant,
    /// The actor of this process's identity, named in a refused cross-tenant attempt.
    pub actor: String,
    /// Configured sinks besides the JSONL file, by name.
    pub sinks: std::collections::BTreeMap<String, warrant_core::config::SinkConfig>,
    pub fail_after_ms: u64,
    pub max_pending: u64,
    pub on_full: warrant_core::config::OnFull,
    /// Where the store is, for messages (a URL never shows its password).
    pub store_location: String,
    pub sealer: InstallationSealer,
    pub secret: Vec<u8>,
    pub sink: JsonlSink,
    pub public_keys: PublicKeys,
    pub ids: Arc<dyn IdSource>,
    /// Where this installation's notices go (the front end that opened it).
    pub notices: Arc<dyn Notices + Send>,
}

impl Installation {
    /// The store as this process's tenant sees it.
    pub fn scoped(&self) -> warrant_store::Scoped<'_> {
        warrant_store::Scoped::new(self.store.as_ref(), &self.tenant)
    }

    /// Keeps the attempt to reach `target`, which this tenant's scope did not find: recorded
    /// when it is another tenant's, never told to the caller (a store that cannot record it
    /// changes nothing in the answer either, which stays "does not exist").
    pub fn refused(&self, operation: &str, target: warrant_store::Target) {
        let _ = self.scoped().refuse(&self.actor, operation, &target);
    }

    /// The JSONL file and the configured sinks, for delivery and health.
    pub fn sinks(&self) -> warrant_audit::Sinks<'_> {
        warrant_audit::Sinks {
            jsonl: &self.sink,
            others: &self.sinks,
            anchor: Some(&self.sealer),
        }
    }
}

impl std::fmt::Debug for Installation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Installation")
            .field("store", &self.store_location)
            .field("sinks", &self.sinks.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// `[store] password`, resolved: a reference only (`env:NAME`, `file:PATH`, `cred:NAME`).
pub(crate) fn store_password(
    paths: &Paths,
    settings: &Settings,
) -> Result<Option<String>, HostError> {
    let Some(reference) = &settings.store_password else {
        return Ok(None);
    };
    let env = crate::credentials::reference_env(paths)?;
    let key = warrant_llm::secret::resolve_key("[store] password", Some(reference), "", &env)
        .map_err(|e| HostError::bad_input(&e))?;
    match key.value {
        Some(value) => Ok(Some(value)),
        None => Err(HostError::usage(
            "W-STORE-013",
            format!(
                "[store] password refers to {}, which is unset or empty",
                key.source
            ),
        )),
    }
}

/// The HTTP sinks with each `cred:NAME` header replaced by the credential (in memory only; the
/// delivery worker resolves `env:` itself, and no view shows a header).
fn sinks_with_credentials(
    paths: &Paths,
    sinks: &BTreeMap<String, warrant_core::config::SinkConfig>,
) -> Result<BTreeMap<String, warrant_core::config::SinkConfig>, HostError> {
    let prefix = warrant_llm::secret::CRED_PREFIX;
    let uses = sinks.values().any(|s| {
        let warrant_core::config::SinkConfig::Http { headers, .. } = s;
        headers.values().any(|v| v.starts_with(prefix))
    });
    if !uses {
        return Ok(sinks.clone());
    }
    let env = crate::credentials::reference_env(paths)?;
    let mut out = sinks.clone();
    for (name, sink) in &mut out {
        let warrant_core::config::SinkConfig::Http { headers, .. } = sink;
        for (header, value) in headers.iter_mut() {
            if value.starts_with(prefix) {
                let setting = format!("audit.sinks.{name}.headers.{header}");
                let key = warrant_llm::secret::resolve_key(&setting, Some(value), "", &env)
                    .map_err(|e| HostError::bad_input(&e))?;
                *value = key.value.unwrap_or_default();
            }
        }
    }
    Ok(out)
}

/// The installation secret (`.warrant/keys/installation.secret`): what the vault, the
/// credentials and the journal's seal derive their keys from.
pub fn installation_secret(paths: &Paths) -> Result<Vec<u8>, HostError> {
    let secret_hex = fs::read_to_string(paths.keys().join(SECRET_FILE)).map_err(|e| {
        HostError::usage(
            "W-INIT-003",
            format!("cannot read the installation secret: {e}"),
        )
        .with_hint(crate::Hint::CheckInit)
    })?;
    hex::decode(secret_hex.trim()).map_err(|e| {
        HostError::usage(
            "W-INIT-003",
            format!("the installation secret is malformed: {e}"),
        )
    })
}

/// `[store] audit_partitions`: a new PostgreSQL store's chain takes the configured count; a
/// chain that has begun keeps its own (`doctor` says when the two differ). SQLite stores keep
/// one chain: they have one writer, so partitions would only delay the records' positions.
fn partition_new_chain(
    store: &(dyn EventStore + Send + Sync),
    partitions: u64,
) -> Result<(), HostError> {
    if !(1..=warrant_store::MAX_PARTITIONS).contains(&partitions) {
        return Err(HostError::usage(
            "W-STORE-021",
            format!(
                "[store] audit_partitions = {partitions}: a chain has 1 to {} partitions",
                warrant_store::MAX_PARTITIONS
            ),
        ));
    }
    let current = store
        .audit_partitions()
        .map_err(|e| HostError::bad_input(&e))?;
    if current != partitions {
        store
            .partition_new_chain(partitions)
            .map_err(|e| HostError::bad_input(&e))?;
    }
    Ok(())
}

/// The store: `--store`, else `[store] url` of the configuration, else `.warrant/store.db`.
pub fn installation(
    paths: &Paths,
    settings: &Settings,
    notices: Arc<dyn Notices + Send>,
) -> Result<Installation, HostError> {
    // Whose records this process may read: the identity the layers and environment resolve.
    let who = identity(&read_layers(paths)?)?;
    installation_as(paths, settings, &who, notices)
}

/// [`installation`] for `who`, the identity the caller already resolved from the same layers.
pub fn installation_as(
    paths: &Paths,
    settings: &Settings,
    who: &ResolvedIdentity,
    notices: Arc<dyn Notices + Send>,
) -> Result<Installation, HostError> {
    let ids: Arc<dyn IdSource> = Arc::new(RandomIds);
    let tenant = warrant_store::Tenant::of(&who.principal);
    let actor = who.principal.actor.clone();
    let location = paths
        .store_override
        .clone()
        .or_else(|| settings.store_url.clone())
        .unwrap_or_else(|| paths.store().display().to_string());
    let password = store_password(paths, settings)?;
    let store =
        warrant_store::open_with_password(&location, password.as_deref(), Arc::new(SystemClock))
            .map_err(|e| HostError::bad_input(&e))?;
    if warrant_store::is_postgres_url(&location)
        && let Some(partitions) = settings.store_audit_partitions
    {
        partition_new_chain(store.as_ref(), partitions)?;
    }
    let store_location = if warrant_store::is_postgres_url(&location) {
        warrant_store::redact_location(&location)
    } else {
        location
    };
    let key = AuditKey::load(&paths.keys()).map_err(|e| HostError::bad_input(&e))?;
    // Current and retired keys: records signed before a rotation still verify.
    let public_keys = PublicKeys::load_dir(&paths.keys()).map_err(|e| HostError::bad_input(&e))?;
    let secret = installation_secret(paths)?;
    let installation = fs::read_to_string(paths.dot.join(INSTALLATION_FILE))
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    let sealer = InstallationSealer::new(key, &installation, ids.clone());
    let sink = JsonlSink::new(paths.dot.join(&settings.audit_jsonl_path))
        .with_rotation(
            settings.audit_jsonl_max_bytes,
            settings
                .audit_jsonl_max_age_ms
                .map(std::time::Duration::from_millis),
        )
        .with_fsync(match settings.audit_jsonl_fsync {
            warrant_core::config::JsonlFsync::Batch => warrant_audit::FsyncPolicy::EveryBatch,
            warrant_core::config::JsonlFsync::Never => warrant_audit::FsyncPolicy::Never,
        })
        // Off only for the negative control of the concurrent-delivery test.
        .with_turns(!crate::controls::disabled("sink-turns"));
    // Off only for the negative control of the truncation test (`WARRANT_TEST_DISABLE`).
    let sink = if crate::controls::disabled("checkpoint") {
        sink
    } else {
        sink.with_checkpoint(Checkpointer::new(
            sealer.key().clone(),
            &installation,
            Arc::new(SystemClock),
            public_keys.clone(),
        ))
    };
    Ok(Installation {
        store,
        tenant,
        actor,
        sinks: sinks_with_credentials(paths, &settings.audit_sinks)?,
        fail_after_ms: settings.audit_fail_after_ms,
        max_pending: settings.audit_max_pending,
        on_full: settings.audit_on_full,
        store_location,
        sealer,
        secret,
        sink,
        public_keys,
        ids,
        notices,
    })
}

pub use warrant_audit::{Delivered, JSONL_SINK, Patience};

/// Copies new audit records to every sink after a command. A failure is reported but does not
/// undo the command: the records stay in the store's outbox and a later delivery sends them.
pub fn deliver(inst: &Installation) {
    for d in inst
        .sinks()
        .deliver_all(inst.store.as_ref(), Patience::Quick)
    {
        if let Err(error) = d.outcome {
            inst.notices.notice(Notice::DeliveryFailed {
                sink: d.sink,
                error,
            });
        }
    }
}

/// Whether the current directory is inside a workspace (some ancestor holds `.warrant/`).
pub fn in_a_workspace() -> bool {
    std::env::current_dir()
        .map(|d| d.ancestors().any(|a| a.join(DOT).is_dir()))
        .unwrap_or(false)
}

pub fn parent_env() -> Vec<(String, String)> {
    std::env::vars().collect()
}

/// The bounded outbox: before each effect, while some sink lacks `max_pending` records or
/// more, deliver and wait, saying why; stop if the run is cancelled or passes its deadline.
///
/// The sinks' positions are read again only when the steps since the last reading could have
/// used up the room it showed, at [`OutboxBound::RECORDS_PER_STEP`] records a step across the
/// installation (a step of one run adds a handful): with the default bound of 10,000 and an
/// outbox that keeps up, every ~150 steps instead of at every step (two reads each).
pub(crate) struct OutboxBound<'a> {
    inst: &'a Installation,
    ring: &'a warrant_kernel::Ring<'a>,
    /// The worst pending count last read, and the steps let through since.
    last: std::cell::Cell<Option<(u64, u64)>>,
}

impl<'a> OutboxBound<'a> {
    /// How many records the installation is assumed to add per step of this run, at most,
    /// between two readings.
    pub const RECORDS_PER_STEP: u64 = 64;

    pub fn new(inst: &'a Installation, ring: &'a warrant_kernel::Ring<'a>) -> Self {
        Self {
            inst,
            ring,
            last: std::cell::Cell::new(None),
        }
    }
}

impl warrant_agent::Backpressure for OutboxBound<'_> {
    fn wait_for_room(&self, state: &mut warrant_kernel::RunState) -> Result<(), String> {
        let max = self.inst.max_pending.max(1);
        if let Some((pending, steps)) = self.last.get()
            && pending + Self::RECORDS_PER_STEP * (steps + 1) < max
        {
            self.last.set(Some((pending, steps + 1)));
            return Ok(());
        }
        let mut told = false;
        loop {
            let worst = self.inst.sinks().worst_pending(self.inst.store.as_ref()).1;
            if worst < max {
                self.last.set(Some((worst, 0)));
                return Ok(());
            }
            let sinks = self.inst.sinks();
            let results = sinks.deliver_all(self.inst.store.as_ref(), Patience::Quick);
            let (sink, pending) = sinks.worst_pending(self.inst.store.as_ref());
            if pending < max {
                return Ok(());
            }
            // `drop`: an HTTP sink skips what it lacks, and the run records the gap. The
            // JSONL file is local and its cursor is its own content: it always waits.
            if self.inst.on_full == warrant_core::config::OnFull::Drop && sink != JSONL_SINK {
                let head = self.inst.store.audit_head().map(|h| h.seq).unwrap_or(0);
                let from = head + 1 - pending;
                self.ring
                    .record_audit_gap(state, &sink, from, head)
                    .map_err(|e| e.to_string())?;
                self.inst
                    .store
                    .record_delivery(&sink, head, 0)
                    .map_err(|e| e.to_string())?;
                self.inst.notices.notice(Notice::OutboxDropped {
                    from,
                    to: head,
                    sink: sink.clone(),
                    max,
                });
                continue;
            }
            if !told {
                let why = results
                    .iter()
                    .find(|d| d.sink == sink)
                    .and_then(|d| d.outcome.as_ref().err().cloned())
                    .unwrap_or_default();
                self.inst.notices.notice(Notice::OutboxWaiting {
                    pending,
                    sink: sink.clone(),
                    max,
                    why,
                });
                told = true;
            }
            if let Ok(Some(reason)) = self.ring.stop_reason(state, self.ring.clock().now()) {
                return Err(reason);
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }
}

/// The identity directory's file name, read from the managed configuration directory only.
pub const DIRECTORY_FILE: &str = "directory.toml";

/// What decides approvals besides policy: `[risk.*]` of every layer (managed > user >
/// project), the managed identity directory, and the project's responsible team (`[approvals]
/// team`, from the project layer unless the managed layer sets one).
pub fn approval_rules(
    paths: &Paths,
    layers: &[Layer],
) -> Result<warrant_kernel::ApprovalRules, HostError> {
    let mut ordered: Vec<&Layer> = layers.iter().collect();
    ordered.sort_by_key(|l| l.kind);
    let tables: Vec<(&str, &BTreeMap<String, warrant_core::risk::RiskRuleConfig>)> = ordered
        .iter()
        .map(|l| (l.path.as_str(), &l.doc.risk))
        .collect();
    let risk =
        warrant_core::risk::RiskRules::resolve(&tables).map_err(|e| HostError::bad_input(&e))?;
    let file = paths.managed.join(DIRECTORY_FILE);
    let directory = match fs::read_to_string(&file) {
        Ok(text) => Some(
            warrant_core::directory::Directory::parse(&file.display().to_string(), &text)
                .map_err(|e| HostError::bad_input(&e))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(HostError::usage(
                "W-CONFIG-021",
                format!("cannot read the identity directory {}: {e}", file.display()),
            ));
        }
    };
    let team = ordered
        .iter()
        .filter(|l| matches!(l.kind, LayerKind::Managed | LayerKind::Project))
        .find_map(|l| l.doc.approvals.team.clone());
    Ok(warrant_kernel::ApprovalRules {
        risk,
        directory,
        team,
        enrolled: crate::approver_key::enrolled(paths)?,
        allow_unauthenticated: crate::controls::disabled("authenticate"),
    })
}

/// Folds `run` to act on it (resume, a worker's lease, an answer): its journal is checked
/// against its signed audit records first. A mismatch was refused and recorded by the ring; it
/// is delivered to the sink and fails as [`Class::Refused`]. Any other error is of `class`.
/// A debug build's negative control (`WARRANT_TEST_DISABLE=binding`) folds without the check.
pub fn load_run(
    inst: &Installation,
    ring: &warrant_kernel::Ring<'_>,
    run: &warrant_core::RunId,
    class: Class,
) -> Result<warrant_kernel::RunState, HostError> {
    load_run_of(inst, ring, run, class, &inst.tenant)
}

/// [`load_run`] for a run of `tenant` (a served caller's, which may differ from this process's).
pub fn load_run_of(
    inst: &Installation,
    ring: &warrant_kernel::Ring<'_>,
    run: &warrant_core::RunId,
    class: Class,
    tenant: &warrant_store::Tenant,
) -> Result<warrant_kernel::RunState, HostError> {
    // Another tenant's run is not there for this process: the same answer as a run that does
    // not exist, and the attempt is kept.
    let own = warrant_store::Scoped::new(inst.store.as_ref(), tenant)
        .run(run)
        .map_err(|e| HostError::coded(&e, class))?;
    if own.is_none() {
        inst.refused("act on a run", warrant_store::Target::Run(run.clone()));
        return Err(crate::records::run_missing(run));
    }
    let loaded = if crate::controls::disabled("binding") {
        ring.load_unverified(run)
    } else {
        ring.load(run)
    };
    loaded.map_err(|e| {
        if e.is_journal_refusal() {
            deliver(inst);
            HostError::coded(&e, Class::Refused)
        } else {
            HostError::coded(&e, class)
        }
    })
}

/// The `[requests]` expiry per kind; a value that is not a duration is a configuration error.
pub fn ttls(
    config: &warrant_core::config::RequestsConfig,
) -> Result<warrant_kernel::RequestTtls, HostError> {
    let parse = |key: &str, v: &Option<String>, default: u64| -> Result<u64, HostError> {
        match v {
            None => Ok(default),
            Some(text) => crate::drive::parse_duration(text)
                .filter(|d| !d.is_zero())
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .ok_or_else(|| {
                    HostError::usage(
                        "W-REQUEST-009",
                        format!(
                            "[requests] {key} = {text:?} is not a duration; use e.g. 90s, 30m or 24h"
                        ),
                    )
                }),
        }
    };
    let d = warrant_kernel::RequestTtls::default();
    Ok(warrant_kernel::RequestTtls {
        question_ms: parse("question_ttl", &config.question_ttl, d.question_ms)?,
        secret_ms: parse("secret_ttl", &config.secret_ttl, d.secret_ms)?,
        resource_ms: parse("resource_ttl", &config.resource_ttl, d.resource_ms)?,
    })
}

/// The vault as the executors' secret source, with the `[secret_env]` tables checked: each
/// entry names a configured profile, a plain variable name and a `secret:NAME` handle.
#[derive(Debug)]
struct VaultSecrets {
    vault: warrant_exec::vault::Vault,
    /// `cred:NAME` entries read from here (`warrant credentials set`).
    credentials: warrant_exec::vault::Vault,
    env: std::collections::BTreeMap<String, Vec<(String, String)>>,
}

impl warrant_kernel::SecretSource for VaultSecrets {
    fn env_for(&self, profile: &str) -> Vec<(String, String)> {
        self.env.get(profile).cloned().unwrap_or_default()
    }

    fn value(&self, name: &str) -> Result<String, (String, String)> {
        use warrant_core::Coded as _;
        let v = match name.strip_prefix(warrant_llm::secret::CRED_PREFIX) {
            Some(cred) => self.credentials.get(cred).map_err(|e| match e {
                warrant_exec::vault::VaultError::Unknown { .. } => (
                    "W-CRED-002".to_owned(),
                    format!("no credential named {cred} is stored; `warrant credentials set {cred}` stores it"),
                ),
                other @ (warrant_exec::vault::VaultError::Unreadable { .. }
                | warrant_exec::vault::VaultError::Unwritable { .. }
                | warrant_exec::vault::VaultError::Undecryptable { .. }) => {
                    (other.code().to_owned(), other.to_string())
                }
            }),
            None => self.vault.get(name).map_err(|e| (e.code().to_owned(), e.to_string())),
        }?;
        String::from_utf8(v.expose().to_vec()).map_err(|_| {
            (
                "W-SECRET-003".to_owned(),
                format!("secret {name} is not UTF-8 text, so it cannot be an environment value"),
            )
        })
    }
}

pub fn secret_source(
    paths: &Paths,
    installation_secret: &[u8],
    settings: &warrant_core::config::Settings,
) -> Result<Option<std::sync::Arc<dyn warrant_kernel::SecretSource>>, HostError> {
    if settings.secret_env.is_empty() {
        return Ok(None);
    }
    let bad = |m: String| HostError::usage("W-SECRET-005", m);
    let mut env = std::collections::BTreeMap::new();
    for (profile, vars) in &settings.secret_env {
        if !settings.profiles.contains_key(profile) {
            return Err(bad(format!(
                "[secret_env.{profile}] names no configured profile; configured: {}",
                settings
                    .profiles
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let mut pairs = Vec::new();
        for (var, handle) in vars {
            let var_ok = !var.is_empty()
                && !var.starts_with(|c: char| c.is_ascii_digit())
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !var_ok {
                return Err(bad(format!(
                    "[secret_env.{profile}] {var:?} is not an environment variable name (letters, digits, _)"
                )));
            }
            // `cred:NAME` stays whole (the credentials are looked up by it); `secret:NAME` is
            // the vault's name.
            let name = match handle.strip_prefix("secret:") {
                Some(name) => name,
                None if handle.starts_with(warrant_llm::secret::CRED_PREFIX) => handle.as_str(),
                None => "",
            };
            if name.is_empty() || name == warrant_llm::secret::CRED_PREFIX {
                return Err(bad(format!(
                    "[secret_env.{profile}] {var} = {handle:?} is not a secret handle; write \"secret:NAME\" (a provided secret) or \"cred:NAME\" (a stored credential)"
                )));
            }
            pairs.push((var.clone(), name.to_owned()));
        }
        env.insert(profile.clone(), pairs);
    }
    Ok(Some(std::sync::Arc::new(VaultSecrets {
        vault: warrant_exec::vault::Vault::open(&paths.dot, installation_secret),
        credentials: warrant_exec::vault::Vault::credentials(&paths.dot, installation_secret),
        env,
    })))
}
