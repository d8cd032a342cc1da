//! `NativeConnection`: one connection of a JS thread, made once per address by the JS layer
//! (lib/shared-connection.js) and handed to every lock made on it, so that a lock's
//! constructor converts no connection options, parses no URL and looks up nothing.

use super::error::{OrThrow, Result};
use super::events::JsSink;
use super::js::completions::NativeCompletions;
use super::js::responder::JsCalls;
use super::options::ConnectionOptions;
use crate::core::api::Owner;
use crate::core::front::connection::LockConnection;
use napi::bindgen_prelude::Env;
use napi_derive::napi;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[napi]
pub struct NativeConnection {
    pub(super) connection: LockConnection,
    /// This thread's way of answering calls on the connection, shared by its locks.
    pub(super) calls: JsCalls,
}

#[napi]
impl NativeConnection {
    #[napi(constructor)]
    pub fn new(
        env: Env,
        connection: ConnectionOptions,
        completions: &NativeCompletions,
    ) -> Result<Self> {
        let connection = LockConnection::open(connection.endpoint().or_throw(&env)?);
        let calls = completions.calls(&connection);
        Ok(NativeConnection { connection, calls })
    }
}

/// What a lock made on a connection starts from: the connection's calls, a sink for its
/// watchdog's news, and the owner its calls run on behalf of.
pub(super) struct LockParts {
    pub calls: JsCalls,
    pub sink: Arc<JsSink>,
    pub owner: Owner,
}

impl NativeConnection {
    /// The parts of a lock made on this connection. `every_hold_news`: each hold's news
    /// crosses into JS (the front keeps back what nobody asked for); otherwise only once
    /// asked for.
    pub(super) fn lock_parts(&self, every_hold_news: bool) -> LockParts {
        let calls = self.calls.clone();
        let sink = Arc::new(JsSink::new(
            calls.completer.clone(),
            Arc::new(AtomicBool::new(every_hold_news)),
        ));
        let owner = calls.thread.owner().clone();
        LockParts { calls, sink, owner }
    }
}
