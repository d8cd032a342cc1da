// Each test binary compiles this module on its own and uses only part of it.
#![allow(dead_code)]

//! A private redis-server on a free loopback port, stopped by its pid when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    pub port: u16,
    child: Child,
    extra: Vec<String>,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

fn ready(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0u8; 16];
    stream.write_all(b"PING\r\n").is_ok()
        && stream
            .read(&mut reply)
            .map(|n| reply[..n].starts_with(b"+PONG"))
            .unwrap_or(false)
}

impl RedisServer {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> Self {
        let port = free_port();
        let (child, dir) = Self::spawn(port, extra);
        let server = RedisServer {
            port,
            child,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            _dir: TempDir(dir),
        };
        server.wait_ready();
        server
    }

    /// Stops the server and starts an empty one on the same port.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        let (child, _dir) = Self::spawn(self.port, &extra);
        self.child = child;
        self.wait_ready();
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready(self.port) {
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn spawn(port: u16, extra: &[&str]) -> (Child, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("nrl-rust-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--logfile", ""])
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .expect(
                "redis-server must be installed to run these tests (apt-get install redis-server)",
            );
        (child, dir)
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Drops every client connection but the one asking, as a network blip would.
    pub fn kill_clients(&self) {
        let _: () = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .arg("SKIPME")
            .arg("yes")
            .query(&mut self.raw())
            .expect("CLIENT KILL");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A plain connection for checking what the lock wrote.
    pub fn raw(&self) -> redis::Connection {
        self.raw_checked().expect("raw connection")
    }

    /// `raw`, or why not (a node killed on purpose).
    pub fn raw_checked(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url()).and_then(|c| c.get_connection())
    }
}

/// Calls of `command` that `raw`'s server has run so far.
pub fn calls(raw: &mut redis::Connection, command: &str) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(raw)
        .expect("INFO commandstats");
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The version of `raw`'s server, for tests whose scripts take another way on older ones.
pub fn redis_version(raw: &mut redis::Connection) -> (u32, u32, u32) {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(raw)
        .expect("INFO server");
    let version = info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .expect("redis_version in INFO server");
    let mut parts = version.trim().split('.').map(|n| n.parse().unwrap_or(0));
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A command's arguments as `memory_command` takes them.
pub fn args_of(cmd: &redis::Cmd) -> Vec<&[u8]> {
    cmd.args_iter()
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) => bytes,
            // A cursor command's cursor; no command of ours uses one.
            _ => b"0".as_slice(),
        })
        .collect()
}

/// Waits up to `bound` for `done`, polling every 5 ms.
pub async fn within(bound: Duration, done: impl Fn() -> bool) -> bool {
    let until = Instant::now() + bound;
    while Instant::now() < until {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    done()
}
