//! One acquire attempt: SET NX PX of a fresh token, numbered with the next fence when it
//! wins. Written as the acquire script, or (on a connection of the caller's own, where it
//! is far cheaper for Redis) as one transaction; each form's reply is read once, into one
//! answer.

use super::release::{Release, ReleaseKind};
use super::syncguard::ReleaseById;
use super::{scripts, syncguard, Op, Request, Wire};
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use crate::core::basics::resp;
use crate::core::basics::token;
use redis::Value;
use std::time::{Duration, Instant};

/// How an attempt is written on a connection of the caller's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptForm {
    /// `MULTI`, `SET NX PX`, `INCRBY 2` of the fence, `EXEC`: atomic, and far cheaper for
    /// Redis than a script. The fence is the first of the two drawn (see acquire.lua). The
    /// counter also moves on a failed attempt, which keeps every fence strictly increasing
    /// (gaps are allowed), so a lock found held lately is attempted by the script instead
    /// (ops/kept_fences.rs). This server has run a transaction on this connection.
    Transaction,
    /// As `Transaction`, but no transaction has run on this connection yet: should the
    /// server refuse MULTI, the commands after it run one by one. An attempt that cannot
    /// afford that (ExclusiveLock's, whose two keys must be set together) writes the script,
    /// behind an empty `MULTI` `EXEC` that tells whether transactions work here.
    Untried,
    /// The acquire script: the runtime's form, and a user's whose ACL forbids MULTI.
    Script,
}

/// Which form a connection of the caller's own (the JS thread's socket) writes its attempts
/// in, learnt from its server's replies: a transaction until the server refuses MULTI (an
/// ACL without it), the script from then on. A property of the connection, whatever lock is
/// attempted on it.
#[derive(Debug, Default)]
pub struct TxSupport {
    refused: bool,
    worked: bool,
}

impl TxSupport {
    /// How the next attempt is written.
    pub fn attempts(&self) -> AttemptForm {
        match (self.refused, self.worked) {
            (true, _) => AttemptForm::Script,
            (false, true) => AttemptForm::Transaction,
            (false, false) => AttemptForm::Untried,
        }
    }

    /// A command queued in a transaction was refused. Only a refusal of the command itself
    /// (an ACL without it, a renamed or unknown command) or of a form of it the server does
    /// not know (`PEXPIRE` with `NX`/`GT`, Redis before 7.0: see `push_fences`) says the
    /// transaction cannot be written here; any other (OOM under maxmemory, a read-only
    /// replica, ...) passes with its cause, and taking it for one would send every later
    /// attempt as the costlier script.
    pub fn multi_refused(&mut self, refusal: &Value) {
        if let Value::ServerError(err) = refusal {
            let details = err.details().unwrap_or_default().to_ascii_lowercase();
            let unknown = err.code() == "ERR" && details.starts_with("unknown command");
            if err.code() == "NOPERM" || unknown || (err.code() == "ERR" && unknown_form(&details))
            {
                self.refused = true;
            }
        }
    }

    /// A transaction ran with none of its commands refused.
    pub fn multi_worked(&mut self) {
        self.worked = true;
    }

    /// A transaction's EXEC answered `reply`: a command refused as it ran, for a form the
    /// server does not know (a server that queues `PEXPIRE ... NX` and fails it in EXEC),
    /// turns the connection to the script as a refusal while queueing does.
    pub fn exec_answered(&mut self, reply: &Value) {
        if let Value::Array(items) = reply {
            for item in items {
                self.multi_refused(item);
            }
        }
        self.multi_worked();
    }
}

/// Whether an error's `details` (lowercased) refuse a form of a command the server does not
/// know: Redis 6 counts `PEXPIRE key ms NX` a wrong number of arguments, Redis 7 and the
/// servers that mimic it name an option they do not support, others say syntax error.
/// Nothing else in an attempt's transaction is refused so: its commands are well formed.
fn unknown_form(details: &str) -> bool {
    details.starts_with("wrong number of arguments for 'pexpire'")
        || details.starts_with("unsupported option")
        || details.starts_with("syntax error")
}

