//! Test-only: a server played in a few lines of RESP, as a sentinel or a master answers the
//! commands our connections and lookups send; and a listener that hears nothing.

use crate::core::backend::lock_store::{Listener, LostScope};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server on a port of its own that answers every command of its connections, a while
/// after `delay`: `SENTINEL MASTER` names the master at `names` under `epoch`, ROLE says
/// master, HELLO and the rest are answered as a server would. With its port, the task to
/// abort, and how many times it was asked `SENTINEL`.
pub(super) async fn fake(
    names: u16,
    epoch: u64,
    delay: Duration,
) -> (u16, tokio::task::JoinHandle<()>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    let serving = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut read = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n) = socket.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    read.extend_from_slice(&buf[..n]);
                    while let Some((command, used)) = parsed(&read) {
                        read.drain(..used);
                        if command
                            .first()
                            .is_some_and(|c| c.eq_ignore_ascii_case("SENTINEL"))
                        {
                            counted.fetch_add(1, Ordering::SeqCst);
                        }
                        let reply = answer(&command, names, epoch);
                        tokio::time::sleep(delay).await;
                        if socket.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (port, serving, asked)
}

fn answer(command: &[String], names: u16, epoch: u64) -> String {
    let bulk = |s: &str| format!("${}\r\n{s}\r\n", s.len());
    match command.first().map(|c| c.to_ascii_uppercase()).as_deref() {
        Some("HELLO") => format!("%1\r\n{}:3\r\n", bulk("proto")),
        Some("ROLE") => format!("*3\r\n{}:0\r\n*0\r\n", bulk("master")),
        Some("SENTINEL") => {
            let fields = [
                ("name", "mymaster".to_owned()),
                ("ip", "127.0.0.1".to_owned()),
                ("port", names.to_string()),
                ("flags", "master".to_owned()),
                ("config-epoch", epoch.to_string()),
            ];
            let pairs: String = fields.iter().map(|(k, v)| bulk(k) + &bulk(v)).collect();
            format!("%{}\r\n{pairs}", fields.len())
        }
        _ => "+OK\r\n".to_owned(),
    }
}

/// One command of `read` (an array of bulk strings) and the bytes it took, once whole.
fn parsed(read: &[u8]) -> Option<(Vec<String>, usize)> {
    let line = |from: usize| -> Option<(&[u8], usize)> {
        let end = (from..read.len().saturating_sub(1)).find(|&i| &read[i..i + 2] == b"\r\n")?;
        Some((&read[from..end], end + 2))
    };
    let number = |bytes: &[u8]| std::str::from_utf8(&bytes[1..]).ok()?.parse::<usize>().ok();
    let (head, mut at) = line(0)?;
    let mut command = Vec::new();
    for _ in 0..number(head)? {
        let (len, from) = line(at)?;
        let end = from + number(len)?;
        command.push(String::from_utf8_lossy(read.get(from..end)?).into_owned());
        at = end + 2;
    }
    (at <= read.len()).then_some((command, at))
}

/// A listener for connections whose messages no test reads.
pub(super) struct Deaf;

impl Listener for Deaf {
    fn message(&self, _: &[u8], _: &[u8]) {}
    fn connection_lost(&self, _: LostScope) {}
    fn unsubscribed(&self, _: &[u8]) {}
}
