//! The `Reply` a front answers a JS call through: the call's promise, its JS thread's own
//! connection (or a `memory://` keyspace, run inline), and how the front's result becomes
//! what the promise settles with.

use super::outcome::Outcome;
use super::settle::Completer;
use super::socket::{self, JsQuorum, JsSocket, QuorumSender, Sender};
use super::thread::JsThread;
use crate::core::api::{inline, Caller, FastCall, MemoryInline, NodeCall, Parking, Parks, Way};
use crate::core::front::connection::LockConnection;
use crate::core::front::granted::Granted;
use crate::core::front::reply::{FastLane, Reply, Settled};
use std::future::Future;
use std::rc::Rc;

/// How the calls of one native object are answered: their JS thread, the queue the runtime
/// settles them through, and the thread's own connection to the object's server.
#[derive(Clone)]
pub struct JsCalls {
    pub completer: Completer,
    pub thread: Rc<JsThread>,
    /// The JS-thread connection for one-round-trip calls, where the endpoint allows one.
    direct: Option<Rc<JsSocket>>,
    /// The keyspace of a `memory://` endpoint, whose calls run inline.
    inline: Option<MemoryInline>,
    /// A Redlock's JS-thread sockets, one per node, where every node allows one.
    quorum: Option<Rc<JsQuorum>>,
}

impl JsCalls {
    pub fn new(connection: &LockConnection, completer: Completer, thread: Rc<JsThread>) -> Self {
        let inline = socket::enabled()
            .then(|| inline::open(connection.endpoint()))
            .flatten();
        JsCalls {
            direct: JsSocket::of(connection, &thread, &completer),
            quorum: JsQuorum::of(connection, &thread, &completer),
            inline,
            completer,
            thread,
        }
    }

    /// The reply of call `id`, settled through `convert`.
    pub fn reply<F>(&self, id: u32, convert: F) -> JsReply<'_, F> {
        JsReply {
            id,
            calls: self,
            convert,
        }
    }
}

/// Call `id` of a JS thread, settled through `convert`.
pub struct JsReply<'a, F> {
    id: u32,
    calls: &'a JsCalls,
    convert: F,
}

/// The JS thread's way outside the runtime, ready.
pub struct JsFastLane {
    via: Via,
    completer: Completer,
    thread: Rc<JsThread>,
}

enum Via {
    /// Its connection, found open.
    Socket(Sender),
    /// A `memory://` keyspace, run inline.
    Inline(MemoryInline),
}

impl Parks for JsFastLane {
    fn parking(&self) -> std::sync::Arc<dyn Parking> {
        self.completer.0.clone()
    }
}

impl FastLane for JsFastLane {
    fn answer_lent(&self, waiter: u32, granted: Granted) {
        // Its runtime task, if any, ends without a word.
        self.completer.answered(waiter);
        self.thread.settle_in_call(waiter, Outcome::Lease(granted));
    }
}

impl<T, F> Reply<T> for JsReply<'_, F>
where
    T: Send + 'static,
    F: FnOnce(Settled<T>) -> Outcome + Send + 'static,
{
    type Lane = JsFastLane;

    fn fast_lane(&self, way: Way) -> Option<JsFastLane> {
        let calls = self.calls;
        let via = match way {
            Way::Socket => Via::Socket(calls.direct.as_ref()?.sender()?),
            Way::Inline => Via::Inline(calls.inline.clone()?),
            Way::Quorum | Way::Runtime => return None,
        };
        Some(JsFastLane {
            via,
            completer: calls.completer.clone(),
            thread: calls.thread.clone(),
        })
    }

    fn call_fast<C, G>(self, on: &JsFastLane, call: C, then: G)
    where
        C: FastCall,
        G: FnOnce(Settled<C::Output>) -> Settled<T> + Send + 'static,
    {
        let convert = self.convert;
        let convert = move |result| convert(then(result));
        match &on.via {
            Via::Socket(sender) => sender.send(self.id, call, convert),
            Via::Inline(memory) => {
                socket::run_inline(memory, self.id, call, convert, &on.thread, &on.completer)
            }
        }
    }

    type Quorum = QuorumSender;

    fn quorum_lane(&self) -> Option<QuorumSender> {
        self.calls.quorum.as_ref()?.sender()
    }

    fn call_quorum<P, G>(self, on: &QuorumSender, parts: Vec<P>, then: G)
    where
        P: NodeCall,
        G: FnOnce(Settled<P::Output>) -> Settled<T> + Send + 'static,
    {
        let convert = self.convert;
        on.send(self.id, parts, move |result| convert(then(result)));
    }

    fn run(self, work: impl Future<Output = Settled<T>> + Send + 'static) {
        let convert = self.convert;
        self.calls
            .completer
            .run(self.id, async move { convert(work.await) });
    }

    fn run_after_pause(self, work: impl Future<Output = Settled<T>> + Send + 'static) {
        let convert = self.convert;
        self.calls
            .completer
            .run_here_first(self.id, async move { convert(work.await) });
    }

    fn now(self, result: Settled<T>) {
        self.calls.completer.settle(self.id, (self.convert)(result));
    }

    fn caller(&self, lent_start: bool, asked: std::time::Instant) -> Caller {
        Caller {
            thread: self.thread(),
            id: self.id,
            lent_start,
            asked,
        }
    }

    fn thread(&self) -> usize {
        Rc::as_ptr(&self.calls.thread) as usize
    }
}
