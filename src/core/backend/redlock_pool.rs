//! Where a Redlock's calls leave their stragglers (the nodes not waited for once a quorum
//! answered, each bounded by its own timeout): one task per store runs them all, rather than
//! a task per call. While a node is silent every call leaves one there, so a task each came
//! to thousands of tasks spawned per second at 256 calls in flight.

use crate::core::basics::background;
use crate::core::basics::sync::lock;
use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::sync::Mutex;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

#[derive(Default)]
pub struct LatePool {
    /// To the pool's task; `None` until the first straggler, or once that task is gone
    /// (its runtime shut down): the next starts one afresh.
    work: Mutex<Option<UnboundedSender<BoxFuture<'static, ()>>>>,
}

impl LatePool {
    /// Runs `work` to its end on the pool's task.
    pub fn run(&self, work: BoxFuture<'static, ()>) {
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
}
