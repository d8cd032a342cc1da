//! The store carries out the chores its waiters leave (see wait/chores.rs). Apart from
//! store.rs because freeing an orphaned lock is a release, and the release uses the store.

use super::release;
use super::store::{Store, BACKGROUND_TIMEOUT};
use crate::core::basics::background::spawn;
use crate::core::wait::chores::{Chore, Chores};
use crate::core::wait::wake;
use std::time::Duration;

impl Chores for Store {
    fn carry_out(&self, chore: Chore) {
        match chore {
            Chore::ReleaseOrphan(lease) => {
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
            Chore::PassOn(lock_key) => self.pass_on(lock_key),
            Chore::LeaveLine { lock_key, seq } => {
                let member = wake::member(self.id(), seq);
                self.leave_line(lock_key, member);
            }
            Chore::LeaveQueue(lock_key) => self.leave_queue(lock_key),
            Chore::DropIdle => self.drop_idle_subscriptions(),
        }
    }
}
