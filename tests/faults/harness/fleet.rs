//! What every fleet of fault workers is, whatever its workers lock on (one server, a
//! quorum, a Redis Cluster, a primary under Sentinel): a [`Crew`] of worker processes
//! (`examples/fault_worker.rs`) with the referee, the deployment they lock on, and one
//! [`finish`](Fleet::finish) that stops the workers and reads everything into a
//! [`Report`]. The fleets differ in how a worker reaches the deployment
//! ([`spawn`](Fleet::spawn)) and in where the keys live ([`keys_left`](Fleet::keys_left)).
//! [`Spec`] is how one worker runs.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::guarded::Guarded;
use super::report::Report;
use crate::common::crew::Crew;
use crate::common::record::HeldLock;
use crate::common::worker_bin;

/// How one worker runs; see the variables in `examples/fault_worker.rs`.
#[derive(Debug, Clone)]
pub struct Spec {
    pub keys: u64,
    pub read_pct: u64,
    pub work_ms: (u64, u64),
    pub hold_ms: Option<u64>,
    pub intent: bool,
    /// `FW_MARGIN_MS`: a section acts only with this much validity left, in ms.
    pub margin_ms: u64,
    /// `FW_FIRST_KEY`: the worker's keys are `k<first_key>` .. `k<first_key + keys - 1>`.
    pub first_key: u64,
    /// `FW_EXEC`: writers also update a data counter on the lock server through `exec`.
    pub exec: bool,
    /// `FW_NOTIFY`: wait by release notifications; `false`: poll (every 50 ms at most),
    /// which also finds a lock key deleted without a release message.
    pub notify: bool,
    /// `FW_SET`: each section takes a set of 2 to this many keys with `lock_all` (0:
    /// single keys).
    pub set: u64,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            keys: 1,
            read_pct: 0,
            work_ms: (10, 40),
            hold_ms: None,
            intent: false,
            margin_ms: 0,
            first_key: 0,
            exec: false,
            notify: true,
            set: 0,
        }
    }
}

/// A deployment and the crew of workers locking on it.
#[allow(async_fn_in_trait)]
pub trait Fleet {
    /// The workers, their events, the referee and the faults so far.
    fn crew(&self) -> &Crew;
    fn crew_mut(&mut self) -> &mut Crew;
    /// The workers' TTL, in ms.
    fn ttl_ms(&self) -> u64;

    /// Starts worker `name` with `spec` on the deployment (see [`worker_command`]), and a
    /// task that logs its events.
    async fn spawn(&mut self, name: &str, spec: &Spec);

    /// The keys left on the deployment but fence counters and the data counters of
    /// `FW_EXEC`, each prefixed by where it lives when there is more than one place.
    async fn keys_left(&self) -> Vec<String>;

    /// The data counters of workers run with `FW_EXEC` (`<lock key>:data`), as (lock
    /// key, value); none on a deployment where `exec` is not used (a quorum).
    async fn data_counters(&self) -> Vec<(String, i64)> {
        Vec::new()
    }

    /// Locks seen held right as a fault started, with their server expiry, for the
    /// report's fire lead; none unless the fleet notes them.
    fn noted_held(&self) -> &[HeldLock] {
        &[]
    }

    /// Every event and fault, one a line in time order (see [`Crew::dump`]).
    fn dump(&self) -> String {
        self.crew().dump()
    }

    /// Stops the workers (stdin closed; SIGKILL after 10 s), waits a TTL, and reads
    /// everything into the report, the data counters of `FW_EXEC` with it, which it
    /// prints (with every event and fault when `FAULTS_DUMP` is set).
    async fn finish(&mut self, label: &str) -> Report {
        self.crew_mut().stop_all().await;
        tokio::time::sleep(Duration::from_millis(self.ttl_ms() + 300)).await;
        let keys_left = self.keys_left().await;
        let counters = self.data_counters().await;
        let crew = self.crew();
        let referee = crew.referee.report().await.expect("read the referee");
        let mut report = Report::build(
            label,
            &crew.log,
            &crew.faults,
            self.noted_held(),
            self.ttl_ms(),
            referee,
            crew.secs(),
        );
        report.keys_left = keys_left;
        report.guarded = Guarded::build(&crew.log.all(), &crew.faults, self.ttl_ms(), &counters);
        if std::env::var_os("FAULTS_DUMP").is_some() {
            println!("{}", self.dump());
        }
        println!("{report}");
        report
    }
}

