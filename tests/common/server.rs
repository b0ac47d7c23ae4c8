//! A `redis-server` started on a free loopback port in a temporary directory, killed
//! when dropped; and the one way the harness starts a `redis-server` process, whatever
//! it is: [`spawn_process`] (a data node's arguments from [`spawn_redis`], which the
//! test cluster's nodes use too; a Sentinel's config file), on a port and in a directory
//! from [`on_a_free_port`] unless the caller has its own. The binary is
//! [`binaries::redis_server`]: `$REDIS_SERVER`, else `redis-server` from `PATH`.
//!
//! Test binaries run side by side, each starting servers on ports they did not agree on,
//! so two guards keep a test on its own server: a [`RedisServer`] claims its port for its
//! whole life ([`port_claim`]), restarts included, and no server is started on a port
//! another claims; and a server is ready only when the one answering on its port is the
//! process just started ([`wait_ready`]), not another's that got there first.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use redis::aio::{ConnectionManager, MultiplexedConnection};

// Here rather than in `mod.rs` so that the benches and examples, which include this file
// alone, start the same binary.
#[path = "binaries.rs"]
pub mod binaries;
#[path = "port_claim.rs"]
pub mod port_claim;

use port_claim::PortClaim;

/// What to tell someone who has no `redis-server`.
pub const INSTALL_HINT: &str = "redis-server was not found on PATH (or where \
REDIS_SERVER points). Install Redis (Debian/Ubuntu: `sudo apt-get install \
redis-server`; Fedora: `sudo dnf install redis`; macOS: `brew install redis`), set \
REDIS_SERVER to a redis-server binary, or set REDIS_URL to a server you own.";

/// A running `redis-server` with no persistence, bound to 127.0.0.1 on a free port,
/// which it claims until dropped.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    /// Its port, claimed also while the server is stopped, so that it can restart there.
    claim: PortClaim,
    dir: tempfile::TempDir,
    extra: Vec<String>,
    /// Variables set for the process besides the test's own (a clock shim's, say).
    env: Vec<(OsString, OsString)>,
}

impl RedisServer {
    /// Starts a server; panics with the server log (or [`INSTALL_HINT`]) on failure.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments, for example
    /// `["--requirepass", "secret"]` or `["--replicaof", "127.0.0.1", "6380"]`.
    pub fn start_with(extra: &[&str]) -> Self {
        Self::try_start_with(extra).unwrap_or_else(|err| panic!("{err}"))
    }

    /// Starts a server, trying a few free ports in case another process takes one first.
    pub fn try_start() -> Result<Self, String> {
        Self::try_start_with(&[])
    }

    fn try_start_with(extra: &[&str]) -> Result<Self, String> {
        Self::try_start_with_env(extra, &[])
    }

    /// Starts a server like [`start_with`](Self::start_with), with the variables `env`
    /// set for its process (and again at each restart).
    pub fn try_start_with_env(
        extra: &[&str],
        env: &[(OsString, OsString)],
    ) -> Result<Self, String> {
        let extra: Vec<String> = extra.iter().map(|arg| arg.to_string()).collect();
        on_a_claimed_port(|claim, dir| Self::spawn_in(claim, dir, extra.clone(), env.to_vec()))
    }

    /// Starts a server on `port`, which the caller picked, in a new temporary directory
    /// (the test cluster's nodes, whose ports come from a range of their own); the
    /// error has the server's log, or is [`INSTALL_HINT`], or says another process
    /// claims the port.
    pub fn try_start_on(port: u16, extra: &[&str]) -> Result<Self, String> {
        Self::try_start_on_with_env(port, extra, &[])
    }

