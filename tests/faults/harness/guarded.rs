//! The guarded data of the fault workers run with `FW_EXEC` (`examples/fault_worker.rs`):
//! per lock key, the writes of its data counter (`<lock key>:data`, on the lock server)
//! that `WriteGuard::exec` accepted, refused (`NotHeld`) or left uncertain (an error: the
//! pipeline may or may not have run), and the counter read at the end. Written only by
//! guarded read-modify-writes, the counter equals the accepted writes plus those of the
//! uncertain ones that ran: below the accepted writes, an accepted update was lost; above
//! them and the uncertain ones, a write ran that was not counted.
//!
//! It also finds the stale writes, which `exec` must refuse: an exec begun after its
//! worker was frozen (SIGSTOP) for longer than the TTL (+ 200 ms for a refresh on its
//! way), the freeze having begun after the guard's `ACQUIRED` (the guard's validity
//! deadline passed during the freeze and its key expired on the server); or begun after
//! its worker's lock key was deleted on the lock server ([`FaultKind::DeleteLockKey`],
//! begun after the guard's `ACQUIRED`; the worker holds one key at a time).
//!
//! A section whose worker was SIGKILLed after its guarded read and before its write was
//! reported counts one uncertain write: the write may have been on the wire.
//!
//! And it tells who refused: the guard itself, before sending (its deadline had
//! passed or its token had fired), or the server, whose exec script found the lock key
//! not held (an `EXEC` whose guard had no cancel reason when the call began and `Lost`
//! after it: [`Event::refused_by_server`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::common::events::Event;
use crate::common::record::{FaultKind, FaultRecord, Target};

/// One lock key's guarded data.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyData {
    /// Writes (section writes and probes) `exec` accepted.
    pub accepted: i64,
    /// Writes `exec` refused with `NotHeld`: nothing ran.
    pub refused: i64,
    /// Writes that failed otherwise: the pipeline may or may not have run.
    pub uncertain: i64,
    /// The data counter read on the lock server at the end (0 when unset).
    pub counter: i64,
}

/// What `exec` did to the guarded data over a run.
#[derive(Debug, Clone, Default)]
pub struct Guarded {
    /// Per lock key.
    pub keys: BTreeMap<String, KeyData>,
    /// Reads of a data counter: accepted, refused, failed.
    pub reads: (usize, usize, usize),
    /// Section writes (after `CHECKED`, not probes) that `exec` refused.
    pub refused_writes: usize,
    /// Writes (section writes and probes) the server refused: the guard sent them, the
    /// exec script found the lock key not held ([`Event::refused_by_server`]). The
    /// others were refused by the guard before sending, but for a server refusal whose
    /// token fired `Expired` while the request was on its way, which the events cannot
    /// tell apart.
    pub server_refused: usize,
    /// Stale writes (see the module doc) `exec` refused.
    pub stale_refused: usize,
    /// Stale writes `exec` accepted or left uncertain: each a broken promise.
    pub stale_not_refused: Vec<Event>,
}

impl Guarded {
    /// Counts the `EXEC` events of `events`, judges the stale ones against the freezes of
    /// `faults` at a TTL of `ttl_ms`, and takes `counters` (lock key → data counter) as
    /// read on the lock server at the end.
    pub fn build(
        events: &[Event],
        faults: &[FaultRecord],
        ttl_ms: u64,
        counters: &[(String, i64)],
    ) -> Guarded {
        let mut guarded = Guarded::default();
        let mut acquired: HashMap<(&str, &str, u64), u64> = HashMap::new();
        for e in events.iter().filter(|e| e.is("ACQUIRED")) {
            acquired
                .entry((&e.worker, e.key(), e.token()))
                .or_insert(e.us);
        }
        for exec in events.iter().filter(|e| e.is("EXEC")) {
            let verdict = exec.verdict();
            if exec.exec_what() == "read" {
                let reads = &mut guarded.reads;
                match verdict {
                    "accepted" => reads.0 += 1,
                    "refused" => reads.1 += 1,
                    _ => reads.2 += 1,
                }
                continue;
            }
            let data = guarded.keys.entry(exec.key().to_string()).or_default();
            match verdict {
                "accepted" => data.accepted += 1,
                "refused" => data.refused += 1,
                _ => data.uncertain += 1,
            }
            if verdict == "refused" && exec.exec_what() == "write" {
                guarded.refused_writes += 1;
            }
            guarded.server_refused += usize::from(exec.refused_by_server());
            let since = acquired.get(&(&exec.worker, exec.key(), exec.token()));
            if since.is_some_and(|&since| stale(exec, since, faults, ttl_ms)) {
                match verdict {
                    "refused" => guarded.stale_refused += 1,
                    _ => guarded.stale_not_refused.push(exec.clone()),
                }
            }
        }
        for key in killed_mid_section(events, faults) {
            guarded.keys.entry(key).or_default().uncertain += 1;
        }
        for (key, counter) in counters {
            guarded.keys.entry(key.clone()).or_default().counter = *counter;
        }
        guarded
    }