/// The data counters among `keys` (those ending in `:data`) of the server `conn` reaches,
/// as (lock key, value).
pub async fn read_data_counters<C>(conn: &C, keys: &[String]) -> Vec<(String, i64)>
where
    C: redis::aio::ConnectionLike + Clone,
{
    let mut counters = Vec::new();
    for key in keys {
        let Some(lock) = key.strip_suffix(":data") else {
            continue;
        };
        let value: Option<i64> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut conn.clone())
            .await
            .expect("GET a data counter");
        counters.push((lock.to_string(), value.unwrap_or(0)));
    }
    counters
}

/// Whether `key` is a key the workers leave on purpose: a fence counter, a quorum node's
/// granted token (`<key>:fence-granted`), or a data counter of `FW_EXEC`.
pub fn kept(key: &str) -> bool {
    key.ends_with(":fence") || key.ends_with(":fence-granted") || key.ends_with(":data")
}

/// The command that starts `examples/fault_worker.rs` as worker `name` with `spec`, a
/// TTL of `ttl_ms` and mutex `mutex`; the fleet adds how to reach the deployment
/// (`FW_LOCK_URL`, ...), the crew the referee's URL.
pub fn worker_command(name: &str, spec: &Spec, ttl_ms: u64, mutex: &str) -> Command {
    worker_command_in(&[], name, spec, ttl_ms, mutex)
}

/// [`worker_command`] run through `prefix` (`["ip", "netns", "exec", <ns>]`, say): the
/// prefix's first word is the program, its other words and then the worker's binary
/// its arguments; none: the worker's binary itself.
pub fn worker_command_in(
    prefix: &[&str],
    name: &str,
    spec: &Spec,
    ttl_ms: u64,
    mutex: &str,
) -> Command {
    let mut command = match prefix.split_first() {
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args).arg(worker_bin::path());
            command
        }
        None => Command::new(worker_bin::path()),
    };
    command
        .env("FW_NAME", name)
        .env("FW_MUTEX", mutex)
        .env("FW_KEYS", spec.keys.to_string())
        .env("FW_TTL_MS", ttl_ms.to_string())
        .env("FW_READ_PCT", spec.read_pct.to_string())
        .env("FW_WORK_MIN_MS", spec.work_ms.0.to_string())
        .env("FW_WORK_MAX_MS", spec.work_ms.1.to_string())
        .env("FW_INTENT", if spec.intent { "1" } else { "0" })
        .env("FW_MARGIN_MS", spec.margin_ms.to_string())
        .env("FW_FIRST_KEY", spec.first_key.to_string())
        .env("FW_EXEC", if spec.exec { "1" } else { "0" })
        .env("FW_NOTIFY", if spec.notify { "1" } else { "0" })
        .env("FW_SET", spec.set.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if let Some(hold) = spec.hold_ms {
        command.env("FW_HOLD_MS", hold.to_string());
    }
    command
}

/// The keys on the one lock server behind `conn` that the workers should not have left:
/// all but fence, granted and data counters ([`kept`]).
pub async fn keys_left_on(conn: &redis::aio::MultiplexedConnection) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn.clone())
        .await
        .expect("KEYS");
    keys.into_iter().filter(|k| !kept(k)).collect()
}

/// The data counters (`*:data`) on the one lock server behind `conn`.
pub async fn data_counters_on(conn: &redis::aio::MultiplexedConnection) -> Vec<(String, i64)> {
    let keys: Vec<String> = crate::common::raw::cmd(conn, "KEYS", &["*:data"]).await;
    read_data_counters(conn, &keys).await
}
