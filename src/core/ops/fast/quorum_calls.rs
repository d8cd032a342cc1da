//! The two calls a Redlock sends on its nodes' own sockets (see quorum.rs): a first attempt
//! at a lock, won at the quorum, and a plain release, done at a quorum of releases. Every
//! other outcome ends through the runtime, in the same code as the runtime's own attempt
//! (`RedlockStore::conclude`) or release.

use super::{parts, redlock_of, Decided, NodeAnswers, Part, Quorum, Shape, Undo};
use crate::core::backend::redlock_tally::{acquire_verdict, release_verdict, Tally, Verdict};
use crate::core::basics::background::spawn;
use crate::core::basics::cancel::Cancel;
use crate::core::basics::clock;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::ops::acquire::{Plan, Start};
use crate::core::ops::attempt::PlainRequest;
use crate::core::ops::fast::acquire::{again, won, Mode};
use crate::core::ops::fast::{count_missed, is_refusal, Later, Settled, Step};
use crate::core::ops::key_scheme::KeyScheme;
use crate::core::ops::lock::{AttemptForm, Locker};
use crate::core::ops::release::outcome;
use crate::core::proto::acquire::{AcquireAttempt, Acquired};
use crate::core::proto::release::{Release, ReleaseKind};
use crate::core::proto::Op;
use futures_util::FutureExt;
use redis::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A first attempt at a DistributedLock lock on every node of a Redlock, one token for all.
pub struct QuorumAttempt {
    locker: Arc<Locker>,
    request: PlainRequest,
    mode: Mode,
    tally: Tally,
    /// The plan's bound of an attempt: the runtime's work after the replies is bounded so.
    bound: Duration,
}

impl QuorumAttempt {
    /// `locker`'s first attempt at `key`, in parts, one per node; `sent` counts from now.
    /// `mode` back when `locker`'s store is no Redlock.
    // Unboxed: handed straight back to the caller, which then takes another way.
    #[allow(clippy::result_large_err)]
    pub fn new(
        locker: &Arc<Locker>,
        key: &str,
        ttl: Duration,
        mode: Mode,
    ) -> Result<Vec<Part<Self>>, Mode> {
        let Some(store) = redlock_of(locker) else {
            return Err(mode);
        };
        let tally = store.tally();
        store.note_ttl(ttl);
        let bound = mode.plan.attempts.bound(locker.command_timeout());
        Ok(parts(QuorumAttempt {
            request: locker.attempt_request(key, ttl),
            locker: locker.clone(),
            mode,
            tally,
            bound,
        }))
    }

    fn op(&self, form: AttemptForm) -> AcquireAttempt<'_> {
        self.request.op(form)
    }

    fn undo(&self) -> Undo {
        Undo::new(self.locker.clone(), self.request.terms.clone())
    }

    /// Ends through the runtime: `conclude` writes what the verdict needs on the nodes (the
    /// fence raised, or what the attempt set undone); a held lock then goes on as the plan
    /// says. `held`: joined now, on the lane's thread, as a first attempt joins when its
    /// reply is read (see `PlainAttempt::held`).
    fn conclude(self, replies: NodeAnswers<Acquired>, held: bool) -> Later<Option<Lease>> {
        let QuorumAttempt {
            locker,
            request,
            mode: Mode { plan, cancel },
            bound,
            ..
        } = self;
        let (plan, missed) = match held {
            true => plan.joined(&locker, &request.key, request.terms.ttl),
            false => (plan, false),
        };
        let ends = Ends {
            plan,
            cancel,
            missed,
        };
        concluded(locker, request, ends, replies, bound).boxed()
    }
}

/// How an attempt goes on once concluded.
struct Ends {
    plan: Plan,
    cancel: Cancel,
    /// A release of ours may have missed the waiter before it joined: the next attempt is
    /// due at once.
    missed: bool,
}

