//! A `redis-server` started on a free loopback port in a temporary directory, killed
//! when dropped; and the one way the harness starts a `redis-server` process, whatever
//! it is: [`spawn_process`] (a data node's arguments from [`spawn_redis`], which the
//! test cluster's nodes use too; a Sentinel's config file), on a port and in a directory
//! from [`on_a_free_port`] unless the caller has its own. The binary is
//! [`binaries::redis_server`]: `$REDIS_SERVER`, else `redis-server` from `PATH`.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
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

/// What to tell someone who has no `redis-server`.
pub const INSTALL_HINT: &str = "redis-server was not found on PATH (or where \
REDIS_SERVER points). Install Redis (Debian/Ubuntu: `sudo apt-get install \
redis-server`; Fedora: `sudo dnf install redis`; macOS: `brew install redis`), set \
REDIS_SERVER to a redis-server binary, or set REDIS_URL to a server you own.";

/// A running `redis-server` with no persistence, bound to 127.0.0.1 on a free port.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
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
        on_a_free_port(|port, dir| Self::spawn_in(port, dir, extra.clone(), env.to_vec()))
    }

    /// Starts a server on `port`, which the caller picked, in a new temporary directory
    /// (the test cluster's nodes, whose ports come from a range of their own); the
    /// error has the server's log, or is [`INSTALL_HINT`].
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
        let dir = tempfile::tempdir().map_err(|err| format!("no temp dir: {err}"))?;
        let extra = extra.iter().map(|arg| arg.to_string()).collect();
        Self::spawn_in(port, dir, extra, env.to_vec())
    }

    fn spawn_in(
        port: u16,
        dir: tempfile::TempDir,
        extra: Vec<String>,
        env: Vec<(OsString, OsString)>,
    ) -> Result<Self, String> {
        let child = spawn_redis_with_env(port, dir.path(), &extra, &env)?;
        Ok(Self {
            child,
            port,
            dir,
            extra,
            env,
        })
    }

    /// Starts the server again on the same port, directory and arguments after
    /// [`stop`](Self::stop) (or a crash). Without persistence it comes back empty.
    pub fn restart(&mut self) {
        self.stop();
        self.child = spawn_redis_with_env(self.port, self.dir.path(), &self.extra, &self.env)
            .unwrap_or_else(|err| panic!("restart on port {}: {err}", self.port));
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
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
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
/// one port.
pub fn on_a_free_port<T>(
    mut start: impl FnMut(u16, tempfile::TempDir) -> Result<T, String>,
) -> Result<T, String> {
    let mut last = String::new();
    for _ in 0..5 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|err| format!("no free loopback port: {err}"))?
            .port();
        let dir = tempfile::tempdir().map_err(|err| format!("no temp dir: {err}"))?;
        match start(port, dir) {
            Ok(started) => return Ok(started),
            Err(err) if err == INSTALL_HINT => return Err(err),
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
/// and waits until it answers PING there. On failure the process is killed and the
/// error has its log; it is [`INSTALL_HINT`] when there is no `redis-server`.
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
    let binary = binaries::redis_server();
    let mut child = Command::new(&binary)
        .args(args)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| match err.kind() {
            std::io::ErrorKind::NotFound => INSTALL_HINT.to_string(),
            _ => format!("cannot run {binary:?}: {err}"),
        })?;
    wait_ready(&mut child, port).map_err(|why| {
        let _ = child.kill();
        let _ = child.wait();
        format!("redis-server on port {port} {why}:\n{}", read_log(dir))
    })?;
    Ok(child)
}

/// Waits until the server on `port` answers PING; fails at once if `child` exits (its
/// port was taken, say). A Sentinel answers PING too.
pub fn wait_ready(child: &mut Child, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited with {status}"));
        }
        if answers_ping(port) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err("did not answer PING within 10 s".into())
}

/// The log of the server started in `dir` so far, for failure messages.
pub fn read_log(dir: &Path) -> String {
    let path: PathBuf = dir.join("redis.log");
    std::fs::read_to_string(&path).unwrap_or_else(|err| format!("(no log at {path:?}: {err})"))
}

/// Whether a server on 127.0.0.1:`port` answers PING: `+PONG`, or `-NOAUTH` when it
/// wants a password.
pub fn answers_ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && (&reply == b"+PONG\r\n" || reply.starts_with(b"-NOAUTH"))
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
