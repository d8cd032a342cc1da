use super::error::{OrThrow, Result};
use super::js::completions::NativeCompletions;
use super::js::settle::Completer;
use crate::core::basics::sync;
use crate::core::basics::validate;
use napi::bindgen_prelude::Env;
use napi_derive::napi;
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// A period kept on the runtime that tells a JS listener `tick` each time it comes round:
/// what refreshes a lock held through a cache object we can only drive through its own
/// methods (maestro's generic cache path), so the schedule is native as for every other hold.
/// It never keeps the process alive.
#[napi]
pub struct NativeTicker {
    completer: Completer,
    running: Mutex<Option<CancellationToken>>,
}

#[napi]
impl NativeTicker {
    #[napi(constructor)]
    pub fn new(completions: &NativeCompletions) -> Self {
        NativeTicker {
            completer: completions.completer(),
            running: Mutex::new(None),
        }
    }

    /// Tells `listener` every `every_ms` from now on (instead of any period before).
    #[napi]
    pub fn start(&self, env: Env, listener: u32, every_ms: f64) -> Result<()> {
        let every = validate::positive_ms("everyMs", every_ms).or_throw(&env)?;
        let stop = CancellationToken::new();
        if let Some(old) = sync::lock(&self.running).replace(stop.clone()) {
            old.cancel();
        }
        let completer = self.completer.clone();
        // Without a runtime (the OS refused its thread) the listener is never told.
        let _started = super::runtime::spawn(async move {
            let start = tokio::time::Instant::now() + every;
            let mut period = tokio::time::interval_at(start, every);
            // After a stall, one tick, not a burst of the ones missed.
            period.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = period.tick() => completer.tick(listener),
                }
            }
        });
        Ok(())
    }

    #[napi]
    pub fn stop(&self) {
        if let Some(running) = sync::lock(&self.running).take() {
            running.cancel();
        }
    }
}

impl Drop for NativeTicker {
    fn drop(&mut self) {
        self.stop();
    }
}
