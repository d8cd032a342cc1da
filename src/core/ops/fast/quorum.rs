//! A call sent to every node of a Redlock at once, each node's part on a socket of its own
//! outside the runtime (the JS thread's, one per node; see docs/plans/redlock-fast.md). The
//! parts share one state: each reply read is tallied there and the call decided by the
//! same verdicts the runtime's gather uses (backend/redlock_tally.rs), at the quorum, not
//! after the stragglers. Exactly one part tells the decision; the others tell nothing.
//!
//! What the decision needs written on the nodes (the fence raised, what a lost attempt set
//! undone) goes through the runtime (`RedlockStore::conclude`), as does the whole call when
//! a node refuses it (NOSCRIPT, a RESP2 reply it cannot read...) or its socket breaks while
//! the call is undecided: every call here may run twice (the attempt's script recognises
//! its token, a release deletes only a lock still ours). A node whose socket breaks once the
//! call is decided may keep what the call set there (its attempt ran unseen) or still hold
//! what it was to free (its release never got there): that node alone is owed the free,
//! through the runtime's connection to it (backend/redlock_owed.rs), each node on its own.

use super::undo::UndoSent;
use super::{count_missed, Later, Step};
use crate::core::backend::boundary::Backend;
use crate::core::backend::redlock_late::{Late, TokenWatch};
use crate::core::backend::redlock_store::RedlockStore;
use crate::core::basics::error::LockError;
use crate::core::basics::sync::lock;
use crate::core::ops::attempt::AttemptTerms;
use crate::core::ops::lock::{AttemptForm, Locker};
use crate::core::proto::acquire::Layout;
use crate::core::proto::release::Release;
use crate::core::proto::wire::write_whole;
use crate::core::proto::Op;
use redis::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[path = "quorum_calls.rs"]
mod calls;

pub use calls::{QuorumAttempt, QuorumRelease, Unsent};

/// What one node's reply (or silence) tells the caller of the whole call.
// Unboxed: taken apart at once, on every reply of a quorum call.
#[allow(clippy::large_enum_variant)]
pub enum Told<T> {
    /// Nothing yet, or nothing ever: another part tells (or told) the decision.
    Nothing,
    /// Nothing for the caller; a command undoing what this node took was written to `out`
    /// (on the node's own connection, so it runs after the call), its reply for nobody.
    Undid(UndoSent),
    /// The decision: the call ends so (or goes on through the runtime).
    Step(Step<T>),
}

/// One node's part of a quorum call, sent on that node's own socket. Its lane calls exactly
/// one of `answered`, `broken`, `orphaned`, or (after `timed_out`) `answered_late` or
/// `abandon`, as for a `FastCall`.
pub trait NodeCall: Send + 'static {
    type Output: Send + 'static;

    /// Appends the node's request to `out`, on the node's connection `lane` (an id no other
    /// connection of the process has), which takes attempts in `form`; answers with the
    /// number of replies (the last is the one read).
    fn write(&self, out: &mut Vec<u8>, lane: u64, form: AttemptForm) -> usize;

    /// Before its reply (in time or late) is read: a command that reply calls for on the
    /// node's own connection, its reply for nobody (a transaction that found the lock held
    /// counts its fences drawn in vain, as a single server's attempt does); how many.
    fn follow_up(&self, _reply: &Value, _out: &mut Vec<u8>) -> usize {
        0
    }

    /// How long the node's lane waits for its reply.
    fn bound(&self) -> Duration;

    /// How long the node's lane may go without this part's reply before the node counts
    /// as silent (see `FastCall::silent_after`): the caller's command timeout, not a bound
    /// cut short by an attempt's deadline.
    fn silent_after(&self) -> Duration {
        self.bound()
    }

    /// The node's reply came in time.
    fn answered(self, reply: Value, out: &mut Vec<u8>) -> Told<Self::Output>;

    /// The bound passed with no reply: the node counts as not answering (it may still
    /// answer late, `answered_late`).
    fn timed_out(&mut self) -> Told<Self::Output>;

    /// The reply came after `timed_out`: the undo, when one was written to `out`.
    fn answered_late(self, reply: Value, out: &mut Vec<u8>) -> Option<UndoSent>;

    /// The node's connection is gone with its part unanswered: an undecided call goes
    /// again, whole, through the runtime within `left` (or its own bound).
    fn broken(self, left: Option<Duration>) -> Told<Self::Output>;

    /// The node's connection is gone after `timed_out`.
    fn abandon(self);

    /// The caller's JS environment is going away: nobody hears of the call. Freed (an
    /// attempt), or sent again through the runtime (a release), once for the whole call.
    fn orphaned(self) -> Option<Later<Self::Output>>;
}

