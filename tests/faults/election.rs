//! Leader election in the fault suite's worker form: the candidates are worker processes
//! (`examples/fault_worker.rs` in election mode, `FW_ELECTION`) campaigning on one
//! election on a test-started `redis-server` (TTL 1 s), checked by the referee
//! (`tests/common/referee.rs`), by `Election::leader()` and by an `Election::observe()`
//! observer in the test process. A leader does units of work 100–200 ms apart, each a
//! fenced write on the referee with its term and a read-modify-write of a data counter
//! through `Leadership::guard().exec` (`FW_EXEC`).
//!
//! - `killed_leaders_are_followed_by_larger_terms`: three candidates; the leader is
//!   SIGKILLed right after a unit of work, five times, and a new candidate is started in
//!   its place each time. After each kill, within TTL + 5 s, another candidate leads (its
//!   `LEADING` line), not before the killed leader's lease expired on the server (its
//!   PTTL read just before the kill), with a term above every earlier term;
//!   `Election::leader()` names it with that term, and the observer reports it.
//! - `frozen_leader_wakes_to_a_fired_token_and_its_writes_are_refused`: three candidates;
//!   the leader is SIGSTOPped between two units for TTL + 0.5 s at least, twice; another
//!   candidate leads with a larger term and writes meanwhile. On waking, the frozen
//!   leader's first line is `ABANDONED` (`is_cancelled()` true, `Expired` or `Lost`)
//!   before any write: no `CHECKED` follows, its fenced probe with the old term is
//!   rejected by the referee and its exec probe refused by the guard.
//! - `two_candidates_take_turns` and `three_candidates_take_turns`: no fault; each leader
//!   steps down after five units, by `Leadership::resign` or by dropping the leadership
//!   (alternately by candidate), and rests 100 ms before campaigning again: ten
//!   leaderships, each handed to another candidate, the resignations answered
//!   `held=true`, every hand-off within the TTL (a release wakes the waiters).
//! - `election_soak` (ignored): the kill and freeze rounds above, at random, for
//!   `ELECTION_SOAK_SECS` (default 120):
//!
//! ```sh
//! ELECTION_SOAK_SECS=300 cargo test --release --test faults election::election_soak -- --ignored --nocapture
//! ```
//!
//! Every run also asserts, once the candidates stopped: the leaderships, each from its
//! `LEADING` to the earliest of its `ENDED`, its worker's SIGKILL and the last validity
//! deadline it reported (`LEADING` or `CHECKED` time + validity left), never overlap, and
//! their terms strictly grow in the order they started; every fenced write (or probe)
//! whose term was below the largest term led before it is counted stale, and none was
//! accepted (nor by the referee, which also saw no term out of order); no leader's own
//! write was refused; every leader the observer reported is a `LEADING` line's worker and
//! term, in growing terms; the data counter equals the accepted exec writes (within the
//! uncertain ones) and no exec begun after a freeze past the TTL was accepted; no
//! `ERROR` line; no key is left on the lock server but the fence counter, the data
//! counter and the leader's record (kept for the fence retention, believed only while
//! the lock key holds its id), and `Election::leader()` is `None`.
//! The referee's overlaps (two leaders registered at once) must be 0, but for a leader
//! that entered while a frozen one was still registered. The figures (time from kill to
//! the next leader, to the observer, ...) are printed (`--nocapture`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngExt;
use redis::aio::MultiplexedConnection;
use redismutex::{Election, Leader};

use crate::common::crew::{dump, Crew};
use crate::common::events::{now_us, Event};
use crate::common::record::{FaultKind, FaultRecord};
use crate::common::referee::RefereeReport;
use crate::common::{raw, RedisServer};
use crate::harness::fault_checks::{ms, SERIAL, TTL_MS, WAIT};
use crate::harness::fleet::{worker_command, Spec};
use crate::harness::guarded::Guarded;

/// The election's name: its lock key on the lock server and its key on the referee.
const NAME: &str = "leader";

/// How long after a kill or a freeze another candidate must lead: TTL + 5 s.
const TAKEOVER: Duration = Duration::from_millis(TTL_MS + 5000);

