//! One attempt at a lock. On the runtime's connection (`Locker::attempt_with`): the layout
//! it is written in (plain, a waiter's queue or ring, a fair lock's line) and what its reply
//! does to its waiter. Sent on a connection of its own (the caller's, see fast/acquire.rs,
//! fast/exclusive.rs and fast/quorum.rs): its token and terms (`AttemptTerms`), owned until
//! its reply is read, from which its `AcquireAttempt` is written in whichever form that
//! connection takes, and freed through the runtime when abandoned. Contention is an answer
//! here, not an error; only an acquisition's plan (acquire.rs: retries used up, deadline
//! passed) turns it into `LockError::Locked`.

use super::key_scheme::KeyScheme;
use super::lock::Locker;
use super::store::Store;
use crate::core::backend::lock_store::LockStore;
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::lease::Lease;
use crate::core::basics::token;
use crate::core::proto::acquire::{AcquireAttempt, Acquired, AttemptForm, Layout};
use crate::core::proto::release::Release;
use crate::core::wait::wake::{self, Ticket};
use std::time::Duration;

/// What one attempt found.
pub enum Attempt {
    Acquired(Lease),
    /// Someone else holds it; `ttl` is the holder's remaining time when it has one.
    Held {
        ttl: Option<Duration>,
    },
}

impl Locker {
    /// One SET NX PX attempt with a fresh token, numbered with the next fencing token when
    /// it wins.
    pub async fn attempt(&self, key: &str, ttl: Duration) -> Result<Attempt, LockError> {
        let scheme = KeyScheme::Ours(key);
        self.attempt_bounded(scheme, ttl, self.command_timeout(), None)
            .await
    }

    /// An attempt within `timeout`: ours with a fresh token, a waiter's (`waiting`) keeping
    /// its connection queued for a wake-up when it fails; syncguard's with its call's lockId.
    pub(super) async fn attempt_bounded(
        &self,
        scheme: KeyScheme<'_>,
        ttl: Duration,
        timeout: Duration,
        waiting: Option<&Ticket>,
    ) -> Result<Attempt, LockError> {
        match scheme {
            KeyScheme::Ours(key) => {
                // Stamped after the gate: a lease stamped before a wait there would count
                // its TTL from before it could be taken.
                (self.store())
                    .pass_gate(|| self.scheme_key(&scheme), timeout)
                    .await?;
                let token = token::new_token();
                (self.attempt_with(key, token, Stamp::now(), ttl, timeout, waiting)).await
            }
            KeyScheme::Syncguard(keys) => self.attempt_syncguard(keys, ttl, timeout).await,
        }
    }

    /// An attempt with `token`, first sent at `sent`: fresh, or the token of an attempt that
    /// may have run already, and its first send's stamp (the script then grants it again
    /// with no new expiry, see acquire.lua, so the lease counts from that first send).
    pub(super) async fn attempt_with(
        &self,
        key: &str,
        token: String,
        sent: Stamp,
        ttl: Duration,
        timeout: Duration,
        waiting: Option<&Ticket>,
    ) -> Result<Attempt, LockError> {
        let redis_key = self.redis_key(key);
        // Only a connection that listens on the lock's channel may queue: a wake popped for
        // one that does not would be lost to every waiter. (A fair lock's line is another
        // matter: every waiter takes its place there, heard or not.)
        let queueing = waiting.filter(|ticket| !self.is_fair() && ticket.is_subscribed());
        let company = queueing.is_some_and(Ticket::has_company);
        let member = waiting.map(|ticket| ticket.member(self.store().id()));
        let queue_name = queueing.map(|ticket| ticket.queue_name(self.store().id()));
        let layout = match queueing {
            _ if self.is_fair() => Layout::Fair {
                member: member.as_deref().unwrap_or_default(),
                place: wake::FAIR_PLACE,
                lifetime: wake::QUEUE_LIFETIME,
            },
            Some(_) if self.store().grants() => Layout::Ring {
                ring_id: self.store().id(),
            },
            Some(_) => Layout::Queued {
                queue_id: queue_name.as_deref().unwrap_or(self.store().id()),
                score: wake::queue_score(),
                company,
                lifetime: wake::QUEUE_LIFETIME,
            },
            None => Layout::Plain,
        };
        let fence_key = keys::fence_key(&redis_key);
        let op = AcquireAttempt {
            lock_key: &redis_key,
            fence_key: &fence_key,
            token: &token,
            ttl,
            fence_retention_ms: self.fence_retention_ms(),
            keep_fences: false,
            fences_known_kept: false,
            layout,
            form: AttemptForm::Script,
            sent: sent.at,
        };
        if self.is_fair() {
            // Whatever comes of it, the attempt may have given the waiter a place.
            waiting.inspect(|ticket| ticket.set_in_line(true));
        }
        let turns = queueing.map(|ticket| ticket.wakes().turns(ticket.channel()));
        // A grant that runs after the joining but before we listen is skipped and takes us
        // out of the ring: a join sent before then counts only once repeated (see wake.rs).
        let listening = queueing.is_some_and(Ticket::is_subscribed);
        // Marked while on its way, so that no release of ours answers its caller meanwhile
        // (the caller's handle could release that lock, and this attempt win it for nobody).
        // Not sent when its caller was answered already, nor while a release of ours hands
        // it the lock: that answers it.
        let _trying = match waiting.map(Ticket::trying) {
            Some(Err(_)) => return Err(LockError::Aborted),
            Some(Ok(None)) => return Ok(Attempt::Held { ttl: None }),
            Some(Ok(Some(trying))) => Some(trying),
            None => None,
        };
        let reply = self.store().backend().acquire(&op, timeout).await;
        let won = matches!(reply, Ok(Acquired::Won { .. }));
        if won {
            self.store().acquired(&redis_key);
        }
        if let (Some(ticket), Some(turns), Ok(_)) = (queueing, turns, &reply) {
            let wakes = ticket.wakes();
            if self.store().grants() {
                if !won && listening {
                    wakes.joined_ring(ticket.channel());
                }
            } else {
                wakes.mark_queued_after(ticket.channel(), !won || company, turns);
            }
        }
        if let (Some(ticket), true) = (waiting, won) {
            // Winning took it out of the fair lock's line.
            ticket.set_in_line(false);
        }
        match reply {
            Ok(Acquired::Won { fence, .. }) => Ok(Attempt::Acquired(Lease::new(
                key.to_owned(),
                redis_key,
                token,
                fence,
                sent,
                ttl,
            ))),
            Ok(Acquired::Held { ttl }) => Ok(Attempt::Held { ttl }),
            // The runtime's connection reports a server error as an error, and the script
            // sets no lock it cannot fence.
            Ok(Acquired::SetWithoutFence { .. } | Acquired::Refused) => Err(LockError::no_fence()),
            // A timed-out attempt that may still win is freed by the store behind it.
            Err(err) => Err(err),
        }
    }
}

