//! Where a Redlock's calls leave their stragglers (the nodes not waited for once a quorum
//! answered, each bounded by its own timeout): one task per store runs them all, rather than
//! a task per call. While a node is silent every call leaves one there, so a task each came
//! to thousands of tasks spawned per second at 256 calls in flight.
//!
//! Each straggler ends by its own timeout, but while a node is silent the calls keep coming:
//! at most `MAX_OUT` calls' stragglers are out at once, and past that the oldest are dropped,
//! a generation of them at a time (one cancellation wakes a whole generation, rather than
//! a waker kept per straggler). The oldest, because their requests have long been written
//! (dropping a future the connection already sent does not unsend it: Redis runs it all the
//! same) and are the nearest to their own timeout. A dropped straggler's node is told to
//! its call's `finish` as dropped (redlock_tally.rs): a release's node is owed the release,
//! as one past its bound is (redlock_owed.rs), and an attempt's node its free once the lock
//! is over (while it stands, the release or undo to come goes after it on that node's
//! connection, unless that connection is replaced first: then the two may cross, and the
//! node's copy is left to its TTL). What is lost is a refresh's late answer (that node's copy is left to its
//! TTL while the quorum keeps the lock) and a debt past the owed frees' own bound
//! (`MAX_OWED`): none of it gives a second holder, every call was already decided by what a
//! quorum answered, and a copy left standing costs liveness only (a waiter may find the lock
//! held on that node until its TTL).

use crate::core::basics::background;
use crate::core::basics::sync::lock;
use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;

/// Calls' stragglers out at once in one store's pool, at most (one silent node at 256 calls
/// in flight of 10 ms each, its stragglers bounded by a 500 ms timeout, leaves ~13,000).
pub const MAX_OUT: usize = 4096;

/// Stragglers dropped together, oldest first, once `MAX_OUT` are out.
const GENERATION: usize = 256;

#[derive(Default)]
pub struct LatePool {
    /// To the pool's task; `None` until the first straggler, or once that task is gone
    /// (its runtime shut down): the next starts one afresh.
    work: Mutex<Option<UnboundedSender<BoxFuture<'static, ()>>>>,
    /// The generations still out, oldest first.
    ages: Mutex<VecDeque<Generation>>,
    /// Stragglers dropped before their end.
    dropped: AtomicU64,
}

struct Generation {
    cut: CancellationToken,
    /// Its stragglers still out.
    out: Arc<AtomicUsize>,
    /// Stragglers given to it so far.
    given: usize,
}

/// One straggler out, counted until it ends or is dropped.
struct Straggling(Arc<AtomicUsize>);

impl Drop for Straggling {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl LatePool {
    /// Runs `work` to its end on the pool's task, unless more than `MAX_OUT` are out before
    /// it ends and it is among the oldest.
    pub fn run(&self, work: BoxFuture<'static, ()>) {
        let work = self.counted(work);
        let mut sender = lock(&self.work);
        let work = match sender.as_ref() {
            Some(to) => match to.send(work) {
                Ok(()) => return,
                Err(refused) => refused.0,
            },
            None => work,
        };
        let (to, from) = unbounded_channel();
        background::spawn(drain(from, work));
        *sender = Some(to);
    }