/// How many leaders the kill test SIGKILLs.
const KILLS: usize = 5;

/// How many times the freeze test SIGSTOPs the leader.
const FREEZES: usize = 2;

/// How many leaderships the turn tests wait for.
const TURNS: usize = 10;

/// The observer's reports: each leader (or none) it gave, and when (µs).
type Reports = Vec<(u64, Option<Leader>)>;

/// The candidates on one lock server, their referee, and an election handle and an
/// observer of the election in the test process.
struct Race {
    lock: RedisServer,
    conn: MultiplexedConnection,
    crew: Crew,
    election: Election<MultiplexedConnection>,
    /// Every value the observer gave, stamped when the test saw it.
    observed: Arc<Mutex<Reports>>,
    observer: tokio::task::JoinHandle<()>,
    spec: Spec,
    spawned: usize,
}

impl Race {
    /// Starts the lock server, the referee and the observer; candidates will do units of
    /// work `work_ms` apart, with `FW_EXEC`.
    async fn start(work_ms: (u64, u64)) -> Race {
        let lock = RedisServer::start();
        let crew = Crew::start().await;
        let election = Election::builder(lock.conn().await, NAME)
            .ttl(ms(TTL_MS))
            .notifier(lock.client())
            .build()
            .expect("valid election options");
        let mut receiver = election.observe().await.expect("observe the election");
        let first = receiver.borrow_and_update().clone();
        let observed = Arc::new(Mutex::new(vec![(now_us(), first)]));
        let log = Arc::clone(&observed);
        let observer = tokio::spawn(async move {
            while receiver.changed().await.is_ok() {
                let leader = receiver.borrow_and_update().clone();
                log.lock().expect("observed").push((now_us(), leader));
            }
        });
        let spec = Spec {
            work_ms,
            exec: true,
            ..Spec::default()
        };
        Race {
            conn: lock.conn().await,
            lock,
            crew,
            election,
            observed,
            observer,
            spec,
            spawned: 0,
        }
    }

    /// Starts the next candidate, `c<n>`, with `env` beside the race's settings, and
    /// waits for its `START`; its name.
    async fn spawn(&mut self, env: &[(&str, &str)]) -> String {
        let name = format!("c{}", self.spawned);
        self.spawned += 1;
        let mut command = worker_command(&name, &self.spec, TTL_MS, NAME);
        command
            .env("FW_ELECTION", NAME)
            .env("FW_LOCK_URL", self.lock.url())
            .env("FW_ACQUIRE_TIMEOUT_MS", "1000")
            .envs(env.iter().copied());
        self.crew.launch(&name, command).await;
        name
    }

    /// The first `LEADING` after `after_us` by another worker than `not`, waiting up to
    /// `wait` for it.
    async fn next_leader(&self, after_us: u64, not: &str, wait: Duration) -> Option<Event> {
        let log = &self.crew.log;
        log.wait_for(wait, |e| {
            e.is("LEADING") && e.us > after_us && e.worker != not
        })
        .await
    }

    /// Waits for the leader of `leading` (its `LEADING`) to finish a unit of work after
    /// now: its exec write, the unit's last step.
    async fn unit_done(&self, leading: &Event) -> Event {
        let since = now_us();
        let log = &self.crew.log;
        log.wait_for(WAIT, |e| {
            e.worker == leading.worker
                && e.is("EXEC")
                && e.token() == leading.token()
                && e.exec_what() == "write"
                && e.us > since
        })
        .await
        .unwrap_or_else(|| panic!("{} did no unit of work", leading.worker))
    }

    /// Asserts that `Election::leader()` names the leader of `leading` with its term, and
    /// waits (up to [`TAKEOVER`]) for the observer to report it: when it did.
    async fn assert_reported(&self, leading: &Event, round: usize) -> u64 {
        let expected = Leader {
            value: leading.worker.clone(),
            fencing_token: leading.token(),
        };
        let read = self.election.leader().await.expect("Election::leader()");
        assert_eq!(read, Some(expected.clone()), "round {round}: leader()");
        let deadline = tokio::time::Instant::now() + TAKEOVER;
        loop {
            let seen = self.observed.lock().expect("observed").clone();
            let at = seen.iter().find(|(_, l)| l.as_ref() == Some(&expected));
            if let Some((us, _)) = at {
                return *us;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "round {round}: the observer did not report {expected:?}: {seen:?}"
            );
            tokio::time::sleep(ms(5)).await;
        }
    }