/// What one node's request differs in from another's (see `Quorum::shape`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Shape {
    pub form: AttemptForm,
    /// Whether a transaction pushes the node's fence counter (`AttemptTerms::node_push`).
    pub keep_fences: bool,
}

/// The bytes of the last shape a call encoded, copied to each node of that shape: 5 nodes
/// cost one encoding, not 5. A request is made of the call's fixed terms and its node's
/// shape alone, so the copy is what encoding it again would write.
struct Encoded {
    shape: Shape,
    bytes: Vec<u8>,
    replies: usize,
}

/// Each node's answer so far, at its index (`None`: pending; a node past its bound is an
/// error, never `None`).
pub type NodeAnswers<A> = Vec<Option<Result<A, LockError>>>;

/// The whole call, as its parts' shared state decides it.
pub trait Quorum: Send + Sized + 'static {
    type Output: Send + 'static;
    type Answer: Send + 'static;

    fn nodes(&self) -> usize;

    /// The form the call is written in on a connection offering `offered`.
    fn form(&self, offered: AttemptForm) -> AttemptForm {
        let _ = offered;
        AttemptForm::Script
    }

    /// What node `node`'s request in `form` is made of beyond the call's own terms: nodes
    /// of one shape are sent the same bytes, encoded once for the call.
    fn shape(&self, form: AttemptForm, node: usize) -> Shape {
        let _ = node;
        Shape {
            form,
            keep_fences: false,
        }
    }

    /// Appends the request of a node of `shape`; answers with the number of replies.
    fn write(&self, out: &mut Vec<u8>, shape: Shape) -> usize;

    /// The request was written to node `node` on its connection `lane`.
    fn written(&self, _node: usize, _lane: u64) {}

    fn bound(&self) -> Duration;

    /// See `NodeCall::silent_after`.
    fn silent_after(&self) -> Duration {
        self.bound()
    }

    /// Node `node`'s reply to the call written in `form`; `None` when the node refused the
    /// call, which the runtime then answers (it reloads scripts and reports the rest as it
    /// always does).
    fn read(
        &self,
        reply: Value,
        form: AttemptForm,
        node: usize,
    ) -> Option<Result<Self::Answer, LockError>>;

    /// The decision, once `seen` makes one (`seen` may then be taken); else the call back.
    fn decide(
        self,
        seen: &mut NodeAnswers<Self::Answer>,
    ) -> Result<(Step<Self::Output>, Decided), Self>;

    /// The whole call again through the runtime, within `left` (or its own bound).
    fn resend(self, left: Option<Duration>) -> Later<Self::Output>;

    /// See `NodeCall::orphaned`.
    fn orphaned(self) -> Option<Later<Self::Output>>;

    /// Counts the fences `reply` (a node's, to the call written in `form`) drew for nothing,
    /// on the node's connection: `true` when that was written to `out`.
    fn count_missed(&self, _reply: &Value, _form: AttemptForm, _out: &mut Vec<u8>) -> bool {
        false
    }

    /// What frees the call's token on a node (an attempt's), for its stragglers.
    fn undo(&self) -> Option<Undo> {
        None
    }
}

/// What a decided call leaves for its stragglers.
pub enum Decided {
    /// Nothing: the runtime carries the whole call (a release sent again).
    Done,
    /// A release: a node that answered it ran it; one whose socket broke first is owed it.
    Released(Unsent),
    /// The attempt's token is ours, or the runtime's to conclude (the fence raised, or the
    /// whole call sent again): a straggler's win is kept while the token's lock stands, and
    /// undone on its own connection once it is over (released, or undone by the runtime;
    /// backend/redlock_late.rs). One answering past its bound is undone either way, as the
    /// runtime frees an attempt past its bound (`RedisStore::acquire_owned`).
    Concluding(Undo),
    /// The attempt lost: a straggler that took the lock undoes it.
    Lost(Undo),
}

