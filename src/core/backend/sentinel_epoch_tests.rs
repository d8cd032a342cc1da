//! Sentinels behind a failover, played by a few lines of RESP: one names the old master
//! under epoch 1 at once, another the new master under epoch 2 later. Both masters say ROLE
//! master, as the old one does for seconds after a failover. Once epoch 2 was followed, a
//! lookup waits for the sentinel that names it rather than go back to the old master.

use super::Resolver;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// A server on a port of its own that answers every command of its connections, a while
/// after `delay`: `SENTINEL MASTER` names the master at `names` under `epoch`, ROLE says
/// master, HELLO and the rest are answered as a server would.
async fn fake(names: u16, epoch: u64, delay: Duration) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let serving = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
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
    (port, serving)
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

#[tokio::test]
async fn after_a_failover_is_followed_a_sentinel_naming_the_old_master_is_passed_over() {
    let (old_master, a) = fake(0, 0, Duration::ZERO).await;
    let (new_master, b) = fake(0, 0, Duration::ZERO).await;
    let (behind, c) = fake(old_master, 1, Duration::ZERO).await;
    let (ahead, d) = fake(new_master, 2, Duration::from_millis(200)).await;
    let url = format!("redis+sentinel://127.0.0.1:{behind},127.0.0.1:{ahead}/mymaster");
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(url),
        connect_timeout: Some(Duration::from_secs(2)),
        ..EndpointSpec::default()
    })
    .unwrap();
    let resolver = Resolver::new(&endpoint, Arc::default(), Arc::default());
    let master = |resolver: Resolver| async move {
        let found = resolver
            .master(Instant::now() + Duration::from_secs(3))
            .await;
        found
            .unwrap()
            .client(false)
            .unwrap()
            .get_connection_info()
            .addr()
            .to_string()
    };
    // Nothing followed yet: the first answer wins, the old master's.
    assert!(master(resolver.clone())
        .await
        .ends_with(&format!(":{old_master}")));
    // The re-check found the move (epoch 2 followed): the quicker sentinel is behind.
    resolver.inner.followed.follow(2);
    assert!(master(resolver.clone())
        .await
        .ends_with(&format!(":{new_master}")));
    for serving in [a, b, c, d] {
        serving.abort();
    }
}
