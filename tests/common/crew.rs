//! The worker processes of a fleet (`examples/fault_worker.rs`), whatever they lock on:
//! the referee they register with, the workers and their events, the faults recorded
//! so far, the faults done to a worker (killed, frozen, and, for a worker started
//! behind a [`Proxy`] of its own, its link cut off, slowed or reset), and one dump of
//! everything in time order.

use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use super::events::{now_us, Event, Log};
use super::proxy::{Fault, Proxy};
use super::record::{FaultKind, FaultRecord, Target};
use super::referee::Referee;
use super::RedisServer;

/// A worker process, and the proxy it reaches the deployment through, if any.
#[derive(Debug)]
struct Member {
    name: String,
    pid: i32,
    child: Child,
    /// Closed to stop the worker after its current section.
    stdin: Option<ChildStdin>,
    proxy: Option<Proxy>,
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
    /// The referee's URL the workers get: its TCP one, or its Unix socket's.
    referee_url: String,
    members: Vec<Member>,
    /// When the crew started, µs since the epoch.
    pub started_us: u64,
}

impl Crew {
    /// Starts the referee server; no workers yet.
    pub async fn start() -> Crew {
        let referee_server = RedisServer::start();
        let url = referee_server.url();
        Self::start_on(referee_server, url).await
    }

    /// Starts the referee server listening on a Unix socket too (`referee.sock` in its
    /// directory), which the workers get as its URL: a worker in another network
    /// namespace reaches it there. No workers yet.
    pub async fn start_unix() -> Crew {
        let referee_server =
            RedisServer::start_with(&["--unixsocket", "referee.sock", "--unixsocketperm", "700"]);
        // Relative to the server's `--dir`, where it runs.
        let socket = referee_server.dir().join("referee.sock");
        Self::start_on(referee_server, format!("unix://{}", socket.display())).await
    }

    /// The crew of referee server `referee_server`, which the workers reach at
    /// `referee_url`.
    async fn start_on(referee_server: RedisServer, referee_url: String) -> Crew {
        let referee = Referee::connect(&referee_server.url())
            .await
            .expect("connect to the referee");
        Crew {
            log: Log::default(),
            faults: Vec::new(),
            referee,
            referee_server,
            referee_url,
            members: Vec::new(),
            started_us: now_us(),
        }
    }

    /// Starts `command` (see `fleet::worker_command`) as worker `name`, with the
    /// referee's URL, and a task that logs its events; waits for its `START`.
    pub async fn launch(&mut self, name: &str, command: Command) {
        self.enlist(name, command, None).await;
    }

    /// The same for a worker that reaches the deployment through `proxy` alone (its
    /// `FW_LOCK_URL` is the proxy's): the proxy faults below then hit this worker only.
    pub async fn launch_behind(&mut self, name: &str, command: Command, proxy: Proxy) {
        self.enlist(name, command, Some(proxy)).await;
    }

    async fn enlist(&mut self, name: &str, mut command: Command, proxy: Option<Proxy>) {
        command.env("FW_REFEREE_URL", &self.referee_url);
        let (child, pid, stdin) = launch(command, name, &self.log).await;
        self.members.push(Member {
            name: name.to_owned(),
            pid,
            child,
            stdin,
            proxy,
            alive: true,
        });
    }

    /// The names of the live workers.
    pub fn live(&self) -> Vec<String> {
        let live = self.members.iter().filter(|w| w.alive);
        live.map(|w| w.name.clone()).collect()
    }

    fn member(&self, name: &str) -> &Member {
        self.members
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no worker {name}"))
    }

    fn member_mut(&mut self, name: &str) -> &mut Member {
        self.members
            .iter_mut()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no worker {name}"))
    }

    /// The proxy of worker `name`, started with [`launch_behind`](Self::launch_behind).
    pub fn proxy(&self, name: &str) -> &Proxy {
        let member = self.member(name);
        let proxy = member.proxy.as_ref();
        proxy.unwrap_or_else(|| panic!("worker {name} has no proxy of its own"))
    }

    /// The `ACQUIRED` event of the guard with lock id `id`.
    pub fn acquired(&self, id: &str) -> Option<Event> {
        self.log
            .filter(|e| e.is("ACQUIRED") && e.id() == id)
            .into_iter()
            .next()
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
        let worker = self.member_mut(name);
        signal(worker.pid, Signal::SIGKILL);
        let _ = worker.child.wait().await;
        worker.alive = false;
        self.referee
            .evict(name)
            .await
            .expect("evict on the referee");
        self.end(index);
    }

