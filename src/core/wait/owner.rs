//! On whose behalf waits run and locks are held. The binding makes one owner per JS
//! environment (the main thread, each worker thread) and ends it when that environment goes
//! away: nobody is left to take what a wait would win, to release what is held, or to hear
//! that a refresh failed. The core knows nothing more of it than this handle.
//!
//! Ending an owner ends its waits (their tickets leave the wake tables, and no release hands
//! them a lock meanwhile, see wake.rs), stops the refreshes of its locks and releases them,
//! and makes any lock one of its calls wins from then on be released instead of handed out.

use crate::core::basics::sync::lock;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use tokio_util::sync::CancellationToken;

#[derive(Clone)]
pub struct Owner(Arc<OwnerState>);

/// Frees one lock an ended owner held: run on the runtime.
pub type Freeing = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What keeps an owner's locks alive (the watchdog, see ops/watchdog.rs): defined here so an
/// owner can stop it without this layer knowing the operations.
pub trait Keeper: Send + Sync {
    /// Stops keeping `owner`'s locks alive; the answer frees those to be released.
    fn forsake(&self, owner: &Owner) -> Vec<Freeing>;
}

struct OwnerState {
    gone: CancellationToken,
    /// Every watchdog that kept a lock alive for this owner; `None` once it ended.
    watchdogs: Mutex<Option<Vec<Weak<dyn Keeper>>>>,
}

impl Default for Owner {
    fn default() -> Self {
        Owner::new()
    }
}

impl Owner {
    /// An owner that lives until `end` is called (or forever: plain core users never end
    /// theirs).
    pub fn new() -> Owner {
        Owner(Arc::new(OwnerState {
            gone: CancellationToken::new(),
            watchdogs: Mutex::new(Some(Vec::new())),
        }))
    }

    /// Whether `end` was called.
    pub fn is_gone(&self) -> bool {
        self.0.gone.is_cancelled()
    }

    /// Resolves once the owner has ended.
    pub async fn gone(&self) {
        self.0.gone.cancelled().await
    }

    pub(crate) fn same(&self, other: &Owner) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Remembers `watchdog` as keeping a lock of this owner alive, so `end` finds it there.
    /// `false` once the owner ended: the lock must not be watched, but released.
    pub(crate) fn enlist<K: Keeper + 'static>(&self, watchdog: &Arc<K>) -> bool {
        let mut watchdogs = lock(&self.0.watchdogs);
        let Some(list) = watchdogs.as_mut() else {
            return false;
        };
        if !list
            .iter()
            .any(|w| std::ptr::addr_eq(w.as_ptr(), Arc::as_ptr(watchdog)))
        {
            list.retain(|w| w.strong_count() > 0);
            let keeper: Weak<dyn Keeper> = Arc::downgrade(watchdog) as Weak<K>;
            list.push(keeper);
        }
        true
    }

    /// Ends the owner: its waits stop at once (each leaves its wake table as it ends), and
    /// the locks kept alive for it are taken off their watchdogs now. The answer releases
    /// them (run it on the runtime); it completes once Redis answered every release, or
    /// each release's bound passed (see orphan.rs). Later calls find nothing left to do.
    pub fn end(&self) -> impl Future<Output = ()> + Send + 'static {
        let enlisted = {
            let mut watchdogs = lock(&self.0.watchdogs);
            // Under the list's lock, with the list taken: a watch started from now on finds
            // the owner gone (see `enlist`), and one started before is in the list.
            self.0.gone.cancel();
            watchdogs.take().unwrap_or_default()
        };
        let releases: Vec<Freeing> = enlisted
            .iter()
            .filter_map(Weak::upgrade)
            .flat_map(|watchdog| watchdog.forsake(self))
            .collect();
        async move {
            let releases: Vec<_> = releases.into_iter().map(tokio::spawn).collect();
            for release in releases {
                let _ignored = release.await;
            }
        }
    }
}