    /// [`try_start_on`](Self::try_start_on) with the variables `env` set for the
    /// server's process (and again at each restart): a cluster node on a clock of its
    /// own, say.
    pub fn try_start_on_with_env(
        port: u16,
        extra: &[&str],
        env: &[(OsString, OsString)],
    ) -> Result<Self, String> {
        let claim = PortClaim::take(port)?;
        let dir = tempfile::tempdir().map_err(|err| format!("no temp dir: {err}"))?;
        let extra = extra.iter().map(|arg| arg.to_string()).collect();
        Self::spawn_in(claim, dir, extra, env.to_vec())
    }

    fn spawn_in(
        claim: PortClaim,
        dir: tempfile::TempDir,
        extra: Vec<String>,
        env: Vec<(OsString, OsString)>,
    ) -> Result<Self, String> {
        let child = spawn_redis_with_env(claim.port(), dir.path(), &extra, &env)?;
        Ok(Self {
            child,
            claim,
            dir,
            extra,
            env,
        })
    }

    /// Starts the server again on the same port, directory and arguments after
    /// [`stop`](Self::stop) (or a crash). Without persistence it comes back empty. The
    /// port stayed claimed meanwhile, so no other test's server took it.
    pub fn restart(&mut self) {
        self.stop();
        let port = self.port();
        self.child = spawn_redis_with_env(port, self.dir.path(), &self.extra, &self.env)
            .unwrap_or_else(|err| panic!("restart on port {port}: {err}"));
    }

    /// Starts the server again like [`restart`](Self::restart), with `extra` in place of
    /// its extra arguments from now on: a node of a replicated deployment comes back as a
    /// replica of whichever node is the primary now, say.
    pub fn restart_with(&mut self, extra: &[&str]) {
        self.extra = extra.iter().map(|arg| arg.to_string()).collect();
        self.restart();
    }

    /// The directory of the server's files (its log, and its append-only files when
    /// started with `--appendonly yes`); it lives as long as the server.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Deletes the server's append-only files (stop it first), so that it restarts empty:
    /// the folder `appendonlydir` from Redis 7.0 (multi-part AOF), the file
    /// `appendonly.aof` before.
    pub fn remove_aof(&self) {
        let removed = if binaries::server_version().at_least(7, 0) {
            std::fs::remove_dir_all(self.dir().join("appendonlydir"))
        } else {
            std::fs::remove_file(self.dir().join("appendonly.aof"))
        };
        removed.unwrap_or_else(|err| panic!("remove the AOF in {:?}: {err}", self.dir()));
    }

    /// The server's process id, for signals.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `redis://127.0.0.1:<port>/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port())
    }

    pub fn port(&self) -> u16 {
        self.claim.port()
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid url")
    }

    /// A new multiplexed connection with redis-rs's default timeouts.
    pub async fn conn(&self) -> MultiplexedConnection {
        self.client()
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|err| panic!("connect to {}: {err}\n{}", self.url(), self.log()))
    }

    /// A new connection manager (reconnects by itself) with redis-rs's default timeouts.
    pub async fn manager(&self) -> ConnectionManager {
        ConnectionManager::new(self.client())
            .await
            .unwrap_or_else(|err| panic!("connect to {}: {err}\n{}", self.url(), self.log()))
    }

    /// Freezes the server with SIGSTOP: connections stay open, nothing is answered.
    pub fn pause(&self) {
        self.signal(Signal::SIGSTOP);
    }

    /// Thaws a server frozen by [`pause`](Self::pause).
    pub fn resume(&self) {
        self.signal(Signal::SIGCONT);
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits i32"));
        kill(pid, signal).unwrap_or_else(|err| panic!("{signal} redis-server: {err}"));
    }

    /// Kills the server with SIGKILL and waits for it to exit.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The server's log so far, for failure messages.
    pub fn log(&self) -> String {
        read_log(self.dir.path())
    }
}