    /// Whether any worker used `exec` on the data counters.
    pub fn used(&self) -> bool {
        !self.keys.is_empty() || self.reads != (0, 0, 0)
    }

    /// Writes accepted, refused and uncertain, and the counters, summed over the keys.
    pub fn totals(&self) -> KeyData {
        let mut total = KeyData::default();
        for data in self.keys.values() {
            total.accepted += data.accepted;
            total.refused += data.refused;
            total.uncertain += data.uncertain;
            total.counter += data.counter;
        }
        total
    }

    /// The keys whose counter is below their accepted writes (an accepted update lost),
    /// as `key: counter C, accepted A, uncertain U`.
    pub fn lost(&self) -> Vec<String> {
        self.described(|d| d.counter < d.accepted)
    }

    /// The keys whose counter is above their accepted and uncertain writes together (a
    /// write ran that no worker counted).
    pub fn uncounted(&self) -> Vec<String> {
        self.described(|d| d.counter > d.accepted + d.uncertain)
    }

    fn described(&self, pred: impl Fn(&KeyData) -> bool) -> Vec<String> {
        let wrong = self.keys.iter().filter(|(_, d)| pred(d));
        wrong
            .map(|(key, d)| {
                format!(
                    "{key}: counter {}, accepted {}, uncertain {}",
                    d.counter, d.accepted, d.uncertain
                )
            })
            .collect()
    }
}

/// The lock keys of the sections that a `KillWorker` fault cut short after their guarded
/// read and before their `EXEC` write was reported: that write may have run (a worker
/// SIGKILLed with its exec on the wire), so it is uncertain, as an exec that failed is.
fn killed_mid_section(events: &[Event], faults: &[FaultRecord]) -> Vec<String> {
    let mut keys = Vec::new();
    for fault in faults.iter().filter(|f| f.kind == FaultKind::KillWorker) {
        let Target::Worker(name) = &fault.target else {
            continue;
        };
        let last = events
            .iter()
            .rfind(|e| &e.worker == name && e.is("ACQUIRED") && e.us <= fault.start_us);
        let Some(section) = last else {
            continue;
        };
        let ours = |e: &&Event| {
            &e.worker == name
                && e.is("EXEC")
                && e.key() == section.key()
                && e.token() == section.token()
        };
        let read = events.iter().filter(ours).any(|e| e.exec_what() == "read");
        let wrote = events.iter().filter(ours).any(|e| e.exec_what() != "read");
        if read && !wrote {
            keys.push(section.key().to_string());
        }
    }
    keys
}

/// Whether `exec` (an `EXEC` of a guard acquired at `acquired_us`) began after its
/// worker thawed from a freeze past the TTL (+ 200 ms), or after its lock key was
/// deleted, either begun after the acquire.
fn stale(exec: &Event, acquired_us: u64, faults: &[FaultRecord], ttl_ms: u64) -> bool {
    let begun: u64 = exec.field(2).parse().unwrap_or(0);
    faults.iter().any(|f| {
        let long_freeze =
            f.kind == FaultKind::FreezeWorker && f.end_us - f.start_us >= (ttl_ms + 200) * 1000;
        (long_freeze || f.kind == FaultKind::DeleteLockKey)
            && f.hits(&exec.worker)
            && f.start_us >= acquired_us
            && begun >= f.end_us
    })
}

impl fmt::Display for Guarded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.totals();
        writeln!(
            f,
            "   exec writes        accepted {}, refused {} (by the guard before sending {}, \
             by the server {}; section writes {}, stale after a freeze past the TTL or a \
             deleted lock key {}), uncertain {}; stale not refused {}",
            t.accepted,
            t.refused,
            t.refused - self.server_refused as i64,
            self.server_refused,
            self.refused_writes,
            self.stale_refused,
            t.uncertain,
            self.stale_not_refused.len()
        )?;
        for event in &self.stale_not_refused {
            writeln!(f, "     stale exec not refused: {event:?}")?;
        }
        writeln!(
            f,
            "   guarded data       counters {} (lost {:?}, uncounted {:?}); reads accepted {}, \
             refused {}, failed {}",
            t.counter,
            self.lost(),
            self.uncounted(),
            self.reads.0,
            self.reads.1,
            self.reads.2
        )
    }
}
