//! The lock `redis-server` of a [`Netns`](super::netns::Netns) deployment, run inside
//! the server's namespace (`ip netns exec <ns> redis-server ...`): it listens on
//! [`PORT`] on every address of that namespace (the server's ends of the veth pairs,
//! made later as workers come) and on a Unix socket, which crosses namespaces, for the
//! test in the root namespace. Killed when dropped.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use redis::aio::MultiplexedConnection;

use crate::common::binaries;
use crate::common::server::read_log;

/// The server's TCP port inside its namespace, where nothing else listens.
pub const PORT: u16 = 7400;

/// A `redis-server` with no persistence in a network namespace.
#[derive(Debug)]
pub struct NetnsServer {
    child: Child,
    ns: String,
    /// Its files, its log (`redis.log`) and its socket (`lock.sock`).
    dir: tempfile::TempDir,
}

impl NetnsServer {
    /// Starts the server in namespace `ns` and waits until it answers PING on its
    /// socket; panics with its log if it does not within 10 s.
    pub fn start(ns: &str) -> NetnsServer {
        let dir = tempfile::tempdir().expect("a temp dir");
        let child = spawn(ns, &dir);
        NetnsServer {
            child,
            ns: ns.to_string(),
            dir,
        }
    }

    /// The path of the server's Unix socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("lock.sock")
    }

    /// `unix://<socket>`: how the root namespace reaches the server.
    pub fn unix_url(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// `redis://<addr>:<PORT>/`: how a worker reaches the server over its link.
    pub fn tcp_url(&self, addr: &str) -> String {
        format!("redis://{addr}:{PORT}/")
    }

    /// A client of the server over its socket.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.unix_url()).expect("a valid unix URL")
    }

    /// A new multiplexed connection over the socket.
    pub async fn conn(&self) -> MultiplexedConnection {
        self.client()
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|err| panic!("connect to {}: {err}\n{}", self.unix_url(), self.log()))
    }

    /// Freezes the server with SIGSTOP.
    pub fn pause(&self) {
        self.signal(Signal::SIGSTOP);
    }

    /// Thaws a server frozen by [`pause`](Self::pause).
    pub fn resume(&self) {
        self.signal(Signal::SIGCONT);
    }

    /// Kills the server (SIGKILL) and waits for it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again, empty, in the same namespace and directory.
    pub fn restart(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(self.socket());
        self.child = spawn(&self.ns, &self.dir);
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        read_log(self.dir.path())
    }

    fn signal(&self, signal: Signal) {
        // `ip netns exec` execs the server: the child's pid is the server's.
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits i32"));
        kill(pid, signal).unwrap_or_else(|err| panic!("{signal} redis-server: {err}"));
    }
}

impl Drop for NetnsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts `redis-server` in namespace `ns` with its files in `dir`, and waits for it.
fn spawn(ns: &str, dir: &tempfile::TempDir) -> Child {
    let (path, socket) = (dir.path(), dir.path().join("lock.sock"));
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(binaries::redis_server())
        .args(["--port", &PORT.to_string(), "--bind", "0.0.0.0"])
        .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        .arg("--dir")
        .arg(path)
        .arg("--logfile")
        .arg(path.join("redis.log"))
        .arg("--unixsocket")
        .arg(&socket)
        .args(["--unixsocketperm", "700"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run `ip netns exec {ns} redis-server`: {err}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !answers_ping(&socket) {
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "redis-server in {ns} did not start ({exited:?}):\n{}",
                read_log(path)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// Whether a server answers PING on Unix socket `socket`.
fn answers_ping(socket: &std::path::Path) -> bool {
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}
