//! A closing environment (the process about to exit) leaves the rings of locks it no longer
//! waits for and lets the grants it is passing on reach Redis: a grant sent to it meanwhile
//! would otherwise keep the lock for its whole claim (see release_grant.lua). A lock it freed
//! quietly moments ago is kicked to the ring now: its kick would come too late, if at all
//! (see wait/tenure.rs).

use super::store::Store;
use crate::core::backend::lock_store::LockStore;
use crate::core::proto::ring::LeaveRing;
use crate::core::wait::wake;
use futures_util::future::join_all;
use std::future::Future;
use std::time::Duration;

impl Store {
    /// Leaves every ring this connection is in with nobody here to take a grant, kicks the
    /// locks it freed quietly, then waits for the grants being passed on, each step within
    /// `bound`. A grant Redis sent before
    /// our leaving ran comes on this connection before its answer, so it is in flight by
    /// then.
    pub async fn leave_rings(&self, bound: Duration) {
        if !self.grants() {
            return;
        }
        let leaving = self.wakes().rings_to_leave();
        let calls = leaving.iter().map(|lock_key| async move {
            let leave = LeaveRing {
                lock_key,
                id: self.id(),
            };
            if self.backend().run(&leave, bound).await.is_ok() {
                self.wakes().left_ring(&wake::channel(lock_key));
            }
        });
        join_all(calls).await;
        let kicks = self.wakes().take_kicks();
        let kicks = kicks
            .iter()
            .map(|(lock_key, window)| self.kick(lock_key, *window, bound));
        join_all(kicks).await;
        let _late = tokio::time::timeout(bound, self.passing().settled()).await;
    }

    /// `leave_rings` for every connection of the process: what an environment that ends
    /// runs before its thread goes away.
    pub fn leave_all_rings(bound: Duration) -> impl Future<Output = ()> + Send + 'static {
        let stores = Store::live();
        async move {
            join_all(stores.iter().map(|store| store.leave_rings(bound))).await;
        }
    }
}
