//! The store carries out the cleanups its waiters leave (see wait/cleanup.rs). Apart from
//! store.rs because freeing a lock handed to a waiter that left is a release, and the release
//! uses the store.

use super::release;
use super::release_by_id::release_by_id;
use super::store::{orphan_bound, Store};
use crate::core::basics::background::spawn;
use crate::core::wait::cleanup::{Cleaner, Cleanup};
use crate::core::wait::wake;

impl Cleaner for Store {
    fn clean_up(&self, cleanup: Cleanup) {
        match cleanup {
            Cleanup::FreeGranted(lease) => {
                let Some(store) = self.me() else {
                    return;
                };
                let passing = store.passing().start();
                spawn(async move {
                    let bound = orphan_bound(&lease);
                    let _ignored = release::release(&store, &lease, bound, None).await;
                    drop(passing);
                });
            }
            Cleanup::FreeById { lease, index_key } => {
                let Some(store) = self.me() else {
                    return;
                };
                spawn(async move {
                    let (bound, expect) = (orphan_bound(&lease), Some(&lease.redis_key[..]));
                    let (index_key, lock_id) = (&index_key, &lease.token);
                    let _ignored = release_by_id(&store, index_key, lock_id, expect, bound).await;
                });
            }
            Cleanup::PassWake(lock_key) => self.pass_on(lock_key),
            Cleanup::LeaveLine { lock_key, seq } => {
                let member = wake::member(self.id(), seq);
                self.leave_line(lock_key, member);
            }
            Cleanup::LeaveQueue(lock_key) => self.leave_queue(lock_key),
            Cleanup::DropIdle => self.drop_idle_subscriptions(),
        }
    }
}