/// What frees an attempt's token where it may have won late, by its layout.
pub enum LateWin<'a> {
    Release(Release<'a>),
    /// syncguard's.
    ById(ReleaseById<'a>),
}

/// Which lock the attempt takes.
pub enum Layout<'a> {
    /// DistributedLock's: the lock key holds the token.
    Plain,
    /// ExclusiveLock's: the lock key holds `contents`, the owner key the token (the
    /// transaction writes no owner key: it reads the lock key's absolute expiry instead,
    /// which tells our lock key apart from one another client re-created, see
    /// same_expiry.lua).
    Exclusive {
        owner_key: &'a [u8],
        contents: &'a str,
    },
    /// A DistributedLock waiter's, on a connection that hears the lock's releases: failing,
    /// it queues that connection (`queue_id`, at `score`) for a wake-up (acquire_queued.lua);
    /// `company` when other waiters of that connection wait for the lock too.
    Queued {
        queue_id: &'a str,
        score: u64,
        company: bool,
        lifetime: Duration,
    },
    /// A DistributedLock waiter's on a store that grants (join_ring.lua): failing, it puts
    /// that connection (`ring_id`) in the lock's ring once, to be granted the lock by a
    /// release (see proto/ring.rs).
    Ring { ring_id: &'a str },
    /// An attempt at a fair lock (acquire_fair.lua): a waiter's `member` takes or keeps its
    /// place in the line (a first attempt has none, empty).
    Fair {
        member: &'a str,
        place: Duration,
        lifetime: Duration,
    },
    /// syncguard's (sg_acquire.lua): the lock key holds a JSON record with the token as its
    /// lockId, `index_key` the lock key as `stored_key` writes it, and the fence counter is
    /// syncguard's own (never expires: `fence_retention_ms` and `keep_fences` are unused).
    /// The script's form only: a transaction cannot read a record's expiry.
    Syncguard {
        index_key: &'a [u8],
        stored_key: &'a [u8],
        user_key: &'a str,
    },
}

pub struct AcquireAttempt<'a> {
    pub lock_key: &'a [u8],
    pub fence_key: &'a [u8],
    pub token: &'a str,
    pub ttl: Duration,
    /// How long the fence counter outlives the lock, in ms; 0 forever (see fence.lua).
    pub fence_retention_ms: u64,
    /// Whether a transaction pushes the fence counter's expiry (see ops/kept_fences.rs).
    pub keep_fences: bool,
    /// Whether the script leaves the fence counter's expiry alone, unread: the connection
    /// knows it kept long enough (ops/kept_fences.rs `won_by_script`; never for a window
    /// of 0, which the script persists).
    pub fences_known_kept: bool,
    pub layout: Layout<'a>,
    pub form: AttemptForm,
    /// When the attempt was first sent (sent again, it keeps that instant): a lock won by
    /// it is counted from then, as its lease is, so a Redlock counts its validity from it.
    pub sent: Instant,
}

/// What an attempt's reply says.
#[derive(Debug, PartialEq, Eq)]
pub enum Acquired {
    /// Ours, with `fence`; `set_at`, when the reply tells it, is when the lock expires (server
    /// ms): an ExclusiveLock transaction's lock key, or syncguard's record.
    Won { fence: u64, set_at: Option<i64> },
    /// Someone else's; `ttl` is the holder's remaining time when the reply tells it (only
    /// the script's does: a transaction that found the lock held asks nothing more).
    Held { ttl: Option<Duration> },
    /// A transaction set the lock, but its counter gave no usable fence: the lock is ours
    /// and must be settled (DistributedLock: the script with the same token reads its fence
    /// or takes it back; ExclusiveLock: taken back).
    SetWithoutFence { set_at: Option<i64> },
    /// A server error, or a transaction aborted: nothing was set (or the script recognises
    /// its token), so the attempt may go again.
    Refused,
}

impl Acquired {
    /// Whether the attempt set the lock: what a reply come too late must know to free it.
    pub fn took_lock(&self) -> bool {
        matches!(
            self,
            Acquired::Won { .. } | Acquired::SetWithoutFence { .. }
        )
    }
}

