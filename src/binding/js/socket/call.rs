//! The binding's end of a fast call on the JS-thread connection: the core decides what a
//! reply means (core::ops::fast); this runs what goes on through the runtime and turns
//! each core-level result into what the promise settles with.

use super::super::outcome::{done, Outcome, Settlement};
use super::super::settle::Completer;
use crate::core::api::{AttemptForm, FastCall, Later, Step};
use crate::core::front::granted::Granted;
use crate::core::front::reply::Settled;
use redis::Value;
use std::time::Duration;

/// A call in flight on the connection, whatever it is.
pub trait Call {
    /// The reply came: what ends now goes to `settled`, in order.
    fn answered(
        self: Box<Self>,
        id: u32,
        reply: Value,
        completer: &Completer,
        settled: &mut Vec<Settlement>,
    );
    fn timed_out(&mut self, bound: Duration) -> Outcome;
    /// `true` when a command to undo was written to `out` (see `FastCall::answered_late`).
    fn answered_late(self: Box<Self>, reply: Value, out: &mut Vec<u8>) -> bool;
    fn resend(self: Box<Self>, id: u32, left: Option<Duration>, completer: &Completer);
    fn abandon(self: Box<Self>);
    fn orphaned(self: Box<Self>, id: u32, completer: &Completer);
}

/// A core call and how its result becomes its promise's outcome.
pub struct Adapted<C, F> {
    call: C,
    /// Taken by the one outcome the call ends with.
    convert: Option<F>,
}

impl<C, F> Adapted<C, F>
where
    C: FastCall,
    F: FnOnce(Settled<C::Output>) -> Outcome + Send + 'static,
{
    pub fn new(call: C, convert: F) -> Self {
        Adapted {
            call,
            convert: Some(convert),
        }
    }

    pub fn write(&self, out: &mut Vec<u8>, form: AttemptForm) -> usize {
        self.call.write(out, form)
    }

    pub fn bound(&self) -> Duration {
        self.call.bound()
    }

    /// What `reply` leads to: what ends now goes to `settled`, in order; the rest goes on
    /// through the runtime. The one continuation of every way a call is sent.
    pub fn finish(
        self,
        id: u32,
        reply: Value,
        completer: &Completer,
        settled: &mut Vec<Settlement>,
    ) {
        let Adapted { call, convert } = self;
        let convert = move |result| match convert {
            Some(convert) => convert(result),
            None => unconverted(result),
        };
        match call.answered(reply) {
            Step::Now(result) => settled.push(Settlement::Settled(id, convert(result))),
            Step::Handed {
                released,
                waiter,
                lease,
                unclaimed,
            } => {
                // Its runtime task ends without a word: nothing of it is to reach JS. The
                // waiter goes first: its critical section starts before the releaser's
                // bookkeeping (often its next wait) runs.
                completer.answered(waiter);
                let granted = Granted {
                    unclaimed: Some(unclaimed),
                    ..Granted::of(&lease, None)
                };
                let handle = Outcome::Lease(granted);
                settled.push(Settlement::Settled(waiter, handle));
                settled.push(Settlement::Settled(id, convert(released)));
            }
            Step::Later(later) => completer.run(id, async move { convert(later.await) }),
        }
    }
}

/// A result whose converter was already used: the call told its caller once, and the
/// connection never asks a call twice, so this reaches nobody.
fn unconverted<T>(result: Settled<T>) -> Outcome {
    done(result)
}

fn run<T, F>(id: u32, later: Later<T>, convert: Option<F>, completer: &Completer)
where
    T: Send + 'static,
    F: FnOnce(Settled<T>) -> Outcome + Send + 'static,
{
    completer.run(id, async move {
        let result = later.await;
        match convert {
            Some(convert) => convert(result),
            None => unconverted(result),
        }
    });
}

impl<C, F> Call for Adapted<C, F>
where
    C: FastCall,
    F: FnOnce(Settled<C::Output>) -> Outcome + Send + 'static,
{
    fn answered(
        self: Box<Self>,
        id: u32,
        reply: Value,
        completer: &Completer,
        settled: &mut Vec<Settlement>,
    ) {
        (*self).finish(id, reply, completer, settled);
    }

    fn timed_out(&mut self, bound: Duration) -> Outcome {
        let result = self.call.timed_out(bound);
        match self.convert.take() {
            Some(convert) => convert(result),
            None => unconverted(result),
        }
    }

    fn answered_late(self: Box<Self>, reply: Value, out: &mut Vec<u8>) -> bool {
        self.call.answered_late(reply, out)
    }

    fn resend(self: Box<Self>, id: u32, left: Option<Duration>, completer: &Completer) {
        let Adapted { call, convert } = *self;
        run(id, call.resend(left), convert, completer);
    }

    fn abandon(self: Box<Self>) {
        self.call.abandon();
    }

    fn orphaned(self: Box<Self>, id: u32, completer: &Completer) {
        let Adapted { call, convert } = *self;
        if let Some(later) = call.orphaned() {
            run(id, later, convert, completer);
        }
    }
}