/// What an attempt at any lock sends: its token, `sent` when it was made.
#[derive(Clone)]
pub struct AttemptTerms {
    pub redis_key: Vec<u8>,
    fence_key: Vec<u8>,
    pub token: String,
    pub ttl: Duration,
    pub sent: Stamp,
    /// The lock's (see `Locker::fence_retention`).
    fence_retention_ms: u64,
    /// Whether a transaction pushes the fence counter's expiry (see kept_fences.rs).
    keep_fences: bool,
    /// Whether an attempt of ours found this lock held lately: this one goes as the script
    /// (see kept_fences.rs).
    contended: bool,
}

impl AttemptTerms {
    /// A fresh token, sent at `sent` (read before the attempt is written, never after), on
    /// a connection of `store`'s; `fence_key` is `redis_key`'s.
    pub fn new(
        store: &Store,
        redis_key: Vec<u8>,
        fence_key: Vec<u8>,
        ttl: Duration,
        fence_retention_ms: u64,
        sent: Stamp,
    ) -> Self {
        let news = store
            .kept_fences()
            .attempt(&fence_key, ttl, fence_retention_ms, sent.at);
        AttemptTerms {
            redis_key,
            fence_key,
            token: token::new_token(),
            ttl,
            sent,
            fence_retention_ms,
            keep_fences: news.push,
            contended: news.contended,
        }
    }

    /// The form this attempt is written in on a connection offering `offered`: the script
    /// for a lock found held lately, which draws no fence when it fails.
    pub fn form(&self, offered: AttemptForm) -> AttemptForm {
        match self.contended {
            true => AttemptForm::Script,
            false => offered,
        }
    }

    /// This attempt found the lock held: the next ones at it go as the script for a while.
    pub fn note_held(&self, store: &Store) {
        store.kept_fences().held(&self.fence_key);
    }

    /// The attempt at a lock of `layout`, written in `form`.
    pub fn op<'a>(&'a self, layout: Layout<'a>, form: AttemptForm) -> AcquireAttempt<'a> {
        AcquireAttempt {
            lock_key: &self.redis_key,
            fence_key: &self.fence_key,
            token: &self.token,
            ttl: self.ttl,
            fence_retention_ms: self.fence_retention_ms,
            keep_fences: self.keep_fences,
            fences_known_kept: false,
            layout,
            form,
            sent: self.sent.at,
        }
    }

    /// Whether its script, written in `form` on a connection to one server, leaves the fence
    /// counter alone, unread: a reply of ours showed it kept long enough (kept_fences.rs). Not
    /// on a Redlock, whose nodes each keep a counter of their own.
    pub fn script_skips_upkeep(&self, form: AttemptForm) -> bool {
        form == AttemptForm::Script && !self.keep_fences && self.fence_retention_ms != 0
    }

