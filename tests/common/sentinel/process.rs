//! One Sentinel: `redis-server <its config> --sentinel` on a free loopback port, with its
//! config file and its log in a temporary directory of its own (Sentinel rewrites the
//! file as it learns the deployment, so no two Sentinels may share one), killed when
//! dropped. Started like every other server (`server.rs`).

use std::path::Path;
use std::process::Child;

use super::super::server::{on_a_free_port, read_log, spawn_process, INSTALL_HINT};

/// What the Sentinels are told of the master they monitor.
#[derive(Debug, Clone, Copy)]
pub struct Monitor {
    /// The name the master is monitored under (`sentinel monitor <name> ...`).
    pub name: &'static str,
    /// The port of the primary on 127.0.0.1 when the Sentinel starts.
    pub primary_port: u16,
    /// How many Sentinels must agree the primary is down before a failover.
    pub quorum: usize,
    /// `down-after-milliseconds`: how long the primary may not answer before it is
    /// suspected.
    pub down_after_ms: u64,
    /// `failover-timeout`, in ms: bounds each step of a failover, and a failed one is
    /// tried again no sooner than twice this.
    pub failover_timeout_ms: u64,
}

/// A running Sentinel.
#[derive(Debug)]
pub struct SentinelProcess {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl SentinelProcess {
    /// Starts a Sentinel monitoring `monitor`, trying a few free ports in case another
    /// process takes one first; the error has its log, or is [`INSTALL_HINT`].
    pub fn start(monitor: &Monitor) -> Result<Self, String> {
        on_a_free_port(|port, dir| {
            let config = dir.path().join("sentinel.conf");
            std::fs::write(&config, config_text(port, dir.path(), monitor))
                .map_err(|err| format!("cannot write {config:?}: {err}"))?;
            let args = [config.as_os_str(), "--sentinel".as_ref()];
            let child = spawn_process(port, dir.path(), args).map_err(|err| match err {
                hint if hint == INSTALL_HINT => hint,
                err => format!("sentinel: {err}"),
            })?;
            Ok(Self { child, port, dir })
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The Sentinel's log so far, for failure messages.
    pub fn log(&self) -> String {
        read_log(self.dir.path())
    }

    /// Its config file as Sentinel last rewrote it: the replicas and the other
    /// Sentinels it knows, its epochs.
    pub fn config(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sentinel.conf"))
            .unwrap_or_else(|err| format!("(no config: {err})"))
    }
}

/// The config file of a Sentinel on 127.0.0.1:`port` with its files in `dir`. The
/// addresses are IPs, so neither `resolve-hostnames` nor `announce-ip` is needed: the
/// Sentinels announce 127.0.0.1, the address they reach the primary from.
fn config_text(port: u16, dir: &Path, monitor: &Monitor) -> String {
    let Monitor {
        name,
        primary_port,
        quorum,
        down_after_ms,
        failover_timeout_ms,
    } = monitor;
    format!(
        "port {port}\n\
         bind 127.0.0.1\n\
         protected-mode no\n\
         daemonize no\n\
         dir {dir}\n\
         logfile {log}\n\
         sentinel monitor {name} 127.0.0.1 {primary_port} {quorum}\n\
         sentinel down-after-milliseconds {name} {down_after_ms}\n\
         sentinel failover-timeout {name} {failover_timeout_ms}\n\
         sentinel parallel-syncs {name} 2\n",
        dir = dir.display(),
        log = dir.join("redis.log").display(),
    )
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