/// Calls `start` with a free loopback port and a new temporary directory, up to five
/// times in case another process takes the port first; its first success, or its last
/// error ([`INSTALL_HINT`] at once). For a server, a Sentinel, anything that listens on
/// one port. The port is claimed ([`port_claim`]) until `start` returns; what may stop
/// and start again on its port keeps the claim with [`on_a_claimed_port`].
pub fn on_a_free_port<T>(
    mut start: impl FnMut(u16, tempfile::TempDir) -> Result<T, String>,
) -> Result<T, String> {
    on_a_claimed_port(|claim, dir| start(claim.port(), dir))
}

/// [`on_a_free_port`], handing `start` the port's claim to keep: a [`RedisServer`] holds
/// it until dropped, so that no other process starts a server there while it restarts.
pub fn on_a_claimed_port<T>(
    mut start: impl FnMut(PortClaim, tempfile::TempDir) -> Result<T, String>,
) -> Result<T, String> {
    let mut last = String::new();
    for _ in 0..5 {
        let claim = free_port()?;
        let dir = tempfile::tempdir().map_err(|err| format!("no temp dir: {err}"))?;
        match start(claim, dir) {
            Ok(started) => return Ok(started),
            Err(err) if err == INSTALL_HINT => return Err(err),
            Err(err) => last = err,
        }
    }
    Err(last)
}

/// A loopback port free now (a port-0 bind's) that no other process claims, claimed:
/// the port of a server stopped for a restart is free to the OS, not to the tests.
fn free_port() -> Result<PortClaim, String> {
    let mut last = String::new();
    for _ in 0..20 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|err| format!("no free loopback port: {err}"))?
            .port();
        match PortClaim::take(port) {
            Ok(claim) => return Ok(claim),
            Err(err) => last = err,
        }
    }
    Err(last)
}

/// Starts `redis-server` on 127.0.0.1:`port` without persistence, its files and its log
/// (`redis.log`) in `dir`, with the `extra` arguments after the others (see
/// [`spawn_process`]). Used by [`RedisServer`] and by the nodes of the test cluster.
pub fn spawn_redis<I, S>(port: u16, dir: &Path, extra: I) -> Result<Child, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    spawn_redis_with_env(port, dir, extra, &[])
}

/// [`spawn_redis`] with the variables `env` set for the process.
pub fn spawn_redis_with_env<I, S>(
    port: u16,
    dir: &Path,
    extra: I,
    env: &[(OsString, OsString)],
) -> Result<Child, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let port_arg = port.to_string();
    let log = dir.join("redis.log");
    let mut args: Vec<&OsStr> = vec![
        "--port".as_ref(),
        port_arg.as_ref(),
        "--bind".as_ref(),
        "127.0.0.1".as_ref(),
    ];
    args.extend(["--save", "", "--appendonly", "no", "--protected-mode", "no"].map(OsStr::new));
    args.extend([
        "--dir".as_ref(),
        dir.as_os_str(),
        "--logfile".as_ref(),
        log.as_ref(),
    ]);
    let extra: Vec<S> = extra.into_iter().collect();
    args.extend(extra.iter().map(AsRef::as_ref));
    spawn_process_with_env(port, dir, args, env)
}

/// Starts `redis-server args...` (a data node or, with a config file and `--sentinel`,
/// a Sentinel), whose log goes to `dir/redis.log` and which listens on 127.0.0.1:`port`,
/// and waits until it answers PING there ([`wait_ready`], with the `--requirepass` of
/// `args` if any). On failure the process is killed and the error has its log; it is
/// [`INSTALL_HINT`] when there is no `redis-server`.
pub fn spawn_process<I, S>(port: u16, dir: &Path, args: I) -> Result<Child, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    spawn_process_with_env(port, dir, args, &[])
}