    /// `work` in the current generation, ended early when its generation is dropped; the
    /// oldest generation dropped first when `MAX_OUT` are out.
    fn counted(&self, work: BoxFuture<'static, ()>) -> BoxFuture<'static, ()> {
        let mut ages = lock(&self.ages);
        while ages.len() > 1
            && ages
                .front()
                .is_some_and(|g| g.out.load(Ordering::Relaxed) == 0)
        {
            ages.pop_front();
        }
        let out: usize = ages.iter().map(|g| g.out.load(Ordering::Relaxed)).sum();
        if out >= MAX_OUT {
            if let Some(oldest) = ages.pop_front() {
                let left = oldest.out.load(Ordering::Relaxed);
                self.dropped.fetch_add(left as u64, Ordering::Relaxed);
                oldest.cut.cancel();
            }
        }
        if ages.back().is_none_or(|g| g.given >= GENERATION) {
            ages.push_back(Generation {
                cut: CancellationToken::new(),
                out: Arc::default(),
                given: 0,
            });
        }
        let (cut, out) = match ages.back_mut() {
            Some(current) => {
                current.given += 1;
                current.out.fetch_add(1, Ordering::Relaxed);
                (current.cut.clone(), Straggling(current.out.clone()))
            }
            // Pushed just above.
            None => return work,
        };
        drop(ages);
        Box::pin(async move {
            let _out = out;
            tokio::select! {
                biased;
                () = work => {}
                () = cut.cancelled() => {}
            }
        })
    }

    /// Calls' stragglers out now.
    #[cfg(test)]
    pub fn out(&self) -> usize {
        let ages = lock(&self.ages);
        ages.iter().map(|g| g.out.load(Ordering::Relaxed)).sum()
    }

    /// Stragglers dropped so far before their end (at most: one may have ended as it was).
    #[cfg(test)]
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Runs `first` and all that comes after it, until the pool is dropped and all is done.
async fn drain(mut more: UnboundedReceiver<BoxFuture<'static, ()>>, first: BoxFuture<'static, ()>) {
    let mut running = FuturesUnordered::new();
    running.push(first);
    loop {
        tokio::select! {
            Some(()) = running.next(), if !running.is_empty() => {}
            next = more.recv() => match next {
                Some(work) => running.push(work),
                None => break,
            },
        }
    }
    while running.next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn every_straggler_runs_to_its_end_on_one_task() {
        let pool = LatePool::default();
        let done = Arc::new(AtomicUsize::new(0));
        let before = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        for i in 0..200u64 {
            let done = done.clone();
            pool.run(
                async move {
                    tokio::time::sleep(Duration::from_millis(i % 7)).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                .boxed(),
            );
        }
        let alive = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        assert_eq!(alive - before, 1, "one task for the 200");
        for _ in 0..100 {
            if done.load(Ordering::Relaxed) == 200 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(done.load(Ordering::Relaxed), 200);
        // Dropped with work still out: that work still runs to its end.
        let late = Arc::new(AtomicUsize::new(0));
        let seen = late.clone();
        pool.run(
            async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                seen.fetch_add(1, Ordering::Relaxed);
            }
            .boxed(),
        );
        drop(pool);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(late.load(Ordering::Relaxed), 1);
    }

    /// A guard that says when the straggler holding it ended or was dropped.
    struct DropFlag(Arc<AtomicUsize>);

    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_silent_node_s_stragglers_are_bounded_and_the_oldest_dropped_first() {
        let pool = LatePool::default();
        // A silent node: its stragglers never end on their own (here; in a store each ends
        // by its timeout, but the calls keep coming meanwhile).
        let ended: Vec<Arc<AtomicUsize>> = (0..MAX_OUT + GENERATION)
            .map(|_| Arc::new(AtomicUsize::new(0)))
            .collect();
        for flag in &ended {
            let guard = DropFlag(flag.clone());
            pool.run(
                async move {
                    let _guard = guard;
                    std::future::pending::<()>().await
                }
                .boxed(),
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(pool.out() <= MAX_OUT, "{} out", pool.out());
        assert_eq!(pool.dropped(), GENERATION as u64);
        let gone = |range: std::ops::Range<usize>| {
            ended[range]
                .iter()
                .filter(|f| f.load(Ordering::Relaxed) == 1)
                .count()
        };
        assert_eq!(gone(0..GENERATION), GENERATION, "the oldest dropped");
        assert_eq!(gone(GENERATION..ended.len()), 0, "the newer still out");
        // Stragglers that end on their own leave room.
        let before = pool.dropped();
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 * MAX_OUT {
            let done = done.clone();
            pool.run(
                async move {
                    done.fetch_add(1, Ordering::Relaxed);
                }
                .boxed(),
            );
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(done.load(Ordering::Relaxed), 2 * MAX_OUT);
        // The pool was full: the next oldest generation made room once, and only once.
        assert_eq!(pool.dropped(), before + GENERATION as u64);
        assert_eq!(gone(GENERATION..2 * GENERATION), GENERATION);
        assert_eq!(gone(2 * GENERATION..ended.len()), 0);
    }
}