    /// Stops the candidates (their standard input closed: a leader resigns), waits a TTL,
    /// and reads and checks what every run must pass (see the module doc); prints the
    /// figures under `label`.
    async fn finish(mut self, label: &str) -> Outcome {
        self.crew.stop_all().await;
        self.observer.abort();
        tokio::time::sleep(ms(TTL_MS + 300)).await;
        let keys: Vec<String> = raw::cmd(&self.conn, "KEYS", &["*"]).await;
        let kept = [":fence", ":data", ":leader"].map(|suffix| format!("{NAME}{suffix}"));
        let left: Vec<_> = keys.iter().filter(|k| !kept.contains(k)).collect();
        assert!(left.is_empty(), "keys left: {left:?}");
        let leader = self.election.leader().await.expect("Election::leader()");
        assert_eq!(leader, None, "a leader after every candidate stopped");
        println!("   keys kept on the lock server: {keys:?}");
        let data = raw::get(&self.conn, &format!("{NAME}:data")).await;
        let data = data.map_or(0, |v| v.parse().expect("an integer data counter"));
        let events = self.crew.log.all();
        let faults = self.crew.faults.clone();
        if std::env::var_os("FAULTS_DUMP").is_some() {
            println!("{}", dump(&events, &faults, self.crew.started_us));
        }
        let referee = self.crew.referee.report().await.expect("read the referee");
        let outcome = Outcome {
            guarded: guarded(&events, &faults, data),
            claims: claims(&events, &faults),
            stale: stale_fenced(&events),
            observed: self.observed.lock().expect("observed").clone(),
            referee,
            events,
        };
        outcome.print(label);
        outcome.assert_common();
        outcome
    }
}

/// What a run left: the events, the leaderships they claim, the observer's reports, the
/// referee's counts and the guarded data.
struct Outcome {
    events: Vec<Event>,
    claims: Vec<Claim>,
    /// Fenced writes and probes whose term was below the largest led before them.
    stale: Vec<Event>,
    observed: Reports,
    referee: RefereeReport,
    guarded: Guarded,
}

impl Outcome {
    fn print(&self, label: &str) {
        let fenced = |what: &str, verdict: &str| {
            let of = |e: &&Event| e.is("FENCED") && e.last() == what && e.field(2) == verdict;
            self.events.iter().filter(of).count()
        };
        let stale_rejected = self.stale.iter().filter(|e| e.field(2) == "rejected");
        let first = self.claims.first().map_or(0, |c| c.term);
        println!(
            "== {label}: {} leaderships, terms {} + {:?}\n   fenced writes accepted {}, rejected \
             {}; probes accepted {}, rejected {}; stale (term below the latest led) {}, \
             rejected {}\n   referee: overlaps {} {:?}, terms out of order {}, stale accepted \
             {}, rejected {}\n   observer reports {}\n{}",
            self.claims.len(),
            first,
            self.claims
                .iter()
                .map(|c| c.term - first)
                .collect::<Vec<_>>(),
            fenced("write", "accepted"),
            fenced("write", "rejected"),
            fenced("probe", "accepted"),
            fenced("probe", "rejected"),
            self.stale.len(),
            stale_rejected.count(),
            self.referee.violations,
            self.referee.violation_log,
            self.referee.token_order,
            self.referee.stale_accepted,
            self.referee.stale_rejected,
            self.observed.len(),
            self.guarded,
        );
    }

