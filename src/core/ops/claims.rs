//! A grant from another process's release holds for its claim only (release_grant.lua): a
//! grantee that died or stopped keeps the lock no longer than that. The waiter that takes it
//! confirms it with its own TTL before its caller has it, since a JS handle counts on the
//! deadline it is given.

use super::lock::Locker;
use crate::core::backend::lock_store::LockStore;
use crate::core::basics::clock::Stamp;
use crate::core::basics::lease::Lease;
use crate::core::proto::refresh::{Refresh, RefreshBatch};

impl Locker {
    /// `lease` as its waiter (`name`, the key as the user gave it) keeps it: a lock handed
    /// over in this process as it is; a grant once Redis took our TTL for it. `None` when
    /// the grant was lost meanwhile (its claim ran out, and it is someone else's or free);
    /// without an answer it is freed in the background, for the waiter to try on its own.
    pub(super) async fn confirm_grant(&self, mut lease: Lease, name: &str) -> Option<Lease> {
        if !lease.is_claim_only() {
            return Some(lease);
        }
        if lease.key.is_empty() {
            name.clone_into(&mut lease.key);
        }
        let ttl_ms = u32::try_from(lease.ttl().as_millis()).unwrap_or(u32::MAX);
        let refresh = Refresh {
            key: &lease.redis_key,
            token: lease.token.as_bytes(),
            ttl_ms,
            fence_retention_ms: self.fence_retention_ms(),
            pair: None,
        };
        let batch = RefreshBatch::new(&[refresh], &[]);
        let sent = Stamp::now();
        let answer = self
            .store()
            .backend()
            .refresh(&batch, self.command_timeout())
            .await;
        match answer.first() {
            Some(Some(true)) => {
                lease.extended(sent, lease.ttl());
                Some(lease)
            }
            Some(Some(false)) => None,
            _ => {
                self.store().release_orphan(lease);
                None
            }
        }
    }
}
