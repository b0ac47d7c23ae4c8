//! What every fleet of fault workers (`examples/fault_worker.rs`) without proxies of its
//! own shares, whatever it locks on (a quorum, a Sentinel deployment, a Redis Cluster):
//! the referee, the worker processes and their events, the faults recorded so far, and
//! the worker faults (killed, frozen). The single-server [`Fleet`](super::fleet::Fleet)
//! gives each worker a proxy and keeps its own list.

use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::{Child, ChildStdin, Command};

use super::events::{now_us, Event, Log};
use super::fleet::{launch, signal};
use super::record::{FaultKind, FaultRecord, Target};
use super::referee::Referee;
use super::RedisServer;

/// A worker process.
#[derive(Debug)]
struct Member {
    name: String,
    pid: i32,
    child: Child,
    /// Closed to stop the worker after its current section.
    stdin: Option<ChildStdin>,
    alive: bool,
}

/// The referee, the workers, their events and the faults.
#[derive(Debug)]
pub struct Crew {
    /// Every worker's events.
    pub log: Log,
    /// Every fault recorded so far.
    pub faults: Vec<FaultRecord>,
    /// The referee the workers register with.
    pub referee: Referee,
    referee_server: RedisServer,
    members: Vec<Member>,
    /// When the crew started, µs since the epoch.
    pub started_us: u64,
}

impl Crew {
    /// Starts the referee server; no workers yet.
    pub async fn start() -> Crew {
        let referee_server = RedisServer::start();
        let referee = Referee::connect(&referee_server.url())
            .await
            .expect("connect to the referee");
        Crew {
            log: Log::default(),
            faults: Vec::new(),
            referee,
            referee_server,
            members: Vec::new(),
            started_us: now_us(),
        }
    }

    /// Starts `command` (see `fleet::worker_command`) as worker `name`, with the
    /// referee's URL, and a task that logs its events.
    pub async fn launch(&mut self, name: &str, mut command: Command) {
        command.env("FW_REFEREE_URL", self.referee_server.url());
        let (child, pid, stdin) = launch(command, name, &self.log).await;
        self.members.push(Member {
            name: name.to_owned(),
            pid,
            child,
            stdin,
            alive: true,
        });
    }

    /// The names of the live workers.
    pub fn live(&self) -> Vec<String> {
        let live = self.members.iter().filter(|w| w.alive);
        live.map(|w| w.name.clone()).collect()
    }

    fn member(&mut self, name: &str) -> &mut Member {
        self.members
            .iter_mut()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no worker {name}"))
    }

    /// Records a fault starting now; returns its index for [`end`](Self::end).
    pub fn begin(&mut self, kind: FaultKind, target: Target) -> usize {
        let now = now_us();
        self.faults.push(FaultRecord {
            kind,
            target,
            start_us: now,
            end_us: now,
        });
        self.faults.len() - 1
    }

    /// Records that fault `index` ended now.
    pub fn end(&mut self, index: usize) {
        self.faults[index].end_us = now_us();
    }

    /// SIGKILLs worker `name`, waits for it, and removes its registrations on the
    /// referee (a dead process cannot leave).
    pub async fn kill(&mut self, name: &str) {
        let index = self.begin(FaultKind::KillWorker, Target::Worker(name.to_owned()));
        let worker = self.member(name);
        signal(worker.pid, Signal::SIGKILL);
        let _ = worker.child.wait().await;
        worker.alive = false;
        self.referee
            .evict(name)
            .await
            .expect("evict on the referee");
        self.end(index);
    }

    /// Freezes worker `name` with SIGSTOP for `d`. A worker frozen between its check and
    /// its leave may overlap the next holder: see `Report::overlaps_explained`.
    pub async fn freeze(&mut self, name: &str, d: Duration) {
        let index = self.begin(FaultKind::FreezeWorker, Target::Worker(name.to_owned()));
        let pid = self.member(name).pid;
        signal(pid, Signal::SIGSTOP);
        tokio::time::sleep(d).await;
        // Ends before the signal: the worker may print before this returns.
        self.end(index);
        signal(pid, Signal::SIGCONT);
    }

    /// Closes every live worker's stdin, so it stops after its current section, and
    /// waits for it to exit (thawed first; SIGKILL after 10 s).
    pub async fn stop_all(&mut self) {
        for worker in &mut self.members {
            worker.stdin = None;
        }
        for worker in self.members.iter_mut().filter(|w| w.alive) {
            signal(worker.pid, Signal::SIGCONT);
            let waited = tokio::time::timeout(Duration::from_secs(10), worker.child.wait()).await;
            if waited.is_err() {
                eprintln!("{} did not stop; killing it", worker.name);
                let _ = worker.child.kill().await;
            }
            worker.alive = false;
        }
    }

    /// Every event and fault, one a line in time order, in ms since the start.
    pub fn dump(&self) -> String {
        dump(&self.log.all(), &self.faults, self.started_us)
    }

    /// Seconds since the crew started.
    pub fn secs(&self) -> f64 {
        (now_us() - self.started_us) as f64 / 1e6
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        for worker in &mut self.members {
            // A frozen worker would not die of its SIGKILL until thawed.
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(worker.pid), Signal::SIGCONT);
            let _ = worker.child.start_kill();
        }
    }
}

/// `events` and `faults`, one a line in time order, in ms since `from_us`.
pub fn dump(events: &[Event], faults: &[FaultRecord], from_us: u64) -> String {
    let ms = |us: u64| us.saturating_sub(from_us) as f64 / 1000.0;
    let mut lines: Vec<(u64, String)> = events
        .iter()
        .map(|e| {
            let line = format!(
                "{:>10.1} {} {} {}",
                ms(e.us),
                e.worker,
                e.kind,
                e.fields.join(" ")
            );
            (e.us, line)
        })
        .collect();
    for f in faults {
        let line = format!(
            "{:>10.1} fault {:?} on {:?} until {:.1}",
            ms(f.start_us),
            f.kind,
            f.target,
            ms(f.end_us)
        );
        lines.push((f.start_us, line));
    }
    lines.sort_by_key(|(us, _)| *us);
    let lines: Vec<String> = lines.into_iter().map(|(_, line)| line).collect();
    lines.join("\n")
}