    /// Freezes worker `name` with SIGSTOP; returns the fault's index for
    /// [`thaw`](Self::thaw). A worker frozen between its check and its leave may overlap
    /// the next holder: see `Report::overlaps_explained`.
    pub fn freeze(&mut self, name: &str) -> usize {
        let index = self.begin(FaultKind::FreezeWorker, Target::Worker(name.to_owned()));
        signal(self.member(name).pid, Signal::SIGSTOP);
        index
    }

    /// Thaws the worker frozen by fault `index` (SIGCONT).
    pub fn thaw(&mut self, index: usize) {
        let Target::Worker(name) = self.faults[index].target.clone() else {
            panic!("fault {index} froze no worker");
        };
        // Ends before the signal: the worker may print before this returns.
        self.end(index);
        signal(self.member(&name).pid, Signal::SIGCONT);
    }

    /// Waits (up to `wait`) for worker `name` to hold a lock taken after `after_us`,
    /// freezes it at once (asserting it was still within its hold of `hold_us`), keeps it
    /// frozen for `d` and thaws it: its `HOLDING` event, and when it was stopped and when
    /// it resumed (µs).
    pub async fn freeze_while_holding(
        &mut self,
        name: &str,
        after_us: u64,
        hold_us: u64,
        d: Duration,
        wait: Duration,
    ) -> (Event, u64, u64) {
        let holding = self
            .log
            .wait_for(wait, |e| {
                e.worker == name && e.is("HOLDING") && e.us > after_us
            })
            .await
            .unwrap_or_else(|| panic!("{name} holds no lock"));
        let fault = self.freeze(name);
        let stopped_us = self.faults[fault].start_us;
        assert!(
            stopped_us < holding.us + hold_us,
            "{name} frozen after its hold ended"
        );
        tokio::time::sleep(d).await;
        self.thaw(fault);
        (holding, stopped_us, self.faults[fault].end_us)
    }

    /// Freezes worker `name` for `d`, then thaws it.
    pub async fn freeze_for(&mut self, name: &str, d: Duration) {
        let index = self.freeze(name);
        tokio::time::sleep(d).await;
        self.thaw(index);
    }

    /// Sets `fault` on the proxy of worker `name`, recorded as `kind` until
    /// [`heal_proxy`](Self::heal_proxy).
    pub fn proxy_fault(&mut self, name: &str, kind: FaultKind, fault: Fault) -> usize {
        let index = self.begin(kind, Target::Worker(name.to_owned()));
        self.proxy(name).set(fault);
        index
    }

    /// Lets the proxy of fault `index` pass again.
    pub fn heal_proxy(&mut self, index: usize) {
        if let Target::Worker(name) = self.faults[index].target.clone() {
            self.proxy(&name).set(Fault::Pass);
        }
        self.end(index);
    }

    /// Resets every connection of the proxy of worker `name`.
    pub fn reset(&mut self, name: &str) {
        let index = self.begin(FaultKind::Reset, Target::Worker(name.to_owned()));
        self.proxy(name).reset_all();
        self.end(index);
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
            let _ = kill(Pid::from_raw(worker.pid), Signal::SIGCONT);
            let _ = worker.child.start_kill();
        }
    }
}

/// `events` and `faults`, one a line in time order, in ms since `from_us`.
pub fn dump(events: &[Event], faults: &[FaultRecord], from_us: u64) -> String {
    dump_with(events, faults, from_us, Vec::new())
}

/// The same with `more` lines, each at its time in µs since the epoch.
pub fn dump_with(
    events: &[Event],
    faults: &[FaultRecord],
    from_us: u64,
    more: Vec<(u64, String)>,
) -> String {
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
    let more = more
        .into_iter()
        .map(|(us, line)| (us, format!("{:>10.1} {line}", ms(us))));
    lines.extend(more);
    lines.sort_by_key(|(us, _)| *us);
    let lines: Vec<String> = lines.into_iter().map(|(_, line)| line).collect();
    lines.join("\n")
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
fn signal(pid: i32, signal: Signal) {
    kill(Pid::from_raw(pid), signal).unwrap_or_else(|err| panic!("{signal} {pid}: {err}"));
}
