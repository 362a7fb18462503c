//! Revoked delegation tokens, by id: the list every process of the installation consults before
//! an effect under a token, and the source of the list file given to offline verifiers. A
//! revocation is never taken back.

use crate::StoreError;
use crate::sql::{Dialect, Store, TxKind, Val};

/// The installation's revoked delegation tokens.
pub trait RevocationStore {
    /// Revokes token `id` (`by` whom, why). Returns whether it was not revoked before; a second
    /// revocation keeps the first's record.
    fn revoke_delegation(&self, id: &str, by: &str, reason: &str) -> Result<bool, StoreError>;
    /// Every revoked id, sorted.
    fn revoked_delegations(&self) -> Result<Vec<String>, StoreError>;
}

impl<D: Dialect> RevocationStore for Store<D> {
    fn revoke_delegation(&self, id: &str, by: &str, reason: &str) -> Result<bool, StoreError> {
        let now = self.clock.now();
        let mut tx = self.begin(TxKind::Lease)?;
        let known = tx
            .row(
                "SELECT id FROM delegation_revocations WHERE id = ?1",
                &[Val::from(id)],
                |_| Ok(()),
            )?
            .is_some();
        if !known {
            tx.execute(
                "INSERT INTO delegation_revocations (id, revoked_by, reason, at) VALUES (?1, ?2, ?3, ?4)",
                &[
                    Val::from(id),
                    Val::from(by),
                    Val::from(reason),
                    Val::from(now.millis()),
                ],
            )?;
        }
        tx.commit()?;
        Ok(!known)
    }

    fn revoked_delegations(&self) -> Result<Vec<String>, StoreError> {
        self.single()?.rows(
            "SELECT id FROM delegation_revocations ORDER BY id",
            &[],
            |r| r.text(0),
        )
    }
}
