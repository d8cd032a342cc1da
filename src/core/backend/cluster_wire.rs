//! A Redis Cluster's connection as `Link` drives it: the redis crate's `ClusterConnection`
//! (it routes each command by its first key's slot, follows MOVED and ASK, and keeps sharded
//! subscriptions on the slot's master), opened from the seed nodes the user named.
//!
//! Three of them: one for commands, one for subscriptions, one for the calls that must not
//! run twice. A node that gives a slot away sends an SUNSUBSCRIBE of its own, which the crate
//! (1.8) takes for the reply to the oldest request in flight on that node: every later reply
//! there would go to the wrong caller. On a connection that carries only (un)subscriptions,
//! that costs nothing.
//!
//! The crate sends a command again by itself when the node's connection drops under it
//! (`RetryMethod::Reconnect` for a dropped socket, in `choose_response`), whether or not the
//! node ran it: an extend sent twice adds its time twice. Such calls go on a connection built
//! with no retries, whose errors `Link::call` sorts itself: a command turned away unrun is
//! sent again, a dropped socket's is not. With a restart quarantine on, every acquire attempt
//! goes on it too: resent by the crate, it would pass the gate learned before the drop
//! (`Link::send`). A MOVED still has the crate map the slots again, so
//! the next try finds the new master. An ASK (the key already went to the node importing its
//! slot) the crate would follow only as a retry, so this connection follows it itself.

