//! `stats()` of every native class: the core's counters as a plain JS object.

use super::js::settle::Completer;
use crate::core::basics::stats::{CallCounters, Observer, StatsSnapshot, WaitNews};
use napi_derive::napi;
use std::sync::Arc;

/// One error code and how many calls ended with it.
#[napi(object)]
pub struct NativeErrorCount {
    pub code: String,
    pub count: f64,
}

/// What one API object has done since it was made (lib/ reshapes `errors` into an object).
#[napi(object)]
pub struct NativeStats {
    /// False when the object was made with `stats: false` (every count then zero).
    pub enabled: bool,
    pub acquisitions: f64,
    pub contended: f64,
    pub woken: f64,
    pub handed_over: f64,
    pub refreshes: f64,
    pub lost: f64,
    pub errors: Vec<NativeErrorCount>,
    pub wait_p50_ms: f64,
    pub wait_p99_ms: f64,
    pub wait_max_ms: f64,
}

// Counts stay far below 2^53, where an f64 stops being exact.
impl From<StatsSnapshot> for NativeStats {
    fn from(snap: StatsSnapshot) -> Self {
        NativeStats {
            enabled: snap.enabled,
            acquisitions: snap.acquisitions as f64,
            contended: snap.contended as f64,
            woken: snap.woken as f64,
            handed_over: snap.handed_over as f64,
            refreshes: snap.refreshes as f64,
            lost: snap.lost as f64,
            errors: (snap.errors.into_iter())
                .map(|(code, count)| NativeErrorCount {
                    code: code.to_owned(),
                    count: count as f64,
                })
                .collect(),
            wait_p50_ms: snap.wait_p50_ms,
            wait_p99_ms: snap.wait_p99_ms,
            wait_max_ms: snap.wait_max_ms,
        }
    }
}

/// Hands what the core counts as it happens to the JS listener of an API object (its
/// `onEvent` hook), through the thread's completion queue.
pub struct JsObserver {
    pub completer: Completer,
    pub listener: u32,
}

impl Observer for JsObserver {
    fn seen(&self, seen: WaitNews, key: &str) {
        self.completer.seen(self.listener, seen.name(), key);
    }
}

/// Makes `listener` hear what `stats` counts from now on; once per object.
pub fn observe(stats: &CallCounters, completer: &Completer, listener: u32) {
    let completer = completer.clone();
    // A second hook on the same object is refused by lib/ before it comes here.
    let _first = stats.observe(Arc::new(JsObserver {
        completer,
        listener,
    }));
}