impl AcquireAttempt<'_> {
    /// How many replies the attempt gets; the last is what `decode` reads.
    pub fn replies(&self) -> usize {
        match (self.transaction(), self.form) {
            (true, _) => 4 + self.exclusive() as usize + self.fence_pushes(),
            (false, AttemptForm::Untried) => 3,
            (false, _) => 1,
        }
    }

    /// What frees this attempt's token where it may have won after we stopped waiting for
    /// its reply (sent on the connection it went out on, so it runs after it): `None` for
    /// ExclusiveLock's pair, which its own undo frees.
    pub fn late_free(&self) -> Option<Request> {
        Some(match self.late_win()? {
            LateWin::Release(release) => Request::of(&release),
            LateWin::ById(release) => Request::of(&release),
        })
    }

    /// The release `late_free` sends: `undo`'s, but for ExclusiveLock's pair, whose own undo
    /// frees it (ops/exclusive.rs) knowing the expiry its transaction set.
    pub fn late_win(&self) -> Option<LateWin<'_>> {
        match self.layout {
            Layout::Exclusive { .. } => None,
            _ => Some(self.undo()),
        }
    }

    /// What frees whatever this attempt of its token set, released as any release is (a
    /// queued waiter is woken); ExclusiveLock's pair whatever its expiry.
    pub fn undo(&self) -> LateWin<'_> {
        let (lock_key, token) = (self.lock_key, self.token);
        match self.layout {
            Layout::Fair { .. } => LateWin::Release(Release::late_win(lock_key, token, true)),
            Layout::Plain | Layout::Queued { .. } | Layout::Ring { .. } => {
                LateWin::Release(Release::late_win(lock_key, token, false))
            }
            Layout::Exclusive {
                owner_key,
                contents,
            } => LateWin::Release(Release {
                lock_key: owner_key,
                token,
                kind: ReleaseKind::Pair {
                    data_key: lock_key,
                    contents: contents.as_bytes(),
                    set_at: None,
                },
            }),
            // Its lock key holds a record, found through the lockId's index key.
            Layout::Syncguard { index_key, .. } => LateWin::ById(ReleaseById {
                index_key,
                lock_id: token,
                expect: Some(lock_key),
                ours_wait: false,
            }),
        }
    }

    /// How many fences `reply` shows drawn for no acquisition: a transaction that found the
    /// lock held drew two all the same (its INCRBY answered), which `watch` must not read as
    /// an acquisition (see missed.rs); a script draws none when it fails.
    pub fn drawn_in_vain(&self, reply: &Value) -> u64 {
        let Value::Array(items) = reply else {
            return 0;
        };
        match items.as_slice() {
            [Value::Nil, Value::Int(_), ..] if self.transaction() => 2,
            _ => 0,
        }
    }

    fn exclusive(&self) -> bool {
        matches!(self.layout, Layout::Exclusive { .. })
    }

    /// Only a plain attempt and ExclusiveLock's have a transaction form: a waiter's queue
    /// and a fair lock's line are the scripts' alone.
    fn transaction(&self) -> bool {
        match self.layout {
            Layout::Plain => self.form != AttemptForm::Script,
            Layout::Exclusive { .. } => self.form == AttemptForm::Transaction,
            _ => false,
        }
    }

    /// What the lock key holds: ExclusiveLock's contents, or the token.
    fn value(&self) -> &[u8] {
        match self.layout {
            Layout::Exclusive { contents, .. } => contents.as_bytes(),
            _ => self.token.as_bytes(),
        }
    }

    /// How many commands a transaction adds after its INCRBY (see `push_fences`).
    fn fence_pushes(&self) -> usize {
        match (self.keep_fences, self.fence_retention_ms) {
            (false, _) => 0,
            (true, 0) => 1,
            (true, _) => 2,
        }
    }

    /// What a transaction adds after its INCRBY, as fence.lua's `keep_fences`: the counter
    /// kept the window past the lock and a quarter window more (the first sets an expiry on
    /// a counter without one, the second only lengthens one), or forever for a window of 0;
    /// nothing when the connection knows it kept that long already. Redis before 7.0
    /// refuses the flags as the transaction is queued, and the connection turns to the
    /// script for good.
    fn push_fences<W: Wire>(&self, wire: &mut W) {
        match self.fence_pushes() {
            0 => {}
            1 => wire.command(&[b"PERSIST", self.fence_key]),
            _ => {
                let ttl_ms = self.ttl.as_millis() as u64;
                let keep = resp::decimal(pushed_for(ttl_ms, self.fence_retention_ms));
                for flag in [b"NX", b"GT"] {
                    wire.command(&[b"PEXPIRE", self.fence_key, keep.as_bytes(), flag]);
                }
            }
        }
    }

    fn encode_script<W: Wire>(&self, wire: &mut W) {
        let ttl = resp::decimal(self.ttl.as_millis() as u64);
        let window = WindowArg::new(self.fence_retention_ms, self.fences_known_kept);
        let window = window.as_bytes();
        let (key, fence) = (self.lock_key, self.fence_key);
        let ms = |duration: Duration| resp::decimal(duration.as_millis() as u64);
        let head = [self.token.as_bytes(), ttl.as_bytes(), window];
        match self.layout {
            Layout::Plain => wire.script(&scripts::ACQUIRE, &[key, fence], &head),
            Layout::Exclusive {
                owner_key,
                contents,
            } => wire.script(
                &scripts::ACQUIRE,
                &[key, fence, owner_key],
                &[
                    contents.as_bytes(),
                    ttl.as_bytes(),
                    window,
                    self.token.as_bytes(),
                ],
            ),
            Layout::Queued {
                queue_id,
                score,
                company,
                lifetime,
            } => {
                let company: &[u8] = if company { b"1" } else { b"0" };
                let (score, lifetime) = (resp::decimal(score), ms(lifetime));
                let tail = [
                    queue_id.as_bytes(),
                    score.as_bytes(),
                    company,
                    lifetime.as_bytes(),
                ];
                wire.script(
                    &scripts::ACQUIRE_QUEUED,
                    &[key, fence, &keys::queue_key(key)],
                    &[&head[..], &tail[..]].concat(),
                );
            }
            Layout::Ring { ring_id } => wire.script(
                &scripts::JOIN_RING,
                &[key, fence, &keys::ring_key(key)],
                &[&head[..], &[ring_id.as_bytes()]].concat(),
            ),
            Layout::Fair {
                member,
                place,
                lifetime,
            } => {
                let (place, lifetime) = (ms(place), ms(lifetime));
                let tail = [member.as_bytes(), place.as_bytes(), lifetime.as_bytes()];
                wire.script(
                    &scripts::ACQUIRE_FAIR,
                    &[key, fence, &keys::line_key(key), &keys::alive_key(key)],
                    &[&head[..], &tail[..]].concat(),
                );
            }
            Layout::Syncguard {
                index_key,
                stored_key,
                user_key,
            } => {
                // Every TTL JS calls whole reaches the script, even one Redis will refuse.
                let ttl = self.ttl.as_millis().to_string();
                wire.script(
                    &scripts::SG_ACQUIRE,
                    &[key, index_key, fence],
                    &[
                        self.token.as_bytes(),
                        ttl.as_bytes(),
                        stored_key,
                        user_key.as_bytes(),
                    ],
                );
            }
        }
    }

    fn encode_transaction<W: Wire>(&self, wire: &mut W) {
        let ttl = resp::decimal(self.ttl.as_millis() as u64);
        wire.command(&[b"MULTI"]);
        wire.command(&[
            b"SET",
            self.lock_key,
            self.value(),
            b"NX",
            b"PX",
            ttl.as_bytes(),
        ]);
        wire.command(&[b"INCRBY", self.fence_key, b"2"]);
        self.push_fences(wire);
        if self.exclusive() {
            wire.command(&[b"PEXPIRETIME", self.lock_key]);
        }
        wire.command(&[b"EXEC"]);
    }
}