    /// The checks of every run (see the module doc).
    fn assert_common(&self) {
        let errors: Vec<_> = self.events.iter().filter(|e| e.is("ERROR")).collect();
        assert!(errors.is_empty(), "errors: {errors:?}");
        assert!(!self.claims.is_empty(), "nobody led");
        let mut before: Option<&Claim> = None;
        for claim in &self.claims {
            if let Some(last) = before {
                assert!(
                    claim.term > last.term,
                    "terms not growing: {last:?}, {claim:?}"
                );
            }
            let earlier = self.claims.iter().filter(|c| c.start_us < claim.start_us);
            let overlapped: Vec<_> = earlier.filter(|c| c.end_us > claim.start_us).collect();
            assert!(
                overlapped.is_empty(),
                "{claim:?} began while these still claimed the lead: {overlapped:?}"
            );
            before = Some(claim);
        }
        let stale_accepted = self.stale.iter().filter(|e| e.field(2) != "rejected");
        let stale_accepted: Vec<_> = stale_accepted.collect();
        assert!(
            stale_accepted.is_empty(),
            "stale accepted: {stale_accepted:?}"
        );
        let r = &self.referee;
        assert_eq!(r.stale_accepted, 0, "{:?}", r.stale_accepted_log);
        assert_eq!(r.token_order, 0, "{:?}", r.token_order_log);
        let refused =
            |e: &&Event| e.is("FENCED") && e.last() == "write" && e.field(2) != "accepted";
        let refused: Vec<_> = self.events.iter().filter(refused).collect();
        assert!(refused.is_empty(), "leaders' writes refused: {refused:?}");
        self.assert_observed();
        let g = &self.guarded;
        assert!(g.totals().accepted > 0, "no exec write was accepted");
        assert!(
            g.lost().is_empty(),
            "accepted exec writes lost: {:?}",
            g.lost()
        );
        assert!(g.uncounted().is_empty(), "uncounted: {:?}", g.uncounted());
        let stale = &g.stale_not_refused;
        assert!(stale.is_empty(), "stale exec writes not refused: {stale:?}");
    }

    /// Every leader the observer reported led (a `LEADING` line of its worker and term),
    /// and their terms grow.
    fn assert_observed(&self) {
        let mut term = 0;
        for (_, leader) in &self.observed {
            let Some(leader) = leader else { continue };
            let led = self
                .claims
                .iter()
                .any(|c| c.worker == leader.value && c.term == leader.fencing_token);
            assert!(led, "the observer reported {leader:?}, who never led");
            assert!(leader.fencing_token >= term, "{:?}", self.observed);
            term = leader.fencing_token;
        }
    }

    /// The referee's overlaps: the entrants that found someone registered, and whom.
    fn overlaps(&self) -> Vec<(String, Vec<String>)> {
        let parse = |line: &String| {
            let entrant = line.split_whitespace().nth(2).unwrap_or("").to_string();
            let (_, inside) = line.split_once("inside: ").unwrap_or(("", ""));
            let inside = inside
                .split(',')
                .map(|w| w.trim_end_matches("/w").to_string());
            (entrant, inside.collect())
        };
        self.referee.violation_log.iter().map(parse).collect()
    }
}

/// One leadership as its worker reported it.
#[derive(Debug, Clone)]
struct Claim {
    worker: String,
    term: u64,
    /// Its `LEADING`.
    start_us: u64,
    /// The earliest of its `ENDED`, its worker's SIGKILL, and the last validity deadline
    /// it reported: a `LEADING` or `CHECKED` time plus the validity left then.
    end_us: u64,
}

/// The leaderships of `events`, in the order they started.
fn claims(events: &[Event], faults: &[FaultRecord]) -> Vec<Claim> {
    let mut claims = Vec::new();
    for lead in events.iter().filter(|e| e.is("LEADING")) {
        let mine = |e: &&Event| e.worker == lead.worker && e.token() == lead.token();
        let deadline = |e: &Event| {
            let left: i64 = e.last().parse().expect("validity left in µs");
            u64::try_from(e.us as i64 + left).unwrap_or(0)
        };
        let checks = events.iter().filter(mine);
        let checks = checks.filter(|e| e.is("LEADING") || e.is("CHECKED"));
        let valid = checks.map(deadline).max();
        let ended = events.iter().filter(mine).find(|e| e.is("ENDED"));
        let killed = faults.iter().find(|f| {
            f.kind == FaultKind::KillWorker && f.hits(&lead.worker) && f.start_us >= lead.us
        });
        let ends = [valid, ended.map(|e| e.us), killed.map(|f| f.start_us)];
        claims.push(Claim {
            worker: lead.worker.clone(),
            term: lead.token(),
            start_us: lead.us,
            end_us: ends
                .into_iter()
                .flatten()
                .min()
                .expect("a validity deadline"),
        });
    }
    claims.sort_by_key(|c| c.start_us);
    claims
}