async fn concluded(
    locker: Arc<Locker>,
    request: PlainRequest,
    ends: Ends,
    replies: NodeAnswers<Acquired>,
    bound: Duration,
) -> Settled<Option<Lease>> {
    let acquired = match redlock_of(&locker) {
        Some(store) => {
            let op = request.op(AttemptForm::Script);
            store
                .conclude(&op, replies, request.terms.sent.at, bound)
                .await
        }
        None => Err(LockError::Internal("a quorum attempt off a Redlock".into())),
    };
    let Ends {
        plan,
        cancel,
        missed,
    } = ends;
    let (key, ttl) = (request.key.clone(), request.terms.ttl);
    match acquired? {
        Acquired::Won { fence, .. } => {
            let lease = request.into_lease(fence);
            (locker.won(lease, &cancel, plan, KeyScheme::Ours(&key))).await
        }
        Acquired::Held { ttl: holder_ttl } => match plan.attempts.ended_by_held(&key) {
            Some(ended) => ended,
            None => {
                let start = Start::after_held(missed, holder_ttl);
                locker.pursue(plan, &key, ttl, &cancel, start).await
            }
        },
        // conclude never answers so for a script's replies; as the runtime reads them.
        Acquired::SetWithoutFence { .. } | Acquired::Refused => Err(LockError::no_fence()),
    }
}

impl Quorum for QuorumAttempt {
    type Output = Option<Lease>;
    type Answer = Acquired;

    fn nodes(&self) -> usize {
        self.tally.nodes
    }

    /// The transaction where the node's connection takes one, as a single server's first
    /// attempt (far cheaper for Redis than the script); the script for a lock found held
    /// lately, which draws no fence when it fails.
    fn form(&self, offered: AttemptForm) -> AttemptForm {
        self.request.terms.form(offered)
    }

    /// A transaction pushes the node's fence counter unless that node's own replies showed
    /// it kept long enough (`AttemptTerms::node_push`): one node's counter says nothing of
    /// another's, and a node that missed a push must not be left short.
    fn shape(&self, form: AttemptForm, node: usize) -> Shape {
        // Read only by a transaction (the script pushes the counter itself).
        let keep_fences = form != AttemptForm::Script
            && (self.request.terms).node_push(self.locker.store(), node);
        Shape { form, keep_fences }
    }

    fn write(&self, out: &mut Vec<u8>, shape: Shape) -> usize {
        let mut op = self.op(shape.form);
        if shape.form != AttemptForm::Script {
            op.keep_fences = shape.keep_fences;
        }
        op.encode(out);
        op.replies()
    }

    /// A node silent past the validity cannot help a win any more.
    fn bound(&self) -> Duration {
        self.bound.min(clock::validity(self.request.terms.ttl))
    }

    fn silent_after(&self) -> Duration {
        self.locker.command_timeout()
    }

    fn read(
        &self,
        reply: Value,
        form: AttemptForm,
        node: usize,
    ) -> Option<Result<Acquired, LockError>> {
        if is_refusal(&reply) {
            return None;
        }
        if form != AttemptForm::Script {
            (self.request.terms).note_node_kept(self.locker.store(), node, &reply);
        }
        match self.op(form).decode(reply) {
            // The runtime, sent the same token, finds its own lock and reads its fence, or
            // takes the lock back and fails (see fence.lua).
            Ok(Acquired::SetWithoutFence { .. } | Acquired::Refused) => None,
            answer => Some(answer),
        }
    }

    fn decide(
        self,
        seen: &mut NodeAnswers<Acquired>,
    ) -> Result<(Step<Option<Lease>>, Decided), Self> {
        let terms = &self.request.terms;
        let now = Instant::now();
        match acquire_verdict(&self.tally, seen, terms.sent.at, now, terms.ttl) {
            Verdict::Pending => Err(self),
            // Fences agree: nothing to write, the lease is ours now.
            Verdict::Won { fence } => {
                let QuorumAttempt {
                    locker,
                    request,
                    mode,
                    ..
                } = self;
                let undo = Undo::new(locker.clone(), request.terms.clone());
                let lease = request.into_lease(fence);
                Ok((won(locker, lease, mode), Decided::Concluding(undo)))
            }
            Verdict::Raise => {
                let undo = self.undo();
                let later = self.conclude(std::mem::take(seen), false);
                Ok((Step::Later(later), Decided::Concluding(undo)))
            }
            Verdict::Held => {
                self.locker.stats().contended(&self.request.key);
                self.request.terms.note_held(self.locker.store());
                let undo = self.undo();
                let later = self.conclude(std::mem::take(seen), true);
                Ok((Step::Later(later), Decided::Lost(undo)))
            }
            Verdict::Failed => {
                let undo = self.undo();
                let later = self.conclude(std::mem::take(seen), false);
                Ok((Step::Later(later), Decided::Lost(undo)))
            }
        }
    }

