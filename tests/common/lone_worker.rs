//! One `examples/fault_worker.rs` process started by a test on its own, without the
//! fleet's proxies and referee: a lock holder or waiter in another process, which the
//! test can SIGKILL. Its events are collected into a [`Log`].

use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, ChildStdin, Command};

use super::crew::launch;
use super::events::{Event, Log};
use super::worker_bin;

/// How long a worker may take to start or to report an event.
pub const WAIT: Duration = Duration::from_secs(10);

/// A running `fault_worker`, killed when dropped.
#[derive(Debug)]
pub struct LoneWorker {
    pub name: String,
    pub log: Log,
    child: Child,
    /// Kept open: the worker stops when it closes.
    _stdin: Option<ChildStdin>,
}

impl LoneWorker {
    /// Starts worker `name` with the `FW_*` variables in `env` (see
    /// `examples/fault_worker.rs`) and waits for its `START`. Building the worker first,
    /// if needed, blocks a thread of its own, not the runtime: guards held meanwhile keep
    /// refreshing.
    pub async fn spawn(name: &str, env: &[(&str, &str)]) -> LoneWorker {
        let path = tokio::task::spawn_blocking(worker_bin::path)
            .await
            .expect("build the fault worker");
        let mut command = Command::new(path);
        command
            .env("FW_NAME", name)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let log = Log::default();
        let (child, _, stdin) = launch(command, name, &log).await;
        LoneWorker {
            name: name.to_string(),
            log,
            child,
            _stdin: stdin,
        }
    }

    /// The first event of `kind`, waiting up to [`WAIT`] for it.
    pub async fn wait_for(&self, kind: &str) -> Event {
        self.log
            .wait_for(WAIT, |event| event.is(kind))
            .await
            .unwrap_or_else(|| panic!("worker {} printed no {kind}", self.name))
    }

    /// Kills the worker with SIGKILL and waits for it to exit: nothing it had not yet
    /// sent reaches Redis, and no clean-up runs.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("SIGKILL the worker");
    }
}