    /// Its script, written in `form`, won: unless it skipped its upkeep, the counter lives
    /// an eighth of a window beyond what the lock needs (fence.lua `keep_fences`).
    pub fn note_script_won(&self, store: &Store, form: AttemptForm) {
        // A script that skipped its upkeep ran with `keep_fences` off; a window of 0 shows
        // nothing (`won_by_script`).
        if form == AttemptForm::Script && self.keep_fences {
            let (ttl, window) = (self.ttl, self.fence_retention_ms);
            (store.kept_fences()).won_by_script(&self.fence_key, self.sent.at, ttl, window);
        }
    }

    /// Remembers how long the reply to its transaction kept its fence counter.
    pub fn note_kept_fences(&self, store: &Store, reply: &redis::Value) {
        if self.keep_fences {
            let (ttl, window) = (self.ttl, self.fence_retention_ms);
            let kept = store.kept_fences();
            kept.answered(reply, &self.fence_key, self.sent.at, ttl, window);
        }
    }

    /// Whether this attempt's transaction must push the counter on node `node` of a
    /// Redlock: unless that node's own replies showed it kept long enough (another node's
    /// say nothing of it; see kept_fences.rs).
    pub fn node_push(&self, store: &Store, node: usize) -> bool {
        let key = self.node_fence_key(node);
        (store.kept_fences()).due(&key, self.ttl, self.fence_retention_ms)
    }

    /// Remembers how long node `node`'s reply to this attempt's transaction kept its counter.
    pub fn note_node_kept(&self, store: &Store, node: usize, reply: &redis::Value) {
        let (key, window) = (self.node_fence_key(node), self.fence_retention_ms);
        (store.kept_fences()).answered(reply, &key, self.sent.at, self.ttl, window);
    }

    /// What a Redlock's node `node` is known by in `KeptFences`: the fence key and the node,
    /// which no key of Redis's is (a NUL, then the index).
    fn node_fence_key(&self, node: usize) -> Vec<u8> {
        use std::io::Write;
        let mut key = Vec::with_capacity(self.fence_key.len() + 4);
        key.extend_from_slice(&self.fence_key);
        key.push(0);
        // Writing to a Vec cannot fail; no String on the way.
        let _ = write!(key, "{node}");
        key
    }

    /// The same attempt under a fresh token, `sent` now.
    pub fn renewed(self) -> Self {
        AttemptTerms {
            token: token::new_token(),
            sent: Stamp::now(),
            ..self
        }
    }

    /// The terms `golden_tests` and the unit tests write: token `t`, a 5 s fence window.
    #[cfg(test)]
    pub(crate) fn sample(redis_key: &[u8], ttl: Duration, keep_fences: bool) -> Self {
        AttemptTerms {
            redis_key: redis_key.to_vec(),
            fence_key: keys::fence_key(redis_key),
            token: "t".into(),
            ttl,
            sent: Stamp::now(),
            fence_retention_ms: 5000,
            keep_fences,
            contended: false,
        }
    }
}

/// A DistributedLock's (or maestro's service's) attempt at `key`.
pub struct PlainRequest {
    pub key: String,
    pub terms: AttemptTerms,
}

impl PlainRequest {
    pub fn op(&self, form: AttemptForm) -> AcquireAttempt<'_> {
        self.terms.op(Layout::Plain, form)
    }

    pub fn into_lease(self, fence: u64) -> Lease {
        let AttemptTerms {
            redis_key,
            token,
            sent,
            ttl,
            ..
        } = self.terms;
        Lease::new(self.key, redis_key, token, fence, sent, ttl)
    }
}

impl Locker {
    /// A first attempt (as `attempt`) to send elsewhere; `sent` is now.
    /// `key` moved in when the caller owns it: one copy of it fewer an acquisition.
    pub fn attempt_request(&self, key: impl Into<String>, ttl: Duration) -> PlainRequest {
        self.attempt_request_at(key, ttl, Stamp::now())
    }

    /// `attempt_request`, sent at `sent`: the caller's own reading, taken before it, so a
    /// call reads the clock once (its lease's validity counts from then, a little early).
    pub fn attempt_request_at(
        &self,
        key: impl Into<String>,
        ttl: Duration,
        sent: Stamp,
    ) -> PlainRequest {
        let key = key.into();
        let redis_key = self.redis_key(&key);
        let fence_key = keys::fence_key(&redis_key);
        let window = self.fence_retention_ms();
        let terms = AttemptTerms::new(self.store(), redis_key, fence_key, ttl, window, sent);
        PlainRequest { key, terms }
    }

    /// Frees a lock an attempt may have won after its caller stopped waiting, through the
    /// tokio connection (the attempt's own connection is gone), bounded by the lock's TTL.
    pub async fn abandon(&self, terms: &AttemptTerms) {
        let free = Release::late_win(&terms.redis_key, &terms.token, self.is_fair());
        let _ignored = self.store().backend().release(&free, terms.ttl).await;
    }
}
