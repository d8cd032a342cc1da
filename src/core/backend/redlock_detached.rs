//! A release a Redlock sends to single nodes, owning its parts: a failed attempt's undo or a
//! handover's free left to a task of its own (`RedlockStore::release_on`), and a free owed
//! to a node (redlock_owed.rs).

use super::redis_store::RedisStore;
use crate::core::basics::error::LockError;
use crate::core::proto::acquire::{AcquireAttempt, LateWin};
use crate::core::proto::release::{Release, ReleaseKind};
use crate::core::proto::syncguard::{ReleaseById, ReleasedById};
use crate::core::proto::Request;
use std::time::Duration;

/// A release's parts, owned by the task that sends it to the nodes nobody waits for.
pub struct Detached {
    lock_key: Vec<u8>,
    token: String,
    kind: DetachedKind,
}

enum DetachedKind {
    Wake {
        ours_wait: bool,
    },
    Fair,
    Pair {
        data_key: Vec<u8>,
        contents: Vec<u8>,
        set_at: Option<i64>,
    },
    /// syncguard's release by lockId: `lock_key` is the lockId's index key.
    ById,
}

impl Detached {
    pub(super) fn of(release: &Release<'_>) -> Detached {
        let kind = match release.kind {
            ReleaseKind::Wake { ours_wait } => DetachedKind::Wake { ours_wait },
            ReleaseKind::Fair => DetachedKind::Fair,
            ReleaseKind::Pair {
                data_key,
                contents,
                set_at,
            } => DetachedKind::Pair {
                data_key: data_key.to_vec(),
                contents: contents.to_vec(),
                set_at,
            },
        };
        Detached {
            lock_key: release.lock_key.to_vec(),
            token: release.token.to_owned(),
            kind,
        }
    }

    /// syncguard's release of `lock_id`, whose index key is `index_key`.
    pub(super) fn by_id(index_key: &[u8], lock_id: &str) -> Detached {
        Detached {
            lock_key: index_key.to_vec(),
            token: lock_id.to_owned(),
            kind: DetachedKind::ById,
        }
    }

    /// The token (or lockId) it frees.
    pub(super) fn token(&self) -> &str {
        &self.token
    }

    /// Sends the release to `store`: whether it freed our lock there, or why it could not
    /// tell.
    pub(super) async fn sent(
        &self,
        store: &RedisStore,
        bound: Duration,
    ) -> Result<bool, LockError> {
        let kind = match &self.kind {
            DetachedKind::ById => {
                let op = ReleaseById {
                    index_key: &self.lock_key,
                    lock_id: &self.token,
                    expect: None,
                    ours_wait: false,
                };
                let sent = store.run_request(&op, &Request::of(&op), bound).await;
                return sent.map(|sent| matches!(sent, ReleasedById::Released { .. }));
            }
            DetachedKind::Wake { ours_wait } => ReleaseKind::Wake {
                ours_wait: *ours_wait,
            },
            DetachedKind::Fair => ReleaseKind::Fair,
            DetachedKind::Pair {
                data_key,
                contents,
                set_at,
            } => ReleaseKind::Pair {
                data_key,
                contents,
                set_at: *set_at,
            },
        };
        let op = Release {
            lock_key: &self.lock_key,
            token: &self.token,
            kind,
        };
        store.run_request(&op, &Request::of(&op), bound).await
    }
}

/// What frees `op`'s token where it may have won after we stopped waiting for its reply
/// (`AcquireAttempt::late_win`), owned; `None` for ExclusiveLock's pair (its own undo frees
/// it).
pub(super) fn late_win(op: &AcquireAttempt<'_>) -> Option<Detached> {
    op.late_win().map(owned)
}

/// What frees whatever `op` set (`AcquireAttempt::undo`), owned.
pub(super) fn undo(op: &AcquireAttempt<'_>) -> Detached {
    owned(op.undo())
}

fn owned(release: LateWin<'_>) -> Detached {
    match release {
        LateWin::Release(release) => Detached::of(&release),
        LateWin::ById(release) => Detached::by_id(release.index_key, release.lock_id),
    }
}
