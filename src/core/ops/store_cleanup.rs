//! The store carries out the cleanups its waiters leave (see wait/cleanup.rs). Apart from
//! store.rs because freeing a lock handed to a waiter that left is a release, and the release
//! uses the store.

use super::release;
use super::store::{Store, BACKGROUND_TIMEOUT};
use crate::core::basics::background::spawn;
use crate::core::wait::cleanup::{Cleaner, Cleanup};
use crate::core::wait::wake;
use std::time::Duration;

impl Cleaner for Store {
    fn clean_up(&self, cleanup: Cleanup) {
        match cleanup {
            Cleanup::FreeGranted(lease) => {
                let Some(store) = self.me() else {
                    return;
                };
                spawn(async move {
                    let bound = lease
                        .remaining()
                        .clamp(Duration::from_millis(1), BACKGROUND_TIMEOUT);
                    let _ignored = release::release(&store, &lease, bound).await;
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
