//! `warrant delegate …`: issuing, showing, verifying and revoking delegation tokens
//! ([`warrant_kernel::delegation`]). The installation's Ed25519 key signs; a verifier needs
//! only the public keys (`warrant audit keys export`) and, offline, a revocation list file this
//! installation writes on every revocation (`.warrant/delegations.revoked`).
//! A run started under a token (`run`/`submit --delegation`) is held to it by the ring; its
//! subagents act under tokens narrowed from it ([`for_subagent`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use warrant_core::{Clock as _, Digest, RiskClass, SystemClock, Timestamp};
use warrant_kernel::delegation::{self, Grant, Revocations, Verified};

use crate::records::{self, Opened};
use crate::{HostError, Notices, Result, Where};

/// The revocation list file in `.warrant/`, rewritten from the store on every revocation.
pub const REVOCATION_FILE: &str = "delegations.revoked";

/// What to hand on.
#[derive(Clone, Debug)]
pub struct IssueRequest {
    /// `actor@tenant`.
    pub holder: String,
    pub verbs: Vec<String>,
    pub resources: Vec<String>,
    pub ceiling: RiskClass,
    pub ttl: Duration,
    /// The token this one narrows (held by this process's principal).
    pub from: Option<String>,
}

/// A token issued: the token itself (give it to the holder), and what it says.
#[derive(Debug, Serialize)]
pub struct Issued {
    pub token: String,
    pub digest: Digest,
    pub grant: Grant,
}

/// A token read without verifying it.
#[derive(Debug, Serialize)]
pub struct Shown {
    pub digest: Digest,
    pub grant: Grant,
}

/// A revocation recorded.
#[derive(Debug, Serialize)]
pub struct Revoked {
    pub id: String,
    /// False when it had been revoked already.
    pub newly: bool,
    pub by: String,
    /// The list file offline verifiers are given.
    pub list: PathBuf,
}

fn who(opened: &Opened) -> String {
    format!("{}@{}", opened.inst.actor, opened.inst.tenant)
}

fn store_revocations(opened: &Opened) -> Result<Revocations> {
    Ok(Revocations::new(
        opened
            .inst
            .store
            .revoked_delegations()
            .map_err(|e| HostError::failed(&e))?,
    ))
}

fn read_list(path: &Path) -> Result<Revocations> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        HostError::usage(
            "W-DELEGATE-012",
            format!("cannot read the revocation list {}: {e}", path.display()),
        )
    })?;
    Revocations::parse(&text).map_err(|e| HostError::bad_input(&e))
}

/// A token as a file holds it (`--from`, `show`, `verify`).
pub fn read_token(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        HostError::usage(
            "W-DELEGATE-015",
            format!("cannot read the token {}: {e}", path.display()),
        )
    })
}

/// Writes an issued token to a file (`issue --out`), a line of its own.
pub fn write_token(path: &Path, token: &str) -> Result<()> {
    std::fs::write(path, format!("{token}\n")).map_err(|e| {
        HostError::usage(
            "W-DELEGATE-016",
            format!("cannot write the token to {}: {e}", path.display()),
        )
    })
}

/// Issues a token from this process's principal to `request.holder`, signed with the
/// installation's key. With `from`, a re-delegation: the parent must verify for this
/// principal, and the new grant must narrow it.
pub fn issue(
    at: &Where,
    notices: Arc<dyn Notices + Send>,
    request: IssueRequest,
) -> Result<Issued> {
    let opened = records::open(at, notices)?;
    let me = who(&opened);
    let now = SystemClock.now();
    let ttl = i64::try_from(request.ttl.as_millis()).unwrap_or(i64::MAX / 2);
    let expires_at = Timestamp::from_millis(now.millis().saturating_add(ttl))
        .ok_or_else(|| HostError::usage("W-DELEGATE-013", "the token's lifetime is too long"))?;
    let parent = match &request.from {
        None => None,
        Some(token) => Some(
            delegation::verify(
                token,
                &opened.inst.public_keys,
                &me,
                now,
                &store_revocations(&opened)?,
            )
            .map_err(|e| HostError::bad_input(&e))?,
        ),
    };
    let grant = Grant {
        id: format!("dlg-{}", opened.inst.ids.next_suffix()),
        delegator: me,
        holder: request.holder,
        verbs: request.verbs.into_iter().collect(),
        resources: request.resources.into_iter().collect(),
        ceiling: request.ceiling,
        issued_at: now,
        expires_at,
        parent: parent.as_ref().map(|p| p.grant.id.clone()),
    };
    if let Some(parent) = &parent {
        grant
            .narrows(&parent.grant)
            .map_err(|e| HostError::bad_input(&e))?;
    }
    let key = warrant_audit::AuditKey::load(&opened.paths.keys())
        .map_err(|e| HostError::bad_input(&e))?;
    let token = grant.sign(&key).map_err(|e| HostError::bad_input(&e))?;
    Ok(Issued {
        digest: Digest::of_bytes(token.as_bytes()),
        token,
        grant,
    })
}