/// Frees a lost attempt's token on a node that took it after the decision.
pub struct Undo {
    locker: Arc<Locker>,
    terms: AttemptTerms,
}

impl Undo {
    pub fn new(locker: Arc<Locker>, terms: AttemptTerms) -> Self {
        Undo { locker, terms }
    }

    /// Whether `reply`, a node's to the attempt written in `form`, says it took the lock.
    fn took(&self, reply: Value, form: AttemptForm) -> bool {
        let op = self.terms.op(Layout::Plain, form);
        op.decode(reply).is_ok_and(|answer| answer.took_lock())
    }

    /// Counts the fences `reply` (to the attempt written in `form`) drew for nothing, on
    /// the node's connection: `true` when that was written to `out`.
    fn count_missed(&self, reply: &Value, form: AttemptForm, out: &mut Vec<u8>) -> bool {
        count_missed(&self.terms.op(Layout::Plain, form), reply, out)
    }

    /// The token watched while stragglers are out (`None` off a Redlock).
    fn watch(&self) -> Option<TokenWatch> {
        redlock_of(&self.locker).map(|store| store.late().watch(&self.terms.token))
    }

    /// What frees the token, on a node's socket (`write`) or through the runtime (`owe`).
    fn release(&self) -> Release<'_> {
        let terms = &self.terms;
        Release::late_win(&terms.redis_key, &terms.token, self.locker.is_fair())
    }

    /// Whole: its reply is for nobody, and a NOSCRIPT would leave the token to its TTL.
    fn write(&self, out: &mut Vec<u8>) {
        write_whole(&self.release(), out);
    }

    /// The undo written on node `node`'s connection, its reply not read yet.
    /// Should that connection break first, the undo may never have run there: it is owed to
    /// the node through the runtime (backend/redlock_owed.rs), as is one the node refused
    /// for a passing state (`UndoSent::heard`).
    fn sent(&self, node: usize) -> UndoSent {
        let undo = Undo::new(self.locker.clone(), self.terms.clone());
        UndoSent::new(self.locker.stats(), move || undo.owe(node))
    }

    /// Frees the token on node `node` through the runtime, once the node answers.
    fn owe(&self, node: usize) {
        if let Some(store) = redlock_of(&self.locker) {
            let ttl = self.terms.ttl;
            store.owe(node, &self.release(), ttl, self.locker.command_timeout());
        }
    }
}

struct QuorumState<Q: Quorum> {
    /// `None` once decided (or handed to the runtime).
    call: Option<Q>,
    seen: NodeAnswers<Q::Answer>,
    decided: Option<Decided>,
    /// While `Decided::Concluding` with stragglers out: whether the token's lock is over.
    watch: Option<TokenWatch>,
    /// Each node's connection the call was written on (0: not written).
    lanes: Vec<u64>,
    /// The form each node was written in: its replies are read so.
    forms: Vec<AttemptForm>,
    encoded: Option<Encoded>,
}

impl<Q: Quorum> QuorumState<Q> {
    /// Records `answer` as node `node`'s and decides if the call is open.
    fn record(&mut self, node: usize, answer: Result<Q::Answer, LockError>) -> Told<Q::Output> {
        let Some(call) = self.call.take() else {
            return Told::Nothing;
        };
        if let Some(slot) = self.seen.get_mut(node) {
            *slot = Some(answer);
        }
        // Read before `decide`, which may take the answers.
        let out = self.seen.iter().any(|seen| !matches!(seen, Some(Ok(_))));
        match call.decide(&mut self.seen) {
            Ok((step, decided)) => {
                self.decided(decided, out);
                Told::Step(step)
            }
            Err(call) => {
                self.call = Some(call);
                Told::Nothing
            }
        }
    }

    /// Keeps `decided`, the token watched when it is concluding with stragglers `out`.
    fn decided(&mut self, decided: Decided, out: bool) {
        if let (Decided::Concluding(undo), true) = (&decided, out) {
            self.watch = undo.watch();
        }
        self.decided = Some(decided);
        // No node is written the call after this (a late one gets a PING): a straggler out
        // for its whole bound need not keep the request's bytes alive.
        self.encoded = None;
    }

