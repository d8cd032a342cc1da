//! The binding's end of a fast call on the JS-thread connection (or of a quorum call's
//! part, on one node's): the core decides what a
//! reply means (core::ops::fast); this runs what goes on through the runtime and turns
//! each core-level result into what the promise settles with.

use super::super::outcome::{done, Outcome, Settlement};
use super::super::settle::Completer;
use crate::core::api::{AttemptForm, FastCall, Later, NodeCall, Step, Told, UndoSent};
use crate::core::front::granted::Granted;
use crate::core::front::reply::Settled;
use redis::Value;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// Commands a call wrote to `out` behind it, each reply for nobody: one undoing what a
/// quorum's straggler took (`NodeCall::answered`), an attempt's follow-up
/// (`FastCall::follow_up`).
#[derive(Default)]
pub struct Behind {
    pub commands: usize,
    /// The undo among them, the core's to owe should the connection break before its reply,
    /// and to hear its reply (`UndoSent::heard`).
    pub undo: Option<UndoSent>,
}

impl Behind {
    fn count(commands: usize) -> Behind {
        Behind {
            commands,
            undo: None,
        }
    }

    fn undo(undo: Option<UndoSent>) -> Behind {
        Behind {
            commands: usize::from(undo.is_some()),
            undo,
        }
    }

    /// With `commands` more written behind the reply (a follow-up).
    fn and(mut self, commands: usize) -> Behind {
        self.commands += commands;
        self
    }
}

/// A call in flight on the connection, whatever it is.
pub trait Call {
    /// The reply came: what ends now goes to `settled`, in order. Answers what was written
    /// to `out` behind it.
    fn answered(
        self: Box<Self>,
        id: u32,
        reply: Value,
        completer: &Completer,
        settled: &mut Vec<Settlement>,
        out: &mut Vec<u8>,
    ) -> Behind;
    /// The bound passed: what the caller is told now, if anything (a quorum's part tells
    /// only when the silence decides the call, and may hand it to the runtime).
    fn timed_out(&mut self, id: u32, bound: Duration, completer: &Completer) -> Option<Outcome>;
    /// What was written to `out` behind it: an undo (see `FastCall::answered_late`), an
    /// attempt's follow-up.
    fn answered_late(self: Box<Self>, reply: Value, out: &mut Vec<u8>) -> Behind;
    /// How long the connection may go without this call's reply before it is trusted with
    /// no more calls (see `FastCall::silent_after`).
    fn silent_after(&self) -> Duration;
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
        out: &mut Vec<u8>,
    ) -> Behind {
        let followed = self.call.follow_up(&reply, out);
        (*self).finish(id, reply, completer, settled);
        Behind::count(usize::from(followed))
    }

    fn timed_out(&mut self, _id: u32, bound: Duration, _completer: &Completer) -> Option<Outcome> {
        let result = self.call.timed_out(bound);
        Some(match self.convert.take() {
            Some(convert) => convert(result),
            None => unconverted(result),
        })
    }

    fn answered_late(self: Box<Self>, reply: Value, out: &mut Vec<u8>) -> Behind {
        let followed = self.call.follow_up(&reply, out);
        Behind::undo(self.call.answered_late(reply, out)).and(usize::from(followed))
    }

    fn silent_after(&self) -> Duration {
        self.call.silent_after()
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

/// How the one result of a quorum call becomes its promise's outcome: shared by the call's
/// parts (one per node's connection, all on the JS thread), taken by the part that decides.
pub type SharedConvert<F> = Rc<Cell<Option<F>>>;

/// One node's part of a quorum call and the call's shared converter.
pub struct AdaptedPart<P, F> {
    part: P,
    convert: SharedConvert<F>,
}

impl<P, F> AdaptedPart<P, F>
where
    P: NodeCall,
    F: FnOnce(Settled<P::Output>) -> Outcome + Send + 'static,
{
    pub fn new(part: P, convert: SharedConvert<F>) -> Self {
        AdaptedPart { part, convert }
    }

    pub fn write(&self, out: &mut Vec<u8>, lane: u64, form: AttemptForm) -> usize {
        self.part.write(out, lane, form)
    }

    pub fn bound(&self) -> Duration {
        self.part.bound()
    }
}

/// What a part's `told` comes to: the outcome to settle now, if any; a call that goes on
/// through the runtime settles from there.
fn tell<T, F>(
    convert: &SharedConvert<F>,
    id: u32,
    told: Told<T>,
    completer: &Completer,
) -> Option<Outcome>
where
    T: Send + 'static,
    F: FnOnce(Settled<T>) -> Outcome + Send + 'static,
{
    let Told::Step(step) = told else {
        return None;
    };
    let convert = convert.take();
    let convert = move |result| match convert {
        Some(convert) => convert(result),
        None => unconverted(result),
    };
    match step {
        Step::Now(result) => Some(convert(result)),
        // A quorum call hands no lock over; were there one, its unclaimed guard frees it.
        Step::Handed { released, .. } => Some(convert(released)),
        Step::Later(later) => {
            completer.run(id, async move { convert(later.await) });
            None
        }
    }
}

impl<P, F> Call for AdaptedPart<P, F>
where
    P: NodeCall,
    F: FnOnce(Settled<P::Output>) -> Outcome + Send + 'static,
{
    fn answered(
        self: Box<Self>,
        id: u32,
        reply: Value,
        completer: &Completer,
        settled: &mut Vec<Settlement>,
        out: &mut Vec<u8>,
    ) -> Behind {
        let AdaptedPart { part, convert } = *self;
        let followed = part.follow_up(&reply, out);
        let told = part.answered(reply, out);
        if let Told::Undid(undo) = told {
            return Behind::undo(Some(undo)).and(followed);
        }
        if let Some(outcome) = tell(&convert, id, told, completer) {
            settled.push(Settlement::Settled(id, outcome));
        }
        Behind::count(followed)
    }

    fn timed_out(&mut self, id: u32, _bound: Duration, completer: &Completer) -> Option<Outcome> {
        let told = self.part.timed_out();
        tell(&self.convert, id, told, completer)
    }

    fn answered_late(self: Box<Self>, reply: Value, out: &mut Vec<u8>) -> Behind {
        let followed = self.part.follow_up(&reply, out);
        Behind::undo(self.part.answered_late(reply, out)).and(followed)
    }

    fn silent_after(&self) -> Duration {
        self.part.silent_after()
    }

    fn resend(self: Box<Self>, id: u32, left: Option<Duration>, completer: &Completer) {
        let AdaptedPart { part, convert } = *self;
        if let Some(outcome) = tell(&convert, id, part.broken(left), completer) {
            completer.settle(id, outcome);
        }
    }

    fn abandon(self: Box<Self>) {
        self.part.abandon();
    }

    fn orphaned(self: Box<Self>, id: u32, completer: &Completer) {
        let AdaptedPart { part, convert } = *self;
        if let Some(later) = part.orphaned() {
            run(id, later, convert.take(), completer);
        }
    }
}