/// The fenced writes and probes whose term was below the largest term of a `LEADING`
/// before them: each must have been rejected.
fn stale_fenced(events: &[Event]) -> Vec<Event> {
    let latest = |us: u64| {
        let led = events.iter().filter(|e| e.is("LEADING") && e.us < us);
        led.map(Event::token).max().unwrap_or(0)
    };
    let fenced = events.iter().filter(|e| e.is("FENCED"));
    fenced
        .filter(|e| e.token() < latest(e.us))
        .cloned()
        .collect()
}

/// The guarded data of the run, the data counter being `counter`. A worker SIGKILLed
/// between a unit's guarded read and its write leaves that write uncertain (it may have
/// been on the wire), which `Guarded` counts only for a leadership's first unit.
fn guarded(events: &[Event], faults: &[FaultRecord], counter: i64) -> Guarded {
    let mut guarded = Guarded::build(events, faults, TTL_MS, &[(NAME.to_string(), counter)]);
    for kill in faults.iter().filter(|f| f.kind == FaultKind::KillWorker) {
        let execs: Vec<_> = events
            .iter()
            .filter(|e| e.is("EXEC") && kill.hits(&e.worker) && e.us <= kill.start_us)
            .collect();
        let Some(last) = execs.last() else { continue };
        let term_wrote = execs
            .iter()
            .any(|e| e.token() == last.token() && e.exec_what() != "read");
        if last.exec_what() == "read" && term_wrote {
            guarded.keys.entry(NAME.to_string()).or_default().uncertain += 1;
        }
    }
    guarded
}

/// `values` as `min / median / max` in ms, or `-` when empty.
fn spread(values: &[f64]) -> String {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (Some(first), Some(last)) = (sorted.first(), sorted.last()) else {
        return "-".to_string();
    };
    let median = sorted[sorted.len() / 2];
    format!("{first:.1} / {median:.1} / {last:.1} ms")
}

/// Milliseconds from `from` to `to` (µs), negative when `to` came first.
fn ms_between(from: u64, to: u64) -> f64 {
    (to as f64 - from as f64) / 1000.0
}

/// What the kill and freeze rounds measured, in ms.
#[derive(Debug, Default)]
struct Figures {
    /// From the kill (or the freeze) to the next `LEADING`.
    takeover: Vec<f64>,
    /// From the kill to the killed lease's expiry (PTTL read just before the kill).
    expiry: Vec<f64>,
    /// From that expiry to the next `LEADING`.
    after_expiry: Vec<f64>,
    /// From the kill (or the freeze) to the observer's report of the new leader.
    observed: Vec<f64>,
    /// From the thaw to the frozen leader's `ABANDONED`.
    woke: Vec<f64>,
    /// The reason of each frozen leader's `ABANDONED` (`Expired`, `Lost`).
    woke_to: Vec<String>,
}

impl Figures {
    fn print(&self, kills: usize, freezes: usize) {
        println!(
            "   {kills} kills, {freezes} freezes: fault → next leader {}; kill → lease expiry \
             {}; expiry → next leader {}; fault → observer reports the new leader {}; thaw → \
             ABANDONED {} {:?}",
            spread(&self.takeover),
            spread(&self.expiry),
            spread(&self.after_expiry),
            spread(&self.observed),
            spread(&self.woke),
            self.woke_to
        );
    }
}