    /// The open call, taken for the runtime (or its end), which concludes it.
    fn hand_off(&mut self) -> Option<Q> {
        let call = self.call.take()?;
        let decided = match call.undo() {
            Some(undo) => Decided::Concluding(undo),
            None => Decided::Done,
        };
        // Every other node is still out, or may answer late.
        self.decided(decided, true);
        Some(call)
    }

    /// The undo for a node's win read after the decision, if it is to be undone: always
    /// after a lost one or past the node's bound (`late`); else once the lock is over,
    /// unless the release went to the node on the connection that read the win (`read_on`),
    /// behind the attempt.
    fn undo_for(&self, late: bool, read_on: Option<usize>) -> Option<&Undo> {
        match &self.decided {
            Some(Decided::Lost(undo)) => Some(undo),
            Some(Decided::Concluding(undo)) => match self.watch.as_ref() {
                None => late.then_some(undo),
                Some(watch) => match watch.late() {
                    // The runtime tries again with the token: its own conclusion covers the
                    // node.
                    Late::Superseded => None,
                    Late::Over if !late && self.released_behind(watch, read_on) => None,
                    Late::Over => Some(undo),
                    Late::Kept => late.then_some(undo),
                },
            },
            _ => None,
        }
    }

    /// Whether a release went to node `node` behind this call, on the same connection.
    fn released_behind(&self, watch: &TokenWatch, node: Option<usize>) -> bool {
        let Some(node) = node else {
            return false;
        };
        match self.lanes.get(node) {
            Some(&lane) if lane != 0 => watch.released_behind(node, lane),
            _ => false,
        }
    }

    /// Node `node`'s win read after the decision is undone on its own connection, when it
    /// is to be (`undo_for`); the undo, when it was written to `out`.
    fn undo_late(
        &self,
        node: usize,
        reply: Value,
        out: &mut Vec<u8>,
        late: bool,
    ) -> Option<UndoSent> {
        match self.undo_for(late, Some(node)) {
            Some(undo) if undo.took(reply, self.form(node)) => {
                undo.write(out);
                Some(undo.sent(node))
            }
            _ => None,
        }
    }

    fn form(&self, node: usize) -> AttemptForm {
        (self.forms.get(node).copied()).unwrap_or(AttemptForm::Script)
    }

    /// What `node`'s reply to a transaction calls for: the fences it drew for nothing
    /// counted (see `NodeCall::follow_up`).
    fn follow_up(&self, node: usize, reply: &Value, out: &mut Vec<u8>) -> usize {
        let form = self.form(node);
        if form == AttemptForm::Script {
            return 0;
        }
        let counted = match (&self.call, &self.decided) {
            (Some(call), _) => call.count_missed(reply, form, out),
            (None, Some(Decided::Concluding(undo) | Decided::Lost(undo))) => {
                undo.count_missed(reply, form, out)
            }
            _ => false,
        };
        usize::from(counted)
    }

    /// Node `node`'s connection broke after the decision with its part unanswered (`late`:
    /// already past its bound). Its attempt may have taken the lock there after the
    /// runtime's undo (or our release), unseen: the node is owed the undo, when it is to be
    /// (`undo_for`). Its release may never have got there: the node is owed the release.
    /// Each node for itself: another broken node's free, sent on another connection, may
    /// have run before this node's attempt did.
    fn owe(&self, node: usize, late: bool) {
        match &self.decided {
            Some(Decided::Released(unsent)) => unsent.owe(node),
            _ => {
                if let Some(undo) = self.undo_for(late, None) {
                    undo.owe(node);
                }
            }
        }
    }
}

/// One node's part of `Q`.
pub struct Part<Q: Quorum> {
    node: usize,
    bound: Duration,
    silent_after: Duration,
    shared: Arc<Mutex<QuorumState<Q>>>,
}

