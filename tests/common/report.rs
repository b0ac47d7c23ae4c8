//! What a fault run measured: faults injected, tokens fired, the referee's verdict,
//! keys left behind, takeover latency and how far ahead of the server's expiry tokens
//! fired.

use std::collections::BTreeMap;
use std::fmt;

use super::events::{Event, Log};
use super::record::{FaultKind, FaultRecord, HeldLock, Target};
use super::referee::RefereeReport;

/// How far ahead of its key's expiry on the server a guard's token fired.
#[derive(Debug, Clone)]
pub struct Lead {
    pub worker: String,
    pub key: String,
    pub reason: String,
    /// Expiry minus the FIRED time, in µs; must be positive.
    pub lead_us: i64,
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
        let slack_us = (ttl_ms + 200) * 1000;
        for fired in events.iter().filter(|e| e.is("FIRED")) {
            let acquired_us = events
                .iter()
                .find(|e| {
                    e.is("ACQUIRED")
                        && e.worker == fired.worker
                        && e.key() == fired.key()
                        && e.token() == fired.token()
                })
                .map_or(0, |e| e.us);
            if !fired.is_loss() {
                report.fired_released += 1;
            } else if fired.last() == "Expired" && fired.us < acquired_us + ttl_ms * 100 {
                report.fired_on_arrival += 1;
            } else if faults.iter().any(|f| {
                f.hits(&fired.worker) && f.start_us <= fired.us && fired.us <= f.end_us + slack_us
            }) {
                report.fired_expected += 1;
            } else {
                report.fired_spurious.push(fired.clone());
            }
        }
        report.abandoned = events.iter().filter(|e| e.is("ABANDONED")).count();
        report.rejected_writes = events
            .iter()
            .filter(|e| e.is("FENCED") && e.field(2) == "rejected" && e.field(3) == "write")
            .count();
        report.errors = events.iter().filter(|e| e.is("ERROR")).count();
        report.takeovers_ms = takeovers(&events, faults);
        report.leads = leads(&events, held, ttl_ms);
        report.overlaps_explained = referee
            .violation_log
            .iter()
            .filter(|line| explained(line, &events, faults))
            .count();
        report.referee = referee;
        report
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
/// was noted (using the latest note before the FIRED).
fn leads(events: &[Event], held: &[HeldLock], ttl_ms: u64) -> Vec<Lead> {
    let mut out = Vec::new();
    for acquired in events.iter().filter(|e| e.is("ACQUIRED")) {
        let notes: Vec<&HeldLock> = held.iter().filter(|h| h.id == acquired.id()).collect();
        if notes.is_empty() {
            continue;
        }
        let fired = events.iter().find(|e| {
            e.is_loss()
                && e.worker == acquired.worker
                && e.key() == acquired.key()
                && e.token() == acquired.token()
        });
        let Some(fired) = fired else { continue };
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
            });
        }
    }
    out
}

/// Whether an overlap (`<us> <key> <worker>/<mode> entered while inside: a/w,b/r`) is
/// explained by a freeze of one of the workers involved between its check
/// (`CHECKED`) and the overlap.
fn explained(line: &str, events: &[Event], faults: &[FaultRecord]) -> bool {
    let mut words = line.split_whitespace();
    let at: u64 = words.next().and_then(|us| us.parse().ok()).unwrap_or(0);
    let key = words.next().unwrap_or("");
    let mut involved: Vec<&str> = Vec::new();
    if let Some(entrant) = words.next() {
        involved.push(entrant.split('/').next().unwrap_or(""));
    }
    if let Some(inside) = line.split("inside: ").nth(1) {
        involved.extend(inside.split(',').map(|w| w.split('/').next().unwrap_or("")));
    }
    involved.iter().any(|worker| {
        let checked = events
            .iter()
            .filter(|e| &e.worker == worker && e.is("CHECKED") && e.key() == key && e.us <= at)
            .map(|e| e.us)
            .max()
            .unwrap_or(0);
        faults.iter().any(|f| {
            f.kind == FaultKind::FreezeWorker
                && f.hits(worker)
                && f.start_us <= at
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
        for line in &r.token_order_log {
            writeln!(f, "     token order: {line}")?;
        }
        writeln!(f, "   keys left after TTL {:?}", self.keys_left)?;
        writeln!(f, "   takeover latency   {:?} ms", self.takeovers_ms)?;
        match self.lead_range_ms() {
            Some((min, max)) => writeln!(
                f,
                "   fire lead          {} tokens, min {min:.1} ms, max {max:.1} ms",
                self.leads.len()
            ),
            None => writeln!(f, "   fire lead          (none measured)"),
        }
    }
}
