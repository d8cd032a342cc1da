//! A loopback TCP proxy in front of a redis-server that a test can move to another server:
//! connections made after `switch` go to the new one, and one whose server side ends (the
//! server died under it) is reset on the client's side, as the kernel resets a connection to
//! a killed process. A server replaced so is up before the client meets the reset, however
//! slowly a loaded machine starts one. Taken by path, as common/delay_proxy.rs is.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct SwitchProxy {
    pub port: u16,
    upstream: Arc<AtomicU16>,
    accepting: JoinHandle<()>,
}

impl SwitchProxy {
    /// A proxy to the redis-server on `upstream`.
    pub async fn start(upstream: u16) -> SwitchProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let upstream = Arc::new(AtomicU16::new(upstream));
        let target = upstream.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let to = target.load(Ordering::SeqCst);
                if let Ok(server) = TcpStream::connect(("127.0.0.1", to)).await {
                    tokio::spawn(pipe(client, server));
                }
            }
        });
        SwitchProxy {
            port,
            upstream,
            accepting,
        }
    }

    /// Connections made from now on go to the redis-server on `upstream`.
    pub fn switch(&self, upstream: u16) {
        self.upstream.store(upstream, Ordering::SeqCst);
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for SwitchProxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Both ways as is; once the server's side ends, the client's is reset (RST, not FIN).
async fn pipe(client: TcpStream, server: TcpStream) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let server_ended = tokio::select! {
        _ = tokio::io::copy(&mut from_client, &mut to_server) => false,
        _ = tokio::io::copy(&mut from_server, &mut to_client) => true,
    };
    if server_ended {
        if let Ok(client) = from_client.reunite(to_client) {
            // Dropped right after: a zero linger makes the close a reset.
            let _ = client.set_zero_linger();
        }
    }
}
