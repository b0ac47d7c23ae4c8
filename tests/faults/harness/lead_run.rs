//! A run that measures many fire leads (`tests/faults/leads.rs`): slow holders, each
//! on a lock key of its own in the worker's hold mode, beside two quick workers, under
//! one fault repeated until enough tokens that fired as lost have had their lead
//! measured (see `report::leads`), or a time bound passes. Before each fault it waits
//! until every holder holds its lock again, then a random part of a TTL, so that the
//! faults fall at every point of the renewal cycle.

use std::time::{Duration, Instant};

use super::fault_checks::{ms, TTL_MS};
use super::fleet::{Fleet, Spec};
use super::mixes::between;
use super::report::{leads, Report};
use crate::common::crew::Crew;
use crate::common::events::now_us;
use crate::common::record::HeldLock;

/// How long a holder holds each lock it takes: the sections it starts before a fault
/// outlast the TTL that fault waits for, so its token fires inside the section.
pub const HOLD_MS: u64 = 3000;

/// The holders of a run.
pub const HOLDERS: usize = 16;

/// How many keys the two quick workers share: `k<first>`, `k<first + 1>`.
pub const QUICK_KEYS: u64 = 2;

/// A quick worker on keys `k<first>` .. `k<first + 1>`: sections of 0–2 ms, 30 %
/// readers, writers with the lock intent, acting only with 50 ms of validity left.
pub fn quick(first: u64) -> Spec {
    Spec {
        keys: QUICK_KEYS,
        read_pct: 30,
        work_ms: (0, 2),
        intent: true,
        margin_ms: 50,
        first_key: first,
        ..Spec::default()
    }
}

/// A holder of key `k<key>` alone, holding each lock for [`HOLD_MS`].
pub fn holder(key: u64) -> Spec {
    Spec {
        keys: 1,
        first_key: key,
        hold_ms: Some(HOLD_MS),
        ..Spec::default()
    }
}

/// Starts quick workers `q0`, `q1` on keys from `quick_first`, and a holder `h<i>` on
/// each of `holder_keys`; the holders' names.
pub async fn spawn_workers(
    fleet: &mut impl Fleet,
    quick_first: u64,
    holder_keys: &[u64],
) -> Vec<String> {
    for n in 0..2 {
        fleet.spawn(&format!("q{n}"), &quick(quick_first)).await;
    }
    let mut names = Vec::new();
    for (i, &key) in holder_keys.iter().enumerate() {
        let name = format!("h{i}");
        fleet.spawn(&name, &holder(key)).await;
        names.push(name);
    }
    names
}

/// The fault repeated, the leads wanted, and the notes of each key's expiry so far.
pub struct LeadRun {
    /// How many leads the run measures at least, unless [`bound`](Self::bound) passes.
    pub want: usize,
    /// How long the run may go on.
    pub bound: Duration,
    holders: Vec<String>,
    /// Locks noted held as each fault began, with their expiry then: exact, so that a
    /// lead is never measured against an expiry a renewal moved later since.
    notes: Vec<HeldLock>,
    /// The fleet's TTL (set by [`repeat`](Self::repeat)).
    ttl_ms: u64,
    started: Instant,
}

impl LeadRun {
    /// A run of the holders `holders`.
    pub fn new(want: usize, bound: Duration, holders: Vec<String>) -> Self {
        LeadRun {
            want,
            bound,
            holders,
            notes: Vec::new(),
            ttl_ms: TTL_MS,
            started: Instant::now(),
        }
    }

    /// Runs `fault` (which returns the locks it noted held as it began) again
    /// and again, each time once every holder holds again and a random part of half a
    /// TTL later, until [`want`](Self::want) leads are measured or the bound passes.
    pub async fn repeat<F: Fleet>(
        &mut self,
        fleet: &mut F,
        mut fault: impl AsyncFnMut(&mut F) -> Vec<HeldLock>,
    ) {
        self.ttl_ms = fleet.ttl_ms();
        self.started = Instant::now();
        let mut since = 0;
        while self.measured(fleet.crew()) < self.want && self.started.elapsed() < self.bound {
            wait_holding(fleet.crew(), &self.holders, since, ms(HOLD_MS + 1000)).await;
            tokio::time::sleep(ms(between(0, self.ttl_ms / 2))).await;
            let noted = fault(fleet).await;
            self.notes.extend(noted);
            since = now_us();
        }
    }

    /// How many leads the events and faults of `crew` give so far.
    fn measured(&self, crew: &Crew) -> usize {
        leads(&crew.log.all(), &self.notes, &crew.faults, self.ttl_ms).len()
    }

    /// Sets `report`'s leads: measured on the notes taken as the faults began, on the
    /// events and faults of `crew`.
    pub fn measure(self, report: &mut Report, crew: &Crew) {
        report.leads = leads(&crew.log.all(), &self.notes, &crew.faults, self.ttl_ms);
    }
}

/// Waits (up to `bound`) until each of `holders` has begun a hold (`HOLDING`) after
/// `since_us`.
async fn wait_holding(crew: &Crew, holders: &[String], since_us: u64, bound: Duration) {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        let holding = crew.log.filter(|e| e.is("HOLDING") && e.us > since_us);
        if holders
            .iter()
            .all(|h| holding.iter().any(|e| &e.worker == h))
        {
            return;
        }
        tokio::time::sleep(ms(20)).await;
    }
}