/// [`spawn_process`] with the variables `env` set for the process.
pub fn spawn_process_with_env<I, S>(
    port: u16,
    dir: &Path,
    args: I,
    env: &[(OsString, OsString)],
) -> Result<Child, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<S> = args.into_iter().collect();
    let password = args
        .windows(2)
        .find(|pair| pair[0].as_ref() == "--requirepass")
        .and_then(|pair| pair[1].as_ref().to_str().map(String::from));
    let binary = binaries::redis_server();
    let mut child = Command::new(&binary)
        .args(&args)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| match err.kind() {
            std::io::ErrorKind::NotFound => INSTALL_HINT.to_string(),
            _ => format!("cannot run {binary:?}: {err}"),
        })?;
    wait_ready(&mut child, port, password.as_deref()).map_err(|why| {
        let _ = child.kill();
        let _ = child.wait();
        format!("redis-server on port {port} {why}:\n{}", read_log(dir))
    })?;
    Ok(child)
}

/// Waits until `child`, started to listen on `port`, answers PING there; fails at once
/// if it exits (its port was taken, say). The server answering must be `child` itself,
/// by the `process_id` of its `INFO server` (a Sentinel's too): another process's server
/// on the port (one that took it while `child` was starting, or stopped for a restart)
/// answers as readily, and a test must never talk to it. A server started with
/// `--requirepass` is sent `password` first; without it, one answering `-NOAUTH` is taken
/// for `child` when `child` still runs after it answered.
pub fn wait_ready(child: &mut Child, port: u16, password: Option<&str>) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut other = String::new();
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited with {status}{other}"));
        }
        match probe(port, password) {
            Some(Answer::Pid(pid)) if pid == child.id() => return Ok(()),
            Some(Answer::Locked) if password.is_none() && matches!(child.try_wait(), Ok(None)) => {
                return Ok(())
            }
            Some(Answer::Pid(pid)) => {
                other = format!(" (process {pid} answers on the port: another took it)")
            }
            Some(Answer::Locked) => {
                other = " (a server wanting a password it was not sent answers on the port)".into()
            }
            None => {}
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(format!("did not answer PING within 10 s{other}"))
}

/// The log of the server started in `dir` so far, for failure messages.
pub fn read_log(dir: &Path) -> String {
    let path: PathBuf = dir.join("redis.log");
    std::fs::read_to_string(&path).unwrap_or_else(|err| format!("(no log at {path:?}: {err})"))
}

/// What a server answering PING says of itself.
enum Answer {
    /// `+PONG`, and `process_id:<pid>` in its `INFO server`.
    Pid(u32),
    /// `-NOAUTH`: it wants a password it was not sent.
    Locked,
}

/// Asks the server on 127.0.0.1:`port`, on one connection (after `AUTH password` when
/// given), PING and then `INFO server`; `None` while nothing answers `+PONG` (nothing
/// listens, or it is still loading its data).
fn probe(port: u16, password: Option<&str>) -> Option<Answer> {
    let stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    let mut replies = BufReader::new(&stream);
    if let Some(password) = password {
        // Whatever it answers: a server with no password still answers PING.
        request(&stream, &mut replies, &["AUTH", password])?;
    }
    let pong = request(&stream, &mut replies, &["PING"])?;
    if pong.starts_with("-NOAUTH") {
        return Some(Answer::Locked);
    }
    if pong != "+PONG\r\n" {
        return None;
    }
    let head = request(&stream, &mut replies, &["INFO", "server"])?;
    let len: usize = head.strip_prefix('$')?.trim_end().parse().ok()?;
    let mut info = vec![0u8; len];
    replies.read_exact(&mut info).ok()?;
    let info = String::from_utf8_lossy(&info);
    let pid = info
        .lines()
        .find_map(|line| line.strip_prefix("process_id:"))?;
    pid.trim().parse().ok().map(Answer::Pid)
}

/// Sends `args` as one command and reads the first line of its reply.
fn request(mut stream: &TcpStream, replies: &mut impl BufRead, args: &[&str]) -> Option<String> {
    let mut command = format!("*{}\r\n", args.len());
    for arg in args {
        command.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(command.as_bytes()).ok()?;
    let mut line = String::new();
    (replies.read_line(&mut line).ok()? > 0).then_some(line)
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