/// SIGKILLs the leader of `leading` right after a unit of work, and asserts that another
/// candidate leads within [`TAKEOVER`], not before the killed lease expired, with a term
/// above `top` (the largest so far), as `leader()` and the observer say; starts a new
/// candidate in its place. The new leader's `LEADING`.
async fn kill_round(race: &mut Race, leading: &Event, top: u64, round: usize) -> (Event, Figures) {
    race.unit_done(leading).await;
    let read_us = now_us();
    let pttl = raw::pttl(&race.conn, NAME).await;
    assert!(pttl > 0, "round {round}: the leader's lock has PTTL {pttl}");
    let expiry_us = read_us + pttl.unsigned_abs() * 1000;
    race.crew.kill(&leading.worker).await;
    let kill_us = race.crew.faults.last().expect("the kill").start_us;
    let next = race
        .next_leader(leading.us, &leading.worker, TAKEOVER)
        .await
        .unwrap_or_else(|| panic!("round {round}: nobody leads after the kill"));
    assert!(
        next.us > kill_us,
        "round {round}: {next:?} led before the kill"
    );
    assert!(
        next.us >= expiry_us,
        "round {round}: {} led {} µs before the killed leader's lease expired",
        next.worker,
        expiry_us - next.us
    );
    assert!(
        next.token() > top,
        "round {round}: term {} after {top}",
        next.token()
    );
    let observed_us = race.assert_reported(&next, round).await;
    race.spawn(&[]).await;
    let figures = Figures {
        takeover: vec![ms_between(kill_us, next.us)],
        expiry: vec![ms_between(kill_us, expiry_us)],
        after_expiry: vec![ms_between(expiry_us, next.us)],
        observed: vec![ms_between(kill_us, observed_us)],
        ..Figures::default()
    };
    (next, figures)
}

/// SIGSTOPs the leader of `leading` right after a unit of work until another candidate
/// led and wrote, and at least TTL + 0.5 s; thaws it and asserts that it woke to a fired
/// token before any write and that its probes were refused. `None`, with the leader
/// thawed at once, when the stop fell inside a unit (the round is tried again). The new
/// leader's `LEADING`.
async fn freeze_round(race: &mut Race, leading: &Event, round: usize) -> Option<(Event, Figures)> {
    let frozen = leading.worker.clone();
    race.unit_done(leading).await;
    let fault = race.crew.freeze(&frozen);
    let stopped_us = race.crew.faults[fault].start_us;
    // The lines printed before the stop reach the log.
    tokio::time::sleep(ms(50)).await;
    // Between two units: its last line the unit's exec write, and stopped well before its
    // pause (at least 100 ms) could have ended.
    let last = race.crew.log.filter(|e| e.worker == frozen).pop();
    let between = last
        .is_some_and(|e| e.is("EXEC") && e.exec_what() == "write" && stopped_us < e.us + 80_000);
    if !between {
        race.crew.thaw(fault);
        return None;
    }
    let next = race.next_leader(stopped_us, &frozen, TAKEOVER).await;
    let next =
        next.unwrap_or_else(|| panic!("round {round}: nobody leads while {frozen} is frozen"));
    assert!(next.token() > leading.token(), "round {round}: {next:?}");
    race.unit_done(&next).await;
    let until = stopped_us + (TTL_MS + 500) * 1000;
    tokio::time::sleep(Duration::from_micros(until.saturating_sub(now_us()))).await;
    race.crew.thaw(fault);
    let resumed_us = race.crew.faults[fault].end_us;

    let term = leading.token();
    let mine = |e: &Event| e.worker == frozen && e.token() == term;
    let ended = race
        .crew
        .log
        .wait_for(WAIT, |e| mine(e) && e.is("ENDED"))
        .await;
    ended.unwrap_or_else(|| panic!("round {round}: {frozen} did not end its leadership"));
    let woke = race.crew.log.filter(|e| mine(e) && e.us >= resumed_us);
    let first = woke.first().expect("lines after the thaw");
    assert!(
        first.is("ABANDONED") && matches!(first.last(), "Expired" | "Lost"),
        "round {round}: {frozen} woke and went on: {woke:?}"
    );
    assert!(
        !woke.iter().any(|e| e.is("CHECKED")),
        "round {round}: {woke:?}"
    );
    let probe = woke.iter().find(|e| e.is("FENCED"));
    let probe = probe.map(|e| (e.field(2), e.last()));
    assert_eq!(
        probe,
        Some(("rejected", "probe")),
        "round {round}: {woke:?}"
    );
    let exec = woke.iter().find(|e| e.is("EXEC"));
    let exec = exec.map(|e| (e.verdict(), e.exec_what()));
    assert_eq!(exec, Some(("refused", "probe")), "round {round}: {woke:?}");
    let observed_us = race.assert_reported(&next, round).await;
    let figures = Figures {
        takeover: vec![ms_between(stopped_us, next.us)],
        expiry: Vec::new(),
        after_expiry: Vec::new(),
        observed: vec![ms_between(stopped_us, observed_us)],
        woke: vec![ms_between(resumed_us, first.us)],
        woke_to: vec![first.last().to_string()],
    };
    Some((next, figures))
}