impl Op for AcquireAttempt<'_> {
    type Out = Acquired;

    /// Writes every command of its form: the runtime sends only the script (one command).
    fn encode<W: Wire>(&self, wire: &mut W) {
        if self.transaction() {
            return self.encode_transaction(wire);
        }
        if self.form == AttemptForm::Untried && self.exclusive() {
            wire.command(&[b"MULTI"]);
            wire.command(&[b"EXEC"]);
        }
        self.encode_script(wire);
    }

    fn decode(&self, reply: Value) -> Result<Acquired, LockError> {
        if let Layout::Syncguard { .. } = self.layout {
            return syncguard_answer(reply);
        }
        if matches!(reply, Value::ServerError(_)) {
            return Ok(Acquired::Refused);
        }
        if !self.transaction() {
            return match resp::typed::<(i64, i64)>(reply)? {
                (1, fence) => Ok(Acquired::Won {
                    fence: fence_of(fence)?,
                    set_at: None,
                }),
                (_, pttl) => Ok(Acquired::Held {
                    ttl: u64::try_from(pttl).ok().map(Duration::from_millis),
                }),
            };
        }
        Ok(self.exec_answer(&reply))
    }
}

impl AcquireAttempt<'_> {
    /// What EXEC's `[lock set?, counter, the counter kept (none, one or two), lock expiry
    /// (ExclusiveLock)]` says.
    fn exec_answer(&self, reply: &Value) -> Acquired {
        let Value::Array(items) = reply else {
            return Acquired::Refused;
        };
        let (counter, rest) = match items.as_slice() {
            [Value::Nil, ..] => return Acquired::Held { ttl: None },
            [Value::Okay | Value::SimpleString(_), counter, rest @ ..] => (counter, rest),
            _ => return Acquired::Refused,
        };
        let set_at = match (self.exclusive(), rest.last()) {
            (false, _) => None,
            (true, Some(Value::Int(expiry))) => Some(*expiry),
            (true, _) => return Acquired::Refused,
        };
        // Drawn two at a time, as acquire.lua: the counter is the kept one, which must be a
        // fence too (a counter refused by INCRBY answers an error here).
        match counter {
            Value::Int(after) if (2..=token::FENCE_MAX as i64).contains(after) => Acquired::Won {
                fence: *after as u64 - 1,
                set_at,
            },
            _ => Acquired::SetWithoutFence { set_at },
        }
    }
}

