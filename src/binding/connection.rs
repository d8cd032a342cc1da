//! `NativeConnection`: one connection of a JS thread, made once per address by the JS layer
//! (lib/shared-connection.js) and handed to every lock made on it, so that a lock's
//! constructor converts no connection options, parses no URL and looks up nothing.

use super::completions::NativeCompletions;
use super::error::{OrThrow, Result};
use super::options::ConnectionOptions;
use super::reply::JsCalls;
use crate::core::front::connection::Connection;
use napi::bindgen_prelude::Env;
use napi_derive::napi;

#[napi]
pub struct NativeConnection {
    pub(super) connection: Connection,
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
        let connection = Connection::open(connection.endpoint().or_throw(&env)?);
        let calls = JsCalls::new(connection.store(), completions);
        Ok(NativeConnection { connection, calls })
    }
}
