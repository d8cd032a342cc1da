//! The runtime's connection running an operation as `proto` defines it.

use super::store::Store;
use crate::core::backend::link::{Connection, Replay};
use crate::core::basics::error::LockError;
use crate::core::proto::{Op, Request};
use redis::Value;
use std::time::Duration;

impl Store {
    /// Sends `op` within `timeout` and reads its reply.
    pub async fn run<O: Op>(&self, op: &O, timeout: Duration) -> Result<O::Out, LockError> {
        let reply: Value = match Request::of(op) {
            Request::Script(invocation) => {
                let replay = if O::REPEATABLE {
                    Replay::Safe
                } else {
                    Replay::Never
                };
                self.eval(&invocation, timeout, replay).await?
            }
            Request::Command(cmd) => self.query(&cmd, timeout).await?,
        };
        op.decode(reply)
    }

    /// As `run`, telling with an error which connection the op went out on, if one did (a
    /// late win is freed behind it, see `Locker::forget`).
    pub async fn run_tracked<O: Op>(
        &self,
        op: &O,
        timeout: Duration,
    ) -> Result<O::Out, (LockError, Option<Connection>)> {
        let reply: Value = match Request::of(op) {
            Request::Script(invocation) => self.eval_tracked(&invocation, timeout).await?,
            Request::Command(cmd) => self.query(&cmd, timeout).await.map_err(|e| (e, None))?,
        };
        op.decode(reply).map_err(|err| (err, None))
    }

    /// As `run`, on `connection`, behind whatever is still queued there.
    pub async fn run_on<O: Op>(
        &self,
        connection: &Connection,
        op: &O,
        timeout: Duration,
    ) -> Result<O::Out, LockError> {
        let reply: Value = match Request::of(op) {
            Request::Script(invocation) => self.eval_on(connection, &invocation, timeout).await?,
            Request::Command(cmd) => self.query(&cmd, timeout).await?,
        };
        op.decode(reply)
    }
}