    fn resend(self, left: Option<Duration>) -> Later<Option<Lease>> {
        let QuorumAttempt {
            locker,
            request,
            mode,
            ..
        } = self;
        again(locker, request, mode, left)
    }

    fn orphaned(self) -> Option<Later<Option<Lease>>> {
        let QuorumAttempt {
            locker, request, ..
        } = self;
        spawn(async move { locker.abandon(&request.terms).await });
        None
    }

    fn count_missed(&self, reply: &Value, form: AttemptForm, out: &mut Vec<u8>) -> bool {
        count_missed(&self.op(form), reply, out)
    }

    fn undo(&self) -> Option<Undo> {
        Some(QuorumAttempt::undo(self))
    }
}

/// A plain release (`Locker::release_request`) on every node of a Redlock.
pub struct QuorumRelease {
    locker: Arc<Locker>,
    lease: Arc<Lease>,
    tally: Tally,
    bound: Duration,
}

impl QuorumRelease {
    /// `None` when the release must go through the runtime (see `Locker::release_request`),
    /// or `locker`'s store is no Redlock.
    pub fn new(locker: &Arc<Locker>, lease: &Arc<Lease>) -> Option<Vec<Part<Self>>> {
        let store = redlock_of(locker)?;
        let bound = locker.release_request(lease)?;
        // A straggler of the attempt that took it, still out, is freed when it answers.
        store.late().end(&lease.token);
        let tally = store.tally();
        Some(parts(QuorumRelease {
            locker: locker.clone(),
            lease: lease.clone(),
            tally,
            bound,
        }))
    }

    fn op(&self) -> Release<'_> {
        release_of(&self.lease)
    }
}

/// `lease`'s plain release, sent only when no waiter of ours is to be woken
/// (`Locker::release_request`).
fn release_of(lease: &Lease) -> Release<'_> {
    Release {
        lock_key: &lease.redis_key,
        token: &lease.token,
        kind: ReleaseKind::Wake { ours_wait: false },
    }
}

/// A decided release, for the nodes that had not answered it.
pub struct Unsent {
    locker: Arc<Locker>,
    lease: Arc<Lease>,
    bound: Duration,
}

impl Unsent {
    /// Node `node` may still hold the lock: the release is sent there through the runtime
    /// once the node answers, for as long as a copy of the lock can live there.
    pub(super) fn owe(&self, node: usize) {
        if let Some(store) = redlock_of(&self.locker) {
            let lives = self.lease.ttl().max(self.lease.remaining());
            store.owe(node, &release_of(&self.lease), lives, self.bound);
        }
    }
}

impl Quorum for QuorumRelease {
    type Output = bool;
    type Answer = bool;

    fn nodes(&self) -> usize {
        self.tally.nodes
    }

    fn write(&self, out: &mut Vec<u8>, _shape: Shape) -> usize {
        self.op().encode(out);
        1
    }

    /// Behind a straggler of the attempt on that connection, if one is out there.
    fn written(&self, node: usize, lane: u64) {
        if let Some(store) = redlock_of(&self.locker) {
            store.late().behind(&self.lease.token, node, lane);
        }
    }

    fn bound(&self) -> Duration {
        self.bound
    }

    fn silent_after(&self) -> Duration {
        self.locker.command_timeout()
    }

    fn read(
        &self,
        reply: Value,
        _form: AttemptForm,
        _node: usize,
    ) -> Option<Result<bool, LockError>> {
        match is_refusal(&reply) {
            true => None,
            false => Some(self.op().decode(reply)),
        }
    }

    fn decide(self, seen: &mut NodeAnswers<bool>) -> Result<(Step<bool>, Decided), Self> {
        match release_verdict(&self.tally, seen) {
            None => Err(self),
            Some(released) => {
                let result = outcome(&self.lease, released);
                let QuorumRelease {
                    locker,
                    lease,
                    bound,
                    ..
                } = self;
                let unsent = Unsent {
                    locker,
                    lease,
                    bound,
                };
                Ok((Step::Now(result), Decided::Released(unsent)))
            }
        }
    }

    fn resend(self, _left: Option<Duration>) -> Later<bool> {
        let QuorumRelease { locker, lease, .. } = self;
        async move { locker.release(&lease).await }.boxed()
    }

    fn orphaned(self) -> Option<Later<bool>> {
        Some(self.resend(None))
    }
}