impl Figures {
    fn extend(&mut self, more: Figures) {
        self.takeover.extend(more.takeover);
        self.expiry.extend(more.expiry);
        self.after_expiry.extend(more.after_expiry);
        self.observed.extend(more.observed);
        self.woke.extend(more.woke);
        self.woke_to.extend(more.woke_to);
    }
}

/// Three candidates doing units 100–200 ms apart, and the first leader's `LEADING`.
async fn three_candidates() -> (Race, Event) {
    let mut race = Race::start((100, 200)).await;
    for _ in 0..3 {
        race.spawn(&[]).await;
    }
    let first = race.next_leader(0, "", WAIT).await.expect("somebody leads");
    race.assert_reported(&first, 0).await;
    (race, first)
}

#[tokio::test]
async fn killed_leaders_are_followed_by_larger_terms() {
    let _serial = SERIAL.lock().await;
    let (mut race, mut leading) = three_candidates().await;
    let (mut figures, mut top) = (Figures::default(), leading.token());
    for round in 1..=KILLS {
        let (next, measured) = kill_round(&mut race, &leading, top, round).await;
        figures.extend(measured);
        (leading, top) = (next.clone(), next.token());
    }
    let outcome = race.finish("election: leaders SIGKILLed").await;
    figures.print(KILLS, 0);
    assert_eq!(outcome.referee.violations, 0, "{:?}", outcome.overlaps());
    assert!(outcome.claims.len() > KILLS, "{:?}", outcome.claims);
}

#[tokio::test]
async fn frozen_leader_wakes_to_a_fired_token_and_its_writes_are_refused() {
    let _serial = SERIAL.lock().await;
    let (mut race, mut leading) = three_candidates().await;
    let (mut figures, mut frozen, mut retried) = (Figures::default(), Vec::new(), 0);
    while frozen.len() < FREEZES {
        let round = frozen.len() + 1;
        let Some((next, measured)) = freeze_round(&mut race, &leading, round).await else {
            retried += 1;
            assert!(retried <= 3, "every stop fell inside a unit of work");
            continue;
        };
        frozen.push(leading.worker.clone());
        figures.extend(measured);
        leading = next;
    }
    let outcome = race
        .finish("election: leaders SIGSTOPped past the TTL")
        .await;
    figures.print(0, FREEZES);
    println!("   stops that fell inside a unit of work, tried again: {retried}");
    let stale_probes = outcome.stale.iter().filter(|e| e.last() == "probe").count();
    assert!(stale_probes >= FREEZES, "{:?}", outcome.stale);
    assert_overlaps_only_with(&outcome, &frozen);
}

/// Every overlap the referee counted is a leader that entered while one of `frozen` (the
/// workers SIGSTOPped as leaders) was still registered: the claims (`Outcome::
/// assert_common`) show that the frozen one's validity had ended before.
fn assert_overlaps_only_with(outcome: &Outcome, frozen: &[String]) {
    for (entrant, inside) in outcome.overlaps() {
        let only_frozen = inside.iter().all(|w| frozen.contains(w));
        assert!(
            only_frozen,
            "{entrant} entered while {inside:?} were registered"
        );
    }
}

