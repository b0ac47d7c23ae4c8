//! The orchestrator of the fault tests: a lock server, a referee server, and worker
//! processes (`examples/fault_worker.rs`), each behind its own [`Proxy`]; it collects
//! the workers' events, notes who holds which lock, and stops everything into a
//! [`Report`]. The faults it injects are in `inject.rs`.

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use redis::aio::MultiplexedConnection;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use super::events::{now_us, Event, Log};
use super::proxy::Proxy;
use super::record::{FaultRecord, HeldLock};
use super::referee::Referee;
use super::report::Report;
use super::{worker_bin, RedisServer};

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
        }
    }
}

/// A worker process and its proxy.
#[derive(Debug)]
pub struct Worker {
    pub name: String,
    pub proxy: Proxy,
    pub pid: i32,
    pub(super) child: Child,
    stdin: Option<ChildStdin>,
    pub alive: bool,
}

/// Servers, workers, the event log and the faults injected so far.
#[derive(Debug)]
pub struct Fleet {
    pub lock: RedisServer,
    pub referee_server: RedisServer,
    pub referee: Referee,
    pub log: Log,
    pub workers: Vec<Worker>,
    pub faults: Vec<FaultRecord>,
    /// Locks seen held right as a fault started, with their server expiry.
    pub held: Vec<HeldLock>,
    pub ttl_ms: u64,
    pub mutex: String,
    /// How many lock keys the workers use at most.
    pub keys: u64,
    pub started_us: u64,
}

impl Fleet {
    /// The names of the workers spawned so far.
    pub fn names(&self) -> Vec<String> {
        self.workers.iter().map(|w| w.name.clone()).collect()
    }

    /// Starts the two servers; no workers yet.
    pub async fn start(ttl_ms: u64) -> Fleet {
        let lock = RedisServer::start();
        let referee_server = RedisServer::start();
        let referee = Referee::connect(&referee_server.url())
            .await
            .expect("connect to the referee");
        Fleet {
            lock,
            referee_server,
            referee,
            log: Log::default(),
            workers: Vec::new(),
            faults: Vec::new(),
            held: Vec::new(),
            ttl_ms,
            mutex: "faults".to_string(),
            keys: 1,
            started_us: now_us(),
        }
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// Starts worker `name` behind a new proxy, and a task that logs its events.
    pub async fn spawn(&mut self, name: &str, spec: &Spec) {
        self.keys = self.keys.max(spec.first_key + spec.keys);
        let proxy = Proxy::start(self.lock.port()).await;
        let mut command = worker_command(name, spec, self.ttl_ms, &self.mutex);
        command
            .env("FW_LOCK_URL", proxy.url())
            .env("FW_REFEREE_URL", self.referee_server.url());
        let (child, pid, stdin) = launch(command, name, &self.log).await;
        self.workers.push(Worker {
            name: name.to_string(),
            proxy,
            pid,
            child,
            stdin,
            alive: true,
        });
    }

    pub fn worker(&self, name: &str) -> &Worker {
        self.workers
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no worker {name}"))
    }

    /// A direct connection to the lock server.
    pub async fn lock_conn(&self) -> MultiplexedConnection {
        self.lock.conn().await
    }

    /// Reads who holds each lock key and when the key expires on the server, keeping
    /// only the locks of `worker` if given, and notes them for the report's fire lead.
    pub async fn note_held(&mut self, worker: Option<&str>) -> Vec<HeldLock> {
        let mut held = HeldLock::read(&self.lock_conn().await, &self.mutex, self.keys).await;
        if let Some(worker) = worker {
            held.retain(|h| self.acquired(&h.id).is_some_and(|e| e.worker == worker));
        }
        self.held.extend(held.iter().cloned());
        held
    }

    /// The ACQUIRED event of the guard with lock id `id`.
    pub fn acquired(&self, id: &str) -> Option<Event> {
        self.log
            .filter(|e| e.is("ACQUIRED") && e.id() == id)
            .into_iter()
            .next()
    }

    /// Closes every live worker's stdin, so it stops after its current section, and
    /// waits for it to exit (SIGKILL after 10 s).
    pub async fn stop_all(&mut self) {
        for worker in &mut self.workers {
            worker.stdin = None;
        }
        for worker in &mut self.workers {
            if !worker.alive {
                continue;
            }
            // A frozen worker cannot stop.
            signal(worker.pid, Signal::SIGCONT);
            let waited = tokio::time::timeout(Duration::from_secs(10), worker.child.wait()).await;
            if waited.is_err() {
                eprintln!("{} did not stop; killing it", worker.name);
                let _ = worker.child.kill().await;
            }
            worker.alive = false;
        }
    }

    /// The lock server's keys other than fence counters.
    pub async fn keys_left(&self) -> Vec<String> {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut self.lock_conn().await)
            .await
            .expect("KEYS");
        keys.into_iter()
            .filter(|k| !k.ends_with(":fence"))
            .collect()
    }
}

