//! A Redlock's JS-thread sockets: one per node, each a `JsSocket` of its own (opened,
//! resting and retired as any), a quorum call's parts written to all of them in the same
//! loop turn. The core decides (core::ops::fast::quorum); this only fans the parts out.
//!
//! A call goes this way only while every node's socket is open and usable; otherwise the
//! runtime carries it (it knows how to do without a node that is down) and the sockets not
//! open are opened, or retried after `RETRY_AFTER`, for a later call.

use super::super::outcome::Outcome;
use super::super::settle::Completer;
use super::super::thread::JsThread;
use super::call::AdaptedPart;
use super::connection::Shared;
use super::{enabled, JsSocket};
use crate::binding::sys::uv;
use crate::core::api::{direct, NodeCall, Route, Way};
use crate::core::front::connection::LockConnection;
use crate::core::front::reply::Settled;
use std::cell::Cell;
use std::rc::Rc;

/// The sockets of one Redlock connection's nodes on one JS thread, in the nodes' order.
pub struct JsQuorum {
    nodes: Vec<Rc<JsSocket>>,
    completer: Completer,
}

impl JsQuorum {
    /// `None` when `connection` is no Redlock whose every node can have such a socket, or
    /// the environment cannot have one (`NATIVE_REDIS_LOCK_DIRECT=0` among others).
    pub fn of(
        connection: &LockConnection,
        thread: &Rc<JsThread>,
        completer: &Completer,
    ) -> Option<Rc<JsQuorum>> {
        if !enabled() || !uv::available() {
            return None;
        }
        if Route::outside(connection.store()) != Way::Quorum {
            return None;
        }
        let nodes = direct::nodes(connection.endpoint());
        let nodes = (nodes.iter().enumerate())
            .map(|(i, node)| JsSocket::node(connection, i, node, thread, completer))
            .collect();
        Some(Rc::new(JsQuorum {
            nodes,
            completer: completer.clone(),
        }))
    }

    /// Every node's connection, when all are open; else `None`, and those that are not
    /// start opening (each asked, not only up to the first missing).
    pub fn sender(&self) -> Option<QuorumSender> {
        let mut open = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            if let Some(connection) = node.connection() {
                open.push(connection);
            }
        }
        (open.len() == self.nodes.len()).then(|| QuorumSender {
            nodes: open,
            completer: self.completer.clone(),
        })
    }
}

/// Every node's connection, found open, to send one quorum call on.
pub struct QuorumSender {
    nodes: Vec<Rc<Shared>>,
    completer: Completer,
}

impl QuorumSender {
    /// Sends each of `parts` to its node; the part that decides settles promise `id`
    /// through `convert`.
    pub fn send<P, F>(&self, id: u32, parts: Vec<P>, convert: F)
    where
        P: NodeCall,
        F: FnOnce(Settled<P::Output>) -> Outcome + Send + 'static,
    {
        let convert = Rc::new(Cell::new(Some(convert)));
        let mut parts = parts.into_iter();
        for node in &self.nodes {
            let Some(part) = parts.next() else {
                break;
            };
            let part = AdaptedPart::new(part, convert.clone());
            let mut node = node.borrow_mut();
            let lane = node.lane();
            node.queue(id, move |out, form| {
                let replies = part.write(out, lane, form);
                (replies, part.bound(), Box::new(part))
            });
        }
        // One flush for all the nodes, so the parts leave in the same loop turn, from one
        // callback.
        if let Some((lead, others)) = self.nodes.split_first() {
            lead.borrow_mut()
                .flush_with(others.iter().map(Rc::downgrade));
        }
        // Parts and nodes come from the same endpoint, so none is left; were one left, it
        // would never be answered here: it hands the call to the runtime, as a node whose
        // connection broke does.
        for part in parts {
            let part = Box::new(AdaptedPart::new(part, convert.clone()));
            super::call::Call::resend(part, id, None, &self.completer);
        }
    }
}