/// `candidates` candidates, each stepping down after five units 30–50 ms apart, by
/// resigning (`c0`, `c2`) or dropping the leadership (`c1`), and resting 100 ms:
/// [`TURNS`] leaderships, each handed to another candidate within the TTL.
async fn take_turns(candidates: usize) {
    let _serial = SERIAL.lock().await;
    let mut race = Race::start((30, 50)).await;
    for n in 0..candidates {
        let step_down = if n % 2 == 0 { "resign" } else { "drop" };
        let env = [
            ("FW_TERM_UNITS", "5"),
            ("FW_STEP_DOWN", step_down),
            ("FW_REST_MS", "100"),
        ];
        race.spawn(&env).await;
    }
    let deadline = tokio::time::Instant::now() + ms(20_000);
    while race.crew.log.count(|e| e.is("ENDED")) < TURNS {
        assert!(
            tokio::time::Instant::now() < deadline,
            "fewer than {TURNS} leaderships in 20 s"
        );
        tokio::time::sleep(ms(10)).await;
    }
    let label = format!("election: {candidates} candidates take turns");
    let outcome = race.finish(&label).await;
    assert_eq!(outcome.referee.violations, 0, "{:?}", outcome.overlaps());
    let lost: Vec<_> = outcome
        .events
        .iter()
        .filter(|e| e.is("ABANDONED"))
        .collect();
    assert!(lost.is_empty(), "leaderships lost: {lost:?}");
    let resigned = outcome.events.iter().filter(|e| e.is("RESIGNED"));
    let late: Vec<_> = resigned.filter(|e| e.last() != "held=true").collect();
    assert!(late.is_empty(), "resigned after losing the lead: {late:?}");
    let mut handoffs: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let ends: Vec<_> = outcome.events.iter().filter(|e| e.is("ENDED")).collect();
    for pair in outcome.claims.windows(2) {
        let [before, after] = pair else { continue };
        assert_ne!(before.worker, after.worker, "no turn taken: {pair:?}");
        let how = ends
            .iter()
            .find(|e| e.worker == before.worker && e.token() == before.term);
        let how = how.map_or("-", |e| e.last());
        let handoff = ms_between(before.end_us, after.start_us);
        assert!(
            handoff < TTL_MS as f64,
            "hand-off after {how} took {handoff} ms"
        );
        handoffs.entry(how).or_default().push(handoff);
    }
    let leaders: std::collections::BTreeSet<_> = outcome.claims.iter().map(|c| &c.worker).collect();
    assert_eq!(leaders.len(), candidates, "{:?}", outcome.claims);
    for (how, values) in handoffs {
        println!(
            "   hand-off after {how}: {} ({} of them)",
            spread(&values),
            values.len()
        );
    }
}

#[tokio::test]
async fn two_candidates_take_turns() {
    take_turns(2).await;
}

#[tokio::test]
async fn three_candidates_take_turns() {
    take_turns(3).await;
}

/// `ELECTION_SOAK_SECS`, 120 by default.
fn soak_secs() -> u64 {
    let secs = std::env::var("ELECTION_SOAK_SECS").ok();
    secs.and_then(|s| s.parse().ok()).unwrap_or(120)
}

#[tokio::test]
#[ignore = "runs for ELECTION_SOAK_SECS (default 120 s): cargo test --test faults election::election_soak -- --ignored"]
async fn election_soak() {
    let _serial = SERIAL.lock().await;
    let secs = soak_secs();
    let (mut race, mut leading) = three_candidates().await;
    let (mut figures, mut top, mut kills, mut freezes) =
        (Figures::default(), leading.token(), 0, 0);
    let end_us = now_us() + secs * 1_000_000;
    let (mut round, mut frozen) = (0, Vec::new());
    while now_us() < end_us {
        round += 1;
        if rand::rng().random_range(0..3) == 0 {
            let Some((next, measured)) = freeze_round(&mut race, &leading, round).await else {
                continue;
            };
            frozen.push(leading.worker.clone());
            (leading, freezes) = (next, freezes + 1);
            figures.extend(measured);
        } else {
            let (next, measured) = kill_round(&mut race, &leading, top, round).await;
            (leading, kills) = (next, kills + 1);
            figures.extend(measured);
        }
        top = top.max(leading.token());
    }
    let outcome = race.finish(&format!("election soak, {secs} s")).await;
    figures.print(kills, freezes);
    assert_overlaps_only_with(&outcome, &frozen);
}