impl Fleet {
    /// Stops the workers, waits a TTL, and reads everything into the report, which it
    /// prints.
    pub async fn finish(&mut self, label: &str) -> Report {
        self.stop_all().await;
        tokio::time::sleep(self.ttl() + Duration::from_millis(300)).await;
        let keys_left = self.keys_left().await;
        let referee = self.referee.report().await.expect("read the referee");
        let secs = (now_us() - self.started_us) as f64 / 1e6;
        let mut report = Report::build(
            label,
            &self.log,
            &self.faults,
            &self.held,
            self.ttl_ms,
            referee,
            secs,
        );
        report.keys_left = keys_left;
        if std::env::var_os("FAULTS_DUMP").is_some() {
            for event in self.log.all() {
                let ms = event.us.saturating_sub(self.started_us) as f64 / 1000.0;
                println!(
                    "{ms:>9.1} {} {} {:?}",
                    event.worker, event.kind, event.fields
                );
            }
            for fault in &self.faults {
                let ms = |us: u64| us.saturating_sub(self.started_us) as f64 / 1000.0;
                println!(
                    "fault {:?} {:?} {:.1}..{:.1}",
                    fault.kind,
                    fault.target,
                    ms(fault.start_us),
                    ms(fault.end_us)
                );
            }
        }
        println!("{report}");
        report
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            let _ = worker.child.start_kill();
        }
    }
}

/// The command that starts `examples/fault_worker.rs` as worker `name` with `spec`, a
/// TTL of `ttl_ms` and mutex `mutex`; the caller adds `FW_LOCK_URL` and `FW_REFEREE_URL`.
pub(crate) fn worker_command(name: &str, spec: &Spec, ttl_ms: u64, mutex: &str) -> Command {
    let mut command = Command::new(worker_bin::path());
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
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if let Some(hold) = spec.hold_ms {
        command.env("FW_HOLD_MS", hold.to_string());
    }
    command
}

/// Spawns `command` as worker `name`, with a task that parses its events into `log`,
/// and waits for its `START`: the child, its pid and its stdin (closing it stops the
/// worker).
pub(crate) async fn launch(
    mut command: Command,
    name: &str,
    log: &Log,
) -> (Child, i32, Option<ChildStdin>) {
    let mut child = command.spawn().expect("spawn the fault worker");
    let pid = i32::try_from(child.id().expect("a pid")).expect("pid fits i32");
    let stdout = child.stdout.take().expect("piped stdout");
    let (events, worker) = (log.clone(), name.to_string());
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match Event::parse(&worker, &line) {
                Some(event) => events.push(event),
                None => eprintln!("{worker}: {line}"),
            }
        }
    });
    let stdin = child.stdin.take();
    let started = log
        .wait_for(Duration::from_secs(10), |e| {
            e.worker == name && e.is("START")
        })
        .await;
    assert!(started.is_some(), "worker {name} did not start");
    (child, pid, stdin)
}

/// Sends `signal` to process `pid`.
pub(super) fn signal(pid: i32, signal: Signal) {
    kill(Pid::from_raw(pid), signal).unwrap_or_else(|err| panic!("{signal} {pid}: {err}"));
}