/// What a token says, unverified.
pub fn show(token: &str) -> Result<Shown> {
    let (grant, digest) = delegation::inspect(token).map_err(|e| HostError::bad_input(&e))?;
    Ok(Shown { digest, grant })
}

/// Where verification takes its keys and revocations from.
#[derive(Clone)]
pub enum Against {
    /// Offline: these public keys, and a revocation list file when given. No installation.
    Offline {
        pubkeys: PathBuf,
        revoked: Option<PathBuf>,
    },
    /// The installation's public keys and the store's revocations.
    Installation {
        at: Where,
        notices: Arc<dyn Notices + Send>,
    },
}

impl std::fmt::Debug for Against {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Offline { pubkeys, revoked } => f
                .debug_struct("Offline")
                .field("pubkeys", pubkeys)
                .field("revoked", revoked)
                .finish(),
            Self::Installation { at, .. } => f
                .debug_struct("Installation")
                .field("at", at)
                .finish_non_exhaustive(),
        }
    }
}

/// Verifies `token` for `holder` (`actor@tenant`) now.
pub fn verify(token: &str, holder: &str, against: Against) -> Result<Verified> {
    let (keys, revoked) = match against {
        Against::Offline { pubkeys, revoked } => (
            warrant_audit::PublicKeys::load(&pubkeys).map_err(|e| HostError::bad_input(&e))?,
            match revoked {
                Some(path) => read_list(&path)?,
                None => Revocations::default(),
            },
        ),
        Against::Installation { at, notices } => {
            let opened = records::open(&at, notices)?;
            let revoked = store_revocations(&opened)?;
            (opened.inst.public_keys, revoked)
        }
    };
    delegation::verify(token, &keys, holder, SystemClock.now(), &revoked)
        .map_err(|e| HostError::coded(&e, crate::Class::Refused))
}

/// Revokes token `id` in the store, and rewrites the revocation list file from the store.
pub fn revoke(
    at: &Where,
    notices: Arc<dyn Notices + Send>,
    id: &str,
    reason: &str,
) -> Result<Revoked> {
    Revocations::parse(id).map_err(|e| HostError::bad_input(&e))?;
    let opened = records::open(at, notices)?;
    let by = who(&opened);
    let newly = opened
        .inst
        .store
        .revoke_delegation(id, &by, reason)
        .map_err(|e| HostError::failed(&e))?;
    let list = opened.paths.dot.join(REVOCATION_FILE);
    let text = store_revocations(&opened)?.to_file_text();
    std::fs::write(&list, text).map_err(|e| {
        HostError::usage(
            "W-DELEGATE-014",
            format!("cannot write the revocation list {}: {e}", list.display()),
        )
    })?;
    Ok(Revoked {
        id: id.to_owned(),
        newly,
        by,
        list,
    })
}

/// The token a subagent of a run under `parent` acts under: minted for it when it starts,
/// narrowed from its parent's (re-delegation only narrows; checked), held by the same
/// principal, with the tighter of the parent token's ceiling and the child run's, and
/// expiring no later than its parent's token nor the child's deadline. The child's run keeps
/// its grant and digest; revoking the parent's token (or any above it) stops the child too.
pub(crate) fn for_subagent(
    host: &crate::Host,
    parent: &warrant_kernel::DelegationSettings,
    ceiling: Option<warrant_core::RiskClass>,
    deadline: Option<Timestamp>,
) -> Result<warrant_kernel::DelegationSettings> {
    let p = &parent.grant;
    let expires_at = match deadline {
        Some(d) if d < p.expires_at => d,
        _ => p.expires_at,
    };
    let grant = Grant {
        id: format!("dlg-{}", host.inst.ids.next_suffix()),
        delegator: p.holder.clone(),
        holder: p.holder.clone(),
        verbs: p.verbs.clone(),
        resources: p.resources.clone(),
        ceiling: ceiling.map_or(p.ceiling, |c| c.min(p.ceiling)),
        issued_at: SystemClock.now(),
        expires_at,
        parent: Some(p.id.clone()),
    };
    grant.narrows(p).map_err(|e| HostError::bad_input(&e))?;
    let key =
        warrant_audit::AuditKey::load(&host.paths.keys()).map_err(|e| HostError::bad_input(&e))?;
    let token = grant.sign(&key).map_err(|e| HostError::bad_input(&e))?;
    let mut above: Vec<String> = p.parent.iter().cloned().collect();
    above.extend(parent.above.iter().cloned());
    Ok(warrant_kernel::DelegationSettings {
        digest: Digest::of_bytes(token.as_bytes()),
        grant,
        above,
    })
}