/// What sg_acquire.lua's reply says: won with its fence and the record's absolute expiry
/// (server ms, in `set_at`), or held with the holder's PTTL. A server error (a TTL Redis
/// refuses after the fence was drawn, a value at the lock key that is not JSON) is an
/// error, unlike our own layouts' `Refused`: nothing was locked, and syncguard rejects it.
fn syncguard_answer(reply: Value) -> Result<Acquired, LockError> {
    let reply = reply.extract_error()?;
    let Value::Array(items) = &reply else {
        return Err(syncguard::malformed("acquire", &reply));
    };
    match items.as_slice() {
        [Value::Int(1), won, Value::Int(expires)] => match syncguard::fence(won) {
            Some(fence) => Ok(Acquired::Won {
                fence,
                set_at: Some(*expires),
            }),
            None => Err(syncguard::malformed("acquire", &reply)),
        },
        [Value::Int(0), Value::Int(pttl)] => Ok(Acquired::Held {
            ttl: u64::try_from(*pttl).ok().map(Duration::from_millis),
        }),
        _ => Err(syncguard::malformed("acquire", &reply)),
    }
}

/// How far a transaction pushes the counter of a lock living `ttl_ms`: the window past the
/// lock, and a quarter window more (a counter may live 1.25 windows past its last lock).
pub fn pushed_for(ttl_ms: u64, window_ms: u64) -> u64 {
    ttl_ms
        .saturating_add(window_ms)
        .saturating_add(window_ms / 4)
}

/// fence.lua's window argument: the counter's retention in ms (0: forever), or `-` when the
/// connection knows the counter kept that long already, so the script leaves its expiry
/// alone, unread (ops/kept_fences.rs). Never `-` for a window of 0: the script persists the
/// counter each time, which nothing known can spare.
pub(super) struct WindowArg(Option<resp::Decimal>);

impl WindowArg {
    pub(super) fn new(retention_ms: u64, known_kept: bool) -> Self {
        WindowArg((!known_kept || retention_ms == 0).then(|| resp::decimal(retention_ms)))
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        self.0.as_ref().map_or(b"-", resp::Decimal::as_bytes)
    }
}

/// The fence a script answered as a `u64`: an error for a value outside the fencing range,
/// which means no fence could be drawn; an acquisition never resolves with such a fence.
pub fn fence_of(fence: i64) -> Result<u64, LockError> {
    match u64::try_from(fence) {
        Ok(fence @ 1..=token::FENCE_MAX) => Ok(fence),
        _ => Err(LockError::no_fence()),
    }
}

#[cfg(test)]
#[path = "acquire_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "acquire_forms_tests.rs"]
pub(crate) mod forms_tests;

#[cfg(test)]
#[path = "acquire_syncguard_tests.rs"]
mod syncguard_tests;