use super::endpoint::{Address, Endpoint};
use super::wire::{packed, trace_sent, Conduit, Destination, PushSink, ScriptLoading};
use crate::core::basics::error::LockError;
use crate::core::basics::keys;
use redis::aio::ConnectionLike;
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig, NodeAddress};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::SingleNodeRoutingInfo;
use redis::{
    ClientTlsConfig, Cmd, ErrorKind, Pipeline, ProtocolVersion, RedisError, RedisFuture,
    RedisResult, ServerErrorKind, TlsCertificates, Value,
};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A black-holed node stalls every request while the crate refreshes its slot map (it holds
/// its map's lock across the connects), so no connect may wait longer than this.
const CONNECT_CAP: Duration = Duration::from_secs(1);
/// The crate's own retries (MOVED, ASK, TRYAGAIN, a node reconnecting) run inside our
/// per-call bound, with short pauses. Few: each may rebuild the slot map (which stalls every
/// request meanwhile), and `Link::call` sends a turned-away command again, paced, for as long
/// as its bound allows.
const RETRIES: u32 = 3;
const RETRY_MIN_WAIT_MS: u64 = 10;
const RETRY_MAX_WAIT_MS: u64 = 100;

/// The command and subscription connections of one cluster endpoint.
#[derive(Clone)]
pub struct ClusterPair {
    commands: ClusterConnection,
    subscriptions: ClusterConnection,
    /// No retries of the crate's: see the module's comment. Opened by its first call (the
    /// crate connects to every master as soon as a connection is made), so a client that
    /// never extends a lock opens no sockets for it.
    once: Arc<Lazy>,
    /// `commands` is `once`'s connection, which follows no ASK by itself.
    asks: bool,
}

/// A connection made from `client` on first use.
struct Lazy {
    client: ClusterClient,
    connection: OnceLock<ClusterConnection>,
}

impl Lazy {
    fn get(&self) -> ClusterConnection {
        self.connection.get_or_init(|| open(&self.client)).clone()
    }
}

impl ConnectionLike for ClusterPair {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        if !self.asks {
            return self.commands.req_packed_command(cmd);
        }
        Box::pin(async move {
            match self.commands.req_packed_command(cmd).await {
                Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::Ask) => {
                    asked(&mut self.commands, cmd, err).await
                }
                reply => reply,
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.commands.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.commands.get_db()
    }
}

impl Conduit for ClusterPair {
    /// A cluster's nodes are found from the seeds the user named: there is no upstream to ask.
    async fn open(
        endpoint: &Endpoint,
        _destination: Destination<'_>,
        resp3: bool,
        pushes: PushSink,
    ) -> Result<Self, LockError> {
        let retrying = client(endpoint, resp3, pushes.clone(), RETRIES)?;
        Ok(ClusterPair {
            commands: open(&retrying),
            subscriptions: open(&retrying),
            once: Arc::new(Lazy {
                client: client(endpoint, resp3, pushes, 0)?,
                connection: OnceLock::new(),
            }),
            asks: false,
        })
    }

    fn sent_once(&self) -> Self {
        ClusterPair {
            commands: self.once.get(),
            subscriptions: self.subscriptions.clone(),
            once: self.once.clone(),
            asks: true,
        }
    }

    /// The crate keeps one multiplexed connection per node: a request whose caller gave up
    /// stays queued there and its reply, whenever it comes, goes nowhere, without shifting
    /// any other. Opening the whole cluster afresh instead would put every lock on every
    /// master in doubt for one node's silence; a node silent for long still has it opened
    /// afresh (`silences.rs`). (The crate's own response timeout is left off: it would send
    /// the command again at once, to the same silent node.)
    const KEPT_ON_TIMEOUT: bool = true;

    fn slot_of(cmd: &Cmd) -> Option<u16> {
        first_key(cmd).map(keys::slot)
    }

    fn slot_of_key(key: &[u8]) -> Option<u16> {
        Some(keys::slot(key))
    }

    /// Nothing ahead: the crate sends a SCRIPT LOAD to every node, replicas included, and
    /// holds it while it reconnects to one that died or maps the slots again, so calls on the
    /// healthy masters would wait for a failover. A call that finds its script missing on its
    /// node sends it there whole (`Link`).
    const SCRIPTS: ScriptLoading = ScriptLoading::ByCall;

    /// Never asked: see `SCRIPTS`.
    async fn load_scripts(&mut self, _sources: &'static [&'static str]) -> RedisResult<()> {
        Ok(())
    }

    async fn subscribe_sharded(&mut self, channel: &[u8]) -> RedisResult<()> {
        let subscriptions = &mut self.subscriptions;
        switched("SSUBSCRIBE", channel, subscriptions.ssubscribe(channel)).await
    }

    async fn subscribe_plain(&mut self, channel: &[u8]) -> RedisResult<()> {
        let subscriptions = &mut self.subscriptions;
        switched("SUBSCRIBE", channel, subscriptions.subscribe(channel)).await
    }

    /// One channel per command: channels of several slots in one SUNSUBSCRIBE are CROSSSLOT.
    async fn unsubscribe(&mut self, channels: Vec<Vec<u8>>, sharded: bool) -> RedisResult<()> {
        for channel in channels {
            let subscriptions = &mut self.subscriptions;
            if sharded {
                switched(
                    "SUNSUBSCRIBE",
                    &channel,
                    subscriptions.sunsubscribe(&channel),
                )
                .await?;
            } else {
                switched("UNSUBSCRIBE", &channel, subscriptions.unsubscribe(&channel)).await?;
            }
        }
        Ok(())
    }
}

/// The key a command of ours is routed by, as the crate finds it: a script's first key, else
/// the first argument. `None` for a script of no key (routed anywhere).
fn first_key(cmd: &Cmd) -> Option<&[u8]> {
    let mut args = cmd.args_iter().filter_map(|arg| match arg {
        redis::Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let name = args.next()?;
    let scripted = [
        &b"EVAL"[..],
        b"EVALSHA",
        b"EVAL_RO",
        b"EVALSHA_RO",
        b"FCALL",
    ]
    .iter()
    .any(|known| name.eq_ignore_ascii_case(known));
    if !scripted {
        return args.next();
    }
    let _body = args.next()?;
    let count = std::str::from_utf8(args.next()?)
        .ok()?
        .parse::<u32>()
        .ok()?;
    (count > 0).then(|| args.next()).flatten()
}

/// A (un)subscription `name` to `channel` the crate sends (`sending`), traced once answered.
async fn switched(
    name: &str,
    channel: &[u8],
    sending: impl std::future::Future<Output = RedisResult<()>>,
) -> RedisResult<()> {
    let started = Instant::now();
    let done = sending.await;
    trace_sent(|| packed(redis::cmd(name).arg(channel)), started, &done);
    done
}

/// Sends `cmd` once to the node an ASK named, behind an ASKING that lets it in there while
/// its slot is still the other node's; a node the connection does not know, or any error of
/// its, comes back as an error for `Link::call` to sort.
async fn asked(con: &mut ClusterConnection, cmd: &Cmd, ask: RedisError) -> RedisResult<Value> {
    let node = ask.redirect_node().and_then(|(addr, _slot)| {
        let (host, port) = addr.rsplit_once(':')?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Some((host.to_string(), port.parse::<u16>().ok()?))
    });
    let Some((host, port)) = node else {
        return Err(ask);
    };
    let mut pipe = Pipeline::with_capacity(2);
    pipe.cmd("ASKING").add_command(cmd.clone());
    let route = SingleNodeRoutingInfo::ByAddress { host, port };
    let replies = con.route_pipeline(pipe, 1, 1, route).await?;
    match replies.into_iter().next() {
        Some(reply) => reply.extract_error(),
        None => Err(ask),
    }
}

/// A client of the endpoint's seed nodes whose connections resend a command `retries` times.
fn client(
    endpoint: &Endpoint,
    resp3: bool,
    pushes: PushSink,
    retries: u32,
) -> Result<ClusterClient, LockError> {
    let Address::Cluster { tls, nat, .. } = &endpoint.address else {
        return Err(LockError::Internal("a cluster wire needs a cluster".into()));
    };
    let mut builder = ClusterClientBuilder::new(endpoint.node_connection_infos(resp3)?)
        .retries(retries)
        .min_retry_wait(RETRY_MIN_WAIT_MS)
        .max_retry_wait(RETRY_MAX_WAIT_MS)
        .connection_timeout(endpoint.connect_timeout.min(CONNECT_CAP));
    if !nat.is_empty() {
        // Applied as each node is dialled: the slot map keeps the announced addresses, which
        // MOVED and ASK name.
        let address = |(host, port): &(String, u16)| NodeAddress::new(host.as_str(), *port);
        let map = nat.iter().map(|(from, to)| (address(from), address(to)));
        builder = builder.node_address_map(map.collect());
    }
    if let Some(tls) = tls
        .as_ref()
        .filter(|t| t.ca.is_some() || t.client.is_some())
    {
        builder = builder.certs(TlsCertificates {
            client_tls: tls.client.as_ref().map(|client| ClientTlsConfig {
                client_cert: client.cert.clone(),
                client_key: client.key.clone(),
            }),
            root_cert: tls.ca.clone(),
        });
    }
    if resp3 {
        builder = builder.use_protocol(ProtocolVersion::RESP3).push_sender(
            move |push: redis::PushInfo| {
                pushes.deliver(&push);
                Ok::<(), std::convert::Infallible>(())
            },
        );
    }
    // The PEM was checked when the endpoint was made; a failure here could quote it.
    builder.build().map_err(|err| match err.kind() {
        redis::ErrorKind::InvalidClientConfig if tls.is_some() => {
            LockError::invalid_type("tls", "the TLS certificates or key could not be loaded")
        }
        _ => LockError::from(err),
    })
}

/// One cluster connection: it starts connecting to the seed nodes at once, and queues the
/// calls made meanwhile. No response timeout of the crate's: every call has its own bound
/// (`Link::call`).
fn open(client: &ClusterClient) -> ClusterConnection {
    client.get_pending_async_connection_with_config(ClusterConfig::new())
}

#[cfg(test)]
mod tests {
    use super::first_key;

    #[test]
    fn the_routing_key_of_our_commands() {
        let mut script = redis::cmd("EVALSHA");
        script.arg("abc").arg(2).arg("k1").arg("k2").arg("argv");
        assert_eq!(first_key(&script), Some(&b"k1"[..]));
        let mut keyless = redis::cmd("eval");
        keyless.arg("return 1").arg(0).arg("argv");
        assert_eq!(first_key(&keyless), None);
        let mut get = redis::cmd("GET");
        get.arg("k");
        assert_eq!(first_key(&get), Some(&b"k"[..]));
        assert_eq!(first_key(&redis::cmd("PING")), None);
    }
}
