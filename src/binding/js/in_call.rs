//! A call run inline (`memory://`) is answered inside the JS call that made it: its value
//! is returned there, with no promise made for it and nothing left for a later loop turn.
//! Which call may be, and when the loop must turn first.

use super::outcome::Outcome;
use std::cell::{Cell, RefCell};

/// Calls answered in the JS call that made them since the loop last turned. A chain of
/// awaits on such calls never yields to the loop: past this many, the next call settles at
/// the next loop turn as before, so timers and I/O wait for at most this many calls.
const PER_TURN: u32 = 1024;

/// The JS thread's call being answered in place, and what it ended with.
#[derive(Default)]
pub struct InCall {
    /// The id of the call whose JS call is still running (0: none).
    answering: Cell<u32>,
    answered: RefCell<Option<(u32, Outcome)>>,
    /// Answered in place since the loop last turned.
    since_turn: Cell<u32>,
    /// Batches being told to JS (settlements and news already taken from their queues, so
    /// `quiet` cannot see them): a call a listener makes meanwhile must not overtake them.
    telling: Cell<u32>,
}

/// A batch being told to JS, from `InCall::telling` until dropped.
pub struct Telling<'a>(&'a Cell<u32>);

impl Drop for Telling<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

impl InCall {
    /// Call `id` starts, in the JS call that made it; returns the call this one nests in
    /// (a listener's call made while another was answered), for `end`.
    pub fn begin(&self, id: u32) -> u32 {
        self.answering.replace(id)
    }

    /// Keeps `outcome` for the JS call that made call `id`, when it is still running and
    /// nothing should be told before it (`quiet`: no earlier settlement or news waits).
    /// A failure keeps the promise path, so that it is a rejection as before.
    pub fn keep(
        &self,
        id: u32,
        outcome: Outcome,
        quiet: impl FnOnce() -> bool,
    ) -> Result<(), Outcome> {
        // One answer kept at a time: a second (a call nested in a listener) would take the
        // first's place, and the first's JS call would return a promise nobody settles.
        let may = id != 0
            && self.answering.get() == id
            && self.since_turn.get() < PER_TURN
            && self.telling.get() == 0
            && self.answered.borrow().is_none()
            && !matches!(outcome, Outcome::Failed(_))
            && quiet();
        if !may {
            return Err(outcome);
        }
        self.since_turn.set(self.since_turn.get() + 1);
        *self.answered.borrow_mut() = Some((id, outcome));
        Ok(())
    }

    /// The call `id` made in the JS call ends; what it ended with, if kept. `outer` is what
    /// `begin` returned.
    pub fn end(&self, id: u32, outer: u32) -> Option<Outcome> {
        self.answering.set(outer);
        let mut answered = self.answered.borrow_mut();
        match answered.take() {
            Some((to, outcome)) if to == id => Some(outcome),
            other => {
                *answered = other;
                None
            }
        }
    }

    /// The answer kept for the running call, taken back: a waiter that call hands its lock
    /// to is settled after it was kept, and goes first (its continuation runs before the
    /// releaser's), so the releaser's answer waits for the next turn instead.
    pub fn withdraw(&self) -> Option<(u32, Outcome)> {
        self.answered.borrow_mut().take()
    }

    /// An answer `withdraw` took, kept again when it has nowhere else to go.
    pub fn put_back(&self, answer: (u32, Outcome)) {
        *self.answered.borrow_mut() = Some(answer);
    }

    /// A batch is told to JS until the guard drops: no call is answered in place meanwhile.
    pub fn telling(&self) -> Telling<'_> {
        self.telling.set(self.telling.get() + 1);
        Telling(&self.telling)
    }

    /// The loop turned: calls may be answered in place again.
    pub fn loop_turned(&self) {
        self.since_turn.set(0);
    }
}
