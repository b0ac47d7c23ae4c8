//! What a fault run measured: faults injected, tokens fired, the referee's verdict,
//! keys left behind, takeover latency and how far ahead of the server's expiry tokens
//! fired.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use super::guarded::Guarded;
use crate::common::events::{Event, Log};
use crate::common::record::{FaultKind, FaultRecord, HeldLock, Target};
use crate::common::referee::RefereeReport;

/// How far ahead of its key's expiry on the server a guard's token fired.
#[derive(Debug, Clone)]
pub struct Lead {
    pub worker: String,
    pub key: String,
    pub reason: String,
    /// Expiry minus the FIRED time, in µs; must be positive.
    pub lead_us: i64,
    /// When the note of the expiry was read, and when the token fired (µs).
    pub read_us: u64,
    pub fired_us: u64,
}

impl Lead {
    /// Whether the watcher may have been blinded before it read the key's last renewal:
    /// the server was frozen or killed (`PauseServer`, `PauseServerLong`, `KillServer`,
    /// `FreezeMaster`) after the note was read and before the token fired. A renewal the
    /// server answered in the watcher's last period (20 ms) before it froze was never
    /// read, so the note can be a renewal (ttl/2) behind the key's true expiry.
    pub fn blinded_by(&self, faults: &[FaultRecord]) -> bool {
        faults.iter().any(|f| {
            matches!(
                f.kind,
                FaultKind::PauseServer
                    | FaultKind::PauseServerLong
                    | FaultKind::KillServer
                    | FaultKind::FreezeMaster
            ) && f.start_us > self.read_us
                && f.start_us <= self.fired_us
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub label: String,
    pub secs: f64,
    pub referee: RefereeReport,
    pub faults: BTreeMap<String, usize>,
    /// FIRED with Lost/Expired while a fault was aimed at that worker (or the server).
    pub fired_expected: usize,
    /// FIRED with Lost/Expired with no fault aimed at that worker in the TTL before.
    pub fired_spurious: Vec<Event>,
    /// FIRED by the worker's own unlock: not a fault.
    pub fired_released: usize,
    /// FIRED with Expired within ttl/10 of its ACQUIRED: the acquire's reply came after
    /// the validity measured from its send time had passed (say, a request that waited
    /// for a reconnect), so the guard was expired on arrival.
    pub fired_on_arrival: usize,
    pub abandoned: usize,
    pub errors: usize,
    pub keys_left: Vec<String>,
    /// From a worker's SIGKILL to the next ACQUIRED of the key it held, in ms.
    pub takeovers_ms: Vec<f64>,
    pub leads: Vec<Lead>,
    /// Overlaps explained by a freeze inside the check→leave window.
    pub overlaps_explained: usize,
    /// Fenced writes of a section (not probes) that the referee rejected.
    pub rejected_writes: usize,
    /// Tokens that fired with Lost or Expired.
    pub losses: usize,
    /// Section writes (`WROTE`) that returned after their guard's validity deadline,
    /// with no freeze of that worker between its check and the write.
    pub late_writes: Vec<Event>,
    /// The same, explained by a freeze of the worker between its check and the write.
    pub late_writes_explained: usize,
    /// Holders the referee saw enter with a token not above the last writer's, with no
    /// freeze of the entrant between its check and its entry (lines of the referee's
    /// `token_order_log`).
    pub token_order_unexplained: Vec<String>,
    /// The same, explained by such a freeze: the holder checked its guard, was frozen
    /// past its TTL while another writer took the lock, and entered on waking; its
    /// fenced write is then the stale one the referee rejects.
    pub token_order_explained: usize,
    /// The guarded data of workers run with `FW_EXEC`: writes `exec` accepted, refused
    /// and left uncertain, the stale ones, and the data counters read at the end (set by
    /// `Fleet::finish`).
    pub guarded: Guarded,
}

/// A guard in the log: its worker, key and fencing token.
type GuardId<'a> = (&'a str, &'a str, u64);

fn guard_of(event: &Event) -> GuardId<'_> {
    (&event.worker, event.key(), event.token())
}

impl Report {
    /// Builds the report from the log, the faults, the held locks noted and the
    /// referee's counts.
    pub fn build(
        label: &str,
        log: &Log,
        faults: &[FaultRecord],
        held: &[HeldLock],
        ttl_ms: u64,
        referee: RefereeReport,
        secs: f64,
    ) -> Report {
        let events = log.all();
        let mut report = Report {
            label: label.to_string(),
            secs,
            ..Report::default()
        };
        for fault in faults {
            *report
                .faults
                .entry(format!("{:?}", fault.kind))
                .or_default() += 1;
        }
        let mut acquired_at: HashMap<GuardId, u64> = HashMap::new();
        for e in events.iter().filter(|e| e.is("ACQUIRED")) {
            acquired_at.entry(guard_of(e)).or_insert(e.us);
        }
        for fired in events.iter().filter(|e| e.is("FIRED")) {
            let acquired_us = acquired_at.get(&guard_of(fired)).copied().unwrap_or(0);
            report.classify(fired, acquired_us, faults, ttl_ms);
        }
        report.losses = events.iter().filter(|e| e.is_loss()).count();
        (report.late_writes, report.late_writes_explained) = late_writes(&events, faults);
        report.abandoned = events.iter().filter(|e| e.is("ABANDONED")).count();
        report.rejected_writes = events
            .iter()
            .filter(|e| e.is("FENCED") && e.field(2) == "rejected" && e.field(3) == "write")
            .count();
        report.errors = events.iter().filter(|e| e.is("ERROR")).count();
        report.takeovers_ms = takeovers(&events, faults);
        report.leads = leads(&events, held, faults, ttl_ms);
        report.overlaps_explained = referee
            .violation_log
            .iter()
            .filter(|line| explained(line, &events, faults))
            .count();
        let (explained_order, unexplained_order): (Vec<&String>, Vec<&String>) = referee
            .token_order_log
            .iter()
            .partition(|line| explained(line, &events, faults));
        report.token_order_explained = explained_order.len();
        report.token_order_unexplained = unexplained_order.into_iter().cloned().collect();
        report.referee = referee;
        report
    }

    /// Counts a FIRED of a guard acquired at `acquired_us`: by unlock, expired on
    /// arrival, while a fault was aimed at its worker, or spurious.
    fn classify(&mut self, fired: &Event, acquired_us: u64, faults: &[FaultRecord], ttl_ms: u64) {
        let slack_us = (ttl_ms + 200) * 1000;
        if !fired.is_loss() {
            self.fired_released += 1;
        } else if fired.last() == "Expired" && fired.us < acquired_us + ttl_ms * 100 {
            self.fired_on_arrival += 1;
        } else if faults.iter().any(|f| {
            f.hits(&fired.worker) && f.start_us <= fired.us && fired.us <= f.end_us + slack_us
        }) {
            self.fired_expected += 1;
        } else {
            self.fired_spurious.push(fired.clone());
        }
    }

    /// The smallest, median and largest fire lead, in ms.
    pub fn lead_spread_ms(&self) -> Option<(f64, f64, f64)> {
        let mut leads: Vec<i64> = self.leads.iter().map(|l| l.lead_us).collect();
        leads.sort_unstable();
        let ms = |us: i64| us as f64 / 1000.0;
        Some((
            ms(*leads.first()?),
            ms(leads[leads.len() / 2]),
            ms(*leads.last()?),
        ))
    }

    /// The smallest and largest fire lead, in ms.
    pub fn lead_range_ms(&self) -> Option<(f64, f64)> {
        let ms = |us: i64| us as f64 / 1000.0;
        let min = self.leads.iter().map(|l| l.lead_us).min()?;
        let max = self.leads.iter().map(|l| l.lead_us).max()?;
        Some((ms(min), ms(max)))
    }
}

/// For each worker SIGKILLed while holding a lock: ms from the kill to the next ACQUIRED
/// of that key by another worker.
fn takeovers(events: &[Event], faults: &[FaultRecord]) -> Vec<f64> {
    let mut out = Vec::new();
    for fault in faults.iter().filter(|f| f.kind == FaultKind::KillWorker) {
        let Target::Worker(victim) = &fault.target else {
            continue;
        };
        let mine = |e: &&Event| &e.worker == victim && e.us <= fault.start_us;
        let Some(acquired) = events.iter().rev().filter(mine).find(|e| e.is("ACQUIRED")) else {
            continue;
        };
        let released = events.iter().filter(mine).any(|e| {
            e.is("RELEASED") && e.key() == acquired.key() && e.token() == acquired.token()
        });
        if released {
            continue;
        }
        if let Some(next) = events.iter().find(|e| {
            e.is("ACQUIRED")
                && e.key() == acquired.key()
                && &e.worker != victim
                && e.us > fault.start_us
        }) {
            out.push((next.us - fault.start_us) as f64 / 1000.0);
        }
    }
    out
}

/// For each held lock noted: the lead of the first loss FIRED of that guard after it
/// was noted (using the latest note before the FIRED). A guard whose worker was frozen
/// (SIGSTOP) between its `ACQUIRED` and its `FIRED` is left out: its token could not
/// fire, nor its worker act, until the thaw. So is a guard held while a Cluster master
/// was killed (`KillMaster`, until its replica took over): the promoted replica's TTL of
/// the key is the last one replicated, which can be a renewal (ttl/2) behind, the
/// failover hole the guarantees guide describes, and the watch cannot read the key
/// while its master is down. So is a guard expired on arrival (`Expired` within ttl/10
/// of its `ACQUIRED`, counted in `fired_on_arrival`): its token fired as its reply came,
/// the earliest it could, and a note of its key may predate the attempt that took it (a
/// resent request resets the key's TTL), so no lead of the library's is measured.
pub fn leads(
    events: &[Event],
    held: &[HeldLock],
    faults: &[FaultRecord],
    ttl_ms: u64,
) -> Vec<Lead> {
    let mut notes: HashMap<&str, Vec<&HeldLock>> = HashMap::new();
    for note in held {
        notes.entry(&note.id).or_default().push(note);
    }
    let mut fired: HashMap<GuardId, &Event> = HashMap::new();
    for loss in events.iter().filter(|e| e.is_loss()) {
        fired.entry(guard_of(loss)).or_insert(loss);
    }
    let mut out = Vec::new();
    for acquired in events.iter().filter(|e| e.is("ACQUIRED")) {
        let (Some(notes), Some(fired)) = (notes.get(acquired.id()), fired.get(&guard_of(acquired)))
        else {
            continue;
        };
        let frozen_or_failed_over = faults.iter().any(|f| {
            matches!(f.kind, FaultKind::FreezeWorker | FaultKind::KillMaster)
                && f.hits(&acquired.worker)
                && f.start_us <= fired.us
                && f.end_us >= acquired.us
        });
        let on_arrival = fired.last() == "Expired" && fired.us < acquired.us + ttl_ms * 100;
        if frozen_or_failed_over || on_arrival {
            continue;
        }
        let note = notes
            .iter()
            .filter(|h| h.read_us <= fired.us && fired.us <= h.expiry_us + ttl_ms * 1000)
            .max_by_key(|h| h.read_us);
        if let Some(note) = note {
            out.push(Lead {
                worker: fired.worker.clone(),
                key: fired.key().to_string(),
                reason: fired.last().to_string(),
                lead_us: note.expiry_us as i64 - fired.us as i64,
                read_us: note.read_us,
                fired_us: fired.us,
            });
        }
    }
    out
}

/// The section writes (`WROTE <us> <key> <token> <left_us>`) that returned after their
/// guard's deadline (`left_us` < 0), not explained by a freeze of the worker between
/// its `CHECKED` and the write; and how many were.
fn late_writes(events: &[Event], faults: &[FaultRecord]) -> (Vec<Event>, usize) {
    let checked: HashMap<GuardId, u64> = events
        .iter()
        .filter(|e| e.is("CHECKED"))
        .map(|e| (guard_of(e), e.us))
        .collect();
    let (mut late, mut explained) = (Vec::new(), 0);
    for wrote in events.iter().filter(|e| e.is("WROTE")) {
        if !wrote.field(2).parse::<i64>().is_ok_and(|left| left < 0) {
            continue;
        }
        let from = checked.get(&guard_of(wrote)).copied().unwrap_or(0);
        let frozen = faults.iter().any(|f| {
            f.kind == FaultKind::FreezeWorker
                && f.hits(&wrote.worker)
                && f.start_us <= wrote.us
                && f.end_us >= from
        });
        if frozen {
            explained += 1;
        } else {
            late.push(wrote.clone());
        }
    }
    (late, explained)
}

/// Whether an overlap (`<us> <key> <worker>/<mode> entered while inside: a/w,b/r`), or
/// an entry out of token order (`<us> <key> <worker>/<mode> token T not above writer
/// token W`), is explained by a freeze of one of the workers involved between its check
/// (`CHECKED`) and the entry.
///
/// `<us>` is the entrant's own clock when it sent its registration; the referee judges
/// the entry when the registration arrives. An entrant frozen right after stamping it
/// (while the request was on its way) is judged only after it thaws, so for the entrant
/// the freeze may begin up to its first event after `<us>` (its `ENTERED`, or whatever
/// it logs on waking); a worker already inside must have been frozen by `<us>`.
fn explained(line: &str, events: &[Event], faults: &[FaultRecord]) -> bool {
    let mut words = line.split_whitespace();
    let at: u64 = words.next().and_then(|us| us.parse().ok()).unwrap_or(0);
    let key = words.next().unwrap_or("");
    let mut involved: Vec<(&str, u64)> = Vec::new();
    if let Some(entrant) = words.next() {
        let entrant = entrant.split('/').next().unwrap_or("");
        let answered = events
            .iter()
            .filter(|e| e.worker == entrant && e.us >= at)
            .map(|e| e.us)
            .min()
            .unwrap_or(u64::MAX);
        involved.push((entrant, answered));
    }
    if let Some(inside) = line.split("inside: ").nth(1) {
        involved.extend(
            inside
                .split(',')
                .map(|w| (w.split('/').next().unwrap_or(""), at)),
        );
    }
    involved.iter().any(|&(worker, frozen_by)| {
        let checked = events
            .iter()
            .filter(|e| e.worker == worker && e.is("CHECKED") && e.key() == key && e.us <= at)
            .map(|e| e.us)
            .max()
            .unwrap_or(0);
        faults.iter().any(|f| {
            f.kind == FaultKind::FreezeWorker
                && f.hits(worker)
                && f.start_us <= frozen_by
                && f.end_us >= checked
        })
    })
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.referee;
        writeln!(f, "== fault report: {} ({:.1} s)", self.label, self.secs)?;
        writeln!(
            f,
            "   sections completed {} (writer {}), abandoned {}, errors {}",
            r.sections, r.writes, self.abandoned, self.errors
        )?;
        writeln!(f, "   faults injected    {:?}", self.faults)?;
        writeln!(
            f,
            "   tokens fired       expected {}, spurious {}, expired on arrival {}, by unlock {}",
            self.fired_expected,
            self.fired_spurious.len(),
            self.fired_on_arrival,
            self.fired_released
        )?;
        for event in &self.fired_spurious {
            writeln!(f, "     spurious: {event:?}")?;
        }
        writeln!(
            f,
            "   overlaps           {} (explained by a freeze inside check→leave: {})",
            r.violations, self.overlaps_explained
        )?;
        for line in &r.violation_log {
            writeln!(f, "     overlap: {line}")?;
        }
        writeln!(f, "   lost updates       {}", r.lost_updates)?;
        writeln!(
            f,
            "   fenced writes      accepted {}, stale rejected {} (of them section writes {}), \
             stale accepted {}, tokens out of order {}",
            r.accepted, r.stale_rejected, self.rejected_writes, r.stale_accepted, r.token_order
        )?;
        for line in &r.stale_accepted_log {
            writeln!(f, "     stale accepted: {line}")?;
        }
        if !r.token_order_log.is_empty() {
            writeln!(
                f,
                "   tokens out of order explained by a freeze inside check→enter: {}",
                self.token_order_explained
            )?;
        }
        for line in &r.token_order_log {
            writeln!(f, "     token order: {line}")?;
        }
        if self.guarded.used() {
            write!(f, "{}", self.guarded)?;
        }
        writeln!(f, "   keys left after TTL {:?}", self.keys_left)?;
        writeln!(f, "   takeover latency   {:?} ms", self.takeovers_ms)?;
        writeln!(
            f,
            "   writes after deadline {} (after a freeze inside check→write: {})",
            self.late_writes.len(),
            self.late_writes_explained
        )?;
        for event in &self.late_writes {
            writeln!(f, "     late write: {event:?}")?;
        }
        match self.lead_spread_ms() {
            Some((min, p50, max)) => writeln!(
                f,
                "   fire lead          {} of {} tokens fired as lost, min {min:.1} ms, \
                 p50 {p50:.1} ms, max {max:.1} ms",
                self.leads.len(),
                self.losses
            ),
            None => writeln!(f, "   fire lead          (none measured)"),
        }
    }
}
