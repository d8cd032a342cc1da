//! A loopback TCP proxy in front of a redis-server that holds what the client sends for a
//! delay a test can change while connections are open: a slow network, never a dead one.
//! Taken by path, as common/redlock.rs is.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub struct DelayProxy {
    pub port: u16,
    delay_ms: Arc<AtomicU64>,
    accepting: JoinHandle<()>,
}

impl DelayProxy {
    /// A proxy to the redis-server on `upstream`, with no delay yet.
    pub async fn start(upstream: u16) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let delay_ms = Arc::new(AtomicU64::new(0));
        let delay = delay_ms.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await {
                    tokio::spawn(pipe(client, server, delay.clone()));
                }
            }
        });
        DelayProxy {
            port,
            delay_ms,
            accepting,
        }
    }

    /// What the client sends from now on reaches the server `delay` later.
    pub fn set_delay(&self, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.delay_ms.store(ms, Ordering::SeqCst);
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Client to server, each chunk held until its due time (in order); server to client as is.
async fn pipe(client: TcpStream, server: TcpStream, delay: Arc<AtomicU64>) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let (due, mut held) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reading = async move {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n @ 1..) = from_client.read(&mut buf).await {
            let at = Instant::now() + Duration::from_millis(delay.load(Ordering::SeqCst));
            if due.send((at, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    };
    let writing = async move {
        while let Some((at, bytes)) = held.recv().await {
            tokio::time::sleep_until(at).await;
            if to_server.write_all(&bytes).await.is_err() {
                break;
            }
        }
    };
    let back = tokio::io::copy(&mut from_server, &mut to_client);
    tokio::select! {
        _ = async { tokio::join!(reading, writing) } => {}
        _ = back => {}
    }
}