/// `call`'s parts, one per node in the nodes' order.
pub fn parts<Q: Quorum>(call: Q) -> Vec<Part<Q>> {
    let (nodes, bound, silent_after) = (call.nodes(), call.bound(), call.silent_after());
    let shared = Arc::new(Mutex::new(QuorumState {
        call: Some(call),
        seen: (0..nodes).map(|_| None).collect(),
        decided: None,
        watch: None,
        lanes: vec![0; nodes],
        forms: vec![AttemptForm::Script; nodes],
        encoded: None,
    }));
    (0..nodes)
        .map(|node| Part {
            node,
            bound,
            silent_after,
            shared: shared.clone(),
        })
        .collect()
}

impl<Q: Quorum> NodeCall for Part<Q> {
    type Output = Q::Output;

    fn write(&self, out: &mut Vec<u8>, lane: u64, offered: AttemptForm) -> usize {
        let mut shared = lock(&self.shared);
        if let Some(seen) = shared.lanes.get_mut(self.node) {
            *seen = lane;
        }
        let form = match &shared.call {
            Some(call) => call.form(offered),
            None => AttemptForm::Script,
        };
        if let Some(slot) = shared.forms.get_mut(self.node) {
            *slot = form;
        }
        let QuorumState { call, encoded, .. } = &mut *shared;
        if let Some(call) = call {
            let shape = call.shape(form, self.node);
            let replies = match encoded {
                Some(done) if done.shape == shape => {
                    out.extend_from_slice(&done.bytes);
                    done.replies
                }
                _ => {
                    let start = out.len();
                    let replies = call.write(out, shape);
                    let bytes = out.get(start..).unwrap_or_default().to_vec();
                    *encoded = Some(Encoded {
                        shape,
                        bytes,
                        replies,
                    });
                    replies
                }
            };
            call.written(self.node, lane);
            return replies;
        }
        // Decided before this node was written to (not done by the lanes, which write
        // every part at once): a no-op that still answers once.
        out.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        1
    }

    fn bound(&self) -> Duration {
        self.bound
    }

    fn silent_after(&self) -> Duration {
        self.silent_after
    }

    fn follow_up(&self, reply: &Value, out: &mut Vec<u8>) -> usize {
        lock(&self.shared).follow_up(self.node, reply, out)
    }

    fn answered(self, reply: Value, out: &mut Vec<u8>) -> Told<Q::Output> {
        let mut shared = lock(&self.shared);
        let Some(call) = shared.call.as_ref() else {
            return match shared.undo_late(self.node, reply, out, false) {
                Some(sent) => Told::Undid(sent),
                None => Told::Nothing,
            };
        };
        match call.read(reply, shared.form(self.node), self.node) {
            Some(answer) => shared.record(self.node, answer),
            None => match shared.hand_off() {
                Some(call) => Told::Step(Step::Later(call.resend(None))),
                None => Told::Nothing,
            },
        }
    }

    fn timed_out(&mut self) -> Told<Q::Output> {
        let no_reply = LockError::no_reply(self.bound);
        lock(&self.shared).record(self.node, Err(no_reply))
    }

    fn answered_late(self, reply: Value, out: &mut Vec<u8>) -> Option<UndoSent> {
        lock(&self.shared).undo_late(self.node, reply, out, true)
    }

    fn broken(self, left: Option<Duration>) -> Told<Q::Output> {
        let mut shared = lock(&self.shared);
        match shared.hand_off() {
            Some(call) => Told::Step(Step::Later(call.resend(left))),
            None => {
                shared.owe(self.node, false);
                Told::Nothing
            }
        }
    }

    fn abandon(self) {
        lock(&self.shared).owe(self.node, true);
    }

    fn orphaned(self) -> Option<Later<Q::Output>> {
        let call = {
            let mut shared = lock(&self.shared);
            let call = shared.hand_off();
            if call.is_none() {
                // Decided, this node's part unanswered: its socket goes with the environment.
                shared.owe(self.node, false);
            }
            call
        };
        call?.orphaned()
    }
}

/// The Redlock behind `locker`, if it is one.
pub fn redlock_of(locker: &Locker) -> Option<&RedlockStore> {
    match locker.store().backend() {
        Backend::Redlock(store) => Some(store),
        _ => None,
    }
}

#[cfg(test)]
#[path = "quorum_tests.rs"]
mod tests;
