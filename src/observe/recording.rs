//! [`Meters`] with the feature `metrics`: each record goes to the recorder installed now
//! (a thread's local one, else the global one, else none), as the `metrics` macros do.
//! The keys are made once per handle, so a record costs a look-up in the recorder and,
//! with no recorder installed, a load and a call that does nothing.

use std::array;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use metrics::{Key, Label, Level, Metadata, Unit};

use super::{Exec, Outcome, Refreshed};
use crate::mode::Kind;
use crate::reason::CancelReason;

/// `redismutex_acquire_duration_seconds{kind, outcome}`: histogram of how long each
/// request took, from its start to its guard or its error, in seconds.
pub(crate) const ACQUIRE_DURATION: &str = "redismutex_acquire_duration_seconds";
/// `redismutex_held_duration_seconds{kind}`: histogram of how long each lock was held,
/// from its acquisition to its end (release, loss, expiry, cancel), in seconds.
pub(crate) const HELD_DURATION: &str = "redismutex_held_duration_seconds";
/// `redismutex_lost_total{kind, reason}`: counter of locks that ended without their
/// holder giving them up; `reason` is `lost`, `expired`, `max_hold` or `clock_jump`.
pub(crate) const LOST: &str = "redismutex_lost_total";
/// `redismutex_refresh_total{outcome}`: counter of lock renewals; `outcome` is `ok`,
/// `lost` or `error`.
pub(crate) const REFRESH: &str = "redismutex_refresh_total";
/// `redismutex_exec_total{outcome}`: counter of guarded pipelines (`WriteGuard::exec`) that got
/// an answer; `outcome` is `ran`, `not_held`, `failed` or `error`.
pub(crate) const EXEC: &str = "redismutex_exec_total";
/// `redismutex_held{kind}`: gauge of the locks held now.
pub(crate) const HELD: &str = "redismutex_held";
/// `redismutex_waiting{kind}`: gauge of the waiting requests (`write`, `read`,
/// `acquire`) in progress now.
pub(crate) const WAITING: &str = "redismutex_waiting";
/// `redismutex_server_clock_jumps_total{direction}`: counter of the times a renewal saw
/// the server's clock (`TIME`) move beyond this process's monotonic clock since the last
/// renewal by more than the drift margin; `direction` is `forward` or `back`.
pub(crate) const CLOCK_JUMPS: &str = "redismutex_server_clock_jumps_total";
/// `redismutex_node_errors_total{node}`: counter of a quorum node's calls that failed
/// or got no answer within the per-node bound; `node` is its index in the quorum.
pub(crate) const NODE_ERRORS: &str = "redismutex_node_errors_total";

/// The `kind` label values, by [`index`]; the last, [`SET`], a set of locks
/// (`lock_all`), whose keys are each counted as held under their own kind.
const KINDS: [&str; 5] = [
    Kind::Write.label(),
    Kind::Read.label(),
    Kind::Permit(1).label(),
    Kind::Upgradable.label(),
    SET_LABEL,
];
/// The `kind` label of a set request ([`Meters::request_set`]).
const SET_LABEL: &str = "set";
/// The index of [`SET_LABEL`] in [`KINDS`].
const SET: usize = 4;
/// The `outcome` label values of [`ACQUIRE_DURATION`], by [`Outcome`] index.
const OUTCOMES: [Outcome; 5] = [
    Outcome::Acquired,
    Outcome::Busy,
    Outcome::Timeout,
    Outcome::Cancelled,
    Outcome::Error,
];
/// The `reason` label values of [`LOST`].
const LOSSES: [&str; 4] = ["lost", "expired", "max_hold", "clock_jump"];
/// The `direction` label values of [`CLOCK_JUMPS`]: forward, back.
const DIRECTIONS: [&str; 2] = ["forward", "back"];
/// The `outcome` label values of [`REFRESH`], by [`Refreshed`] index.
const RENEWALS: [&str; 3] = ["ok", "lost", "error"];
/// The `outcome` label values of [`EXEC`], by [`Exec`] index.
const EXECS: [&str; 4] = ["ran", "not_held", "failed", "error"];

/// Where every record says it comes from (a recorder may filter on it).
static METADATA: Metadata<'static> = Metadata::new("redismutex", Level::INFO, Some("redismutex"));

/// Describes every metric of the crate to the recorder installed now (the thread's local
/// recorder if one is set, else the global one): its unit and what it counts, which an
/// exporter shows (Prometheus's `# HELP` lines). Optional: the metrics are recorded
/// without it. Call it after installing the recorder; the
/// [metrics guide](crate::guide::metrics) lists the metrics.
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub fn describe() {
    metrics::with_recorder(|recorder| {
        let histograms = [
            (
                ACQUIRE_DURATION,
                "How long a lock or permit request took, by outcome.",
            ),
            (
                HELD_DURATION,
                "How long a lock or permit was held, however it ended.",
            ),
        ];
        for (name, text) in histograms {
            recorder.describe_histogram(name.into(), Some(Unit::Seconds), text.into());
        }
        let counters = [
            (
                LOST,
                "Locks and permits that ended without their holder giving them up.",
            ),
            (REFRESH, "Lock and permit renewals, by outcome."),
            (
                CLOCK_JUMPS,
                "Renewals that saw the server's clock jump, by direction.",
            ),
            (
                EXEC,
                "Guarded pipelines (exec) that got an answer, by outcome.",
            ),
            (
                NODE_ERRORS,
                "A quorum node's calls that failed or got no answer in time.",
            ),
        ];
        for (name, text) in counters {
            recorder.describe_counter(name.into(), Some(Unit::Count), text.into());
        }
        let gauges = [
            (HELD, "Locks and permits held now."),
            (WAITING, "Waiting lock and permit requests in progress now."),
        ];
        for (name, text) in gauges {
            recorder.describe_gauge(name.into(), Some(Unit::Count), text.into());
        }
    });
}

/// A handle's meters: the keys of its metrics, with its `name` label if it has one.
#[derive(Clone)]
pub(crate) struct Meters(Arc<Keys>);

/// Every key a handle records under, made once.
struct Keys {
    acquire: [[Key; OUTCOMES.len()]; KINDS.len()],
    held_duration: [Key; KINDS.len()],
    held: [Key; KINDS.len()],
    waiting: [Key; KINDS.len()],
    lost: [[Key; LOSSES.len()]; KINDS.len()],
    refresh: [Key; RENEWALS.len()],
    exec: [Key; EXECS.len()],
    clock_jumps: [Key; DIRECTIONS.len()],
    /// The `name` label, when the handle has one.
    name: Option<Label>,
}

impl Meters {
    /// The meters of a handle, labelled `name` = `name` when it is given.
    pub(crate) fn new(name: Option<&str>) -> Self {
        let name = name.map(|name| Label::new("name", name.to_owned()));
        let key = |metric: &'static str, labels: &[(&'static str, &'static str)]| {
            let labels = labels
                .iter()
                .map(|&(label, value)| Label::from_static_parts(label, value))
                .chain(name.clone());
            Key::from_parts(metric, labels.collect::<Vec<_>>())
        };
        let by_kind = |metric| array::from_fn(|k| key(metric, &[("kind", KINDS[k])]));
        Self(Arc::new(Keys {
            acquire: array::from_fn(|k| {
                array::from_fn(|o| {
                    key(
                        ACQUIRE_DURATION,
                        &[("kind", KINDS[k]), ("outcome", OUTCOMES[o].label())],
                    )
                })
            }),
            held_duration: by_kind(HELD_DURATION),
            held: by_kind(HELD),
            waiting: by_kind(WAITING),
            lost: array::from_fn(|k| {
                array::from_fn(|r| key(LOST, &[("kind", KINDS[k]), ("reason", LOSSES[r])]))
            }),
            refresh: array::from_fn(|r| key(REFRESH, &[("outcome", RENEWALS[r])])),
            exec: array::from_fn(|e| key(EXEC, &[("outcome", EXECS[e])])),
            clock_jumps: array::from_fn(|d| key(CLOCK_JUMPS, &[("direction", DIRECTIONS[d])])),
            name: name.clone(),
        }))
    }

    /// Starts timing a request of `kind`; a request that `waits` counts in
    /// `redismutex_waiting` until it ends.
    pub(crate) fn request(&self, kind: Kind, waits: bool) -> Timed {
        self.timed(index(kind), waits)
    }

    /// Starts timing a set request (`lock_all`, `kind` label `set`), as
    /// [`request`](Self::request) does.
    pub(crate) fn request_set(&self, waits: bool) -> Timed {
        self.timed(SET, waits)
    }

    /// Starts timing a request whose `kind` label is `KINDS[kind]`.
    fn timed(&self, kind: usize, waits: bool) -> Timed {
        if waits {
            gauge(&self.0.waiting[kind], 1.0);
        }
        Timed {
            meters: self.clone(),
            kind,
            waits,
            since: Instant::now(),
            finished: false,
        }
    }

    /// A lock of `kind` acquired now: counted in `redismutex_held` until [`HeldMetric::end`].
    pub(crate) fn held(&self, kind: Kind) -> HeldMetric {
        let kind = index(kind);
        gauge(&self.0.held[kind], 1.0);
        HeldMetric {
            of: Some((self.clone(), kind, Instant::now())),
        }
    }

    /// One lock's renewal found `renewed`.
    pub(crate) fn renewed(&self, renewed: Refreshed) {
        let at = match renewed {
            Refreshed::Ok => 0,
            Refreshed::Lost => 1,
            Refreshed::Error => 2,
        };
        counter(&self.0.refresh[at]);
    }

    /// One guarded pipeline found `exec`.
    pub(crate) fn exec(&self, exec: Exec) {
        let at = match exec {
            Exec::Ran => 0,
            Exec::NotHeld => 1,
            Exec::Failed => 2,
            Exec::Error => 3,
        };
        counter(&self.0.exec[at]);
    }

    /// A renewal saw the server's clock jump, `forward` or back.
    pub(crate) fn clock_jump(&self, forward: bool) {
        counter(&self.0.clock_jumps[usize::from(!forward)]);
    }

    /// A call to the quorum's node at index `node` failed or got no answer in time.
    pub(crate) fn node_error(&self, node: usize) {
        let labels = [Label::new("node", node.to_string())]
            .into_iter()
            .chain(self.0.name.clone());
        counter(&Key::from_parts(NODE_ERRORS, labels.collect::<Vec<_>>()));
    }
}

impl Default for Meters {
    fn default() -> Self {
        Self::new(None)
    }
}

impl fmt::Debug for Meters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Meters")
            .field("name", &self.0.name.as_ref().map(Label::value))
            .finish()
    }
}

/// A request in progress: recorded as [`Outcome::Cancelled`] if dropped unfinished.
#[derive(Debug)]
pub(crate) struct Timed {
    meters: Meters,
    kind: usize,
    waits: bool,
    since: Instant,
    finished: bool,
}

impl Timed {
    /// The request ended with `outcome`.
    pub(crate) fn finish(mut self, outcome: Outcome) {
        self.record(outcome);
    }

    fn record(&mut self, outcome: Outcome) {
        self.finished = true;
        let keys = &self.meters.0;
        if self.waits {
            gauge(&keys.waiting[self.kind], -1.0);
        }
        let at = OUTCOMES.iter().position(|&o| o == outcome).unwrap_or(0);
        let waited = self.since.elapsed().as_secs_f64();
        metrics::with_recorder(|recorder| {
            recorder
                .register_histogram(&keys.acquire[self.kind][at], &METADATA)
                .record(waited);
        });
    }
}

impl Drop for Timed {
    fn drop(&mut self) {
        if !self.finished {
            self.record(Outcome::Cancelled);
        }
    }
}

/// A held lock, counted in `redismutex_held` until its end; none for a nested guard,
/// which holds no lock of its own.
#[derive(Debug, Default)]
pub(crate) struct HeldMetric {
    of: Option<(Meters, usize, Instant)>,
}

impl HeldMetric {
    /// The lock ended (released, lost, expired or cancelled): its time is recorded and
    /// it leaves `redismutex_held`. Called once, by whoever claims the lock's end.
    pub(crate) fn end(&self) {
        let Some((meters, kind, since)) = &self.of else {
            return;
        };
        gauge(&meters.0.held[*kind], -1.0);
        let held = since.elapsed().as_secs_f64();
        metrics::with_recorder(|recorder| {
            recorder
                .register_histogram(&meters.0.held_duration[*kind], &METADATA)
                .record(held);
        });
    }

    /// The lock's token fired first with `reason`: counted when the lock was lost or
    /// expired.
    pub(crate) fn lost(&self, reason: CancelReason) {
        let Some((meters, kind, _)) = &self.of else {
            return;
        };
        let at = match reason {
            CancelReason::Lost => 0,
            CancelReason::Expired => 1,
            CancelReason::MaxHold => 2,
            CancelReason::ClockJump => 3,
            _ => return,
        };
        counter(&meters.0.lost[*kind][at]);
    }
}

/// The `kind` label index of `kind`.
fn index(kind: Kind) -> usize {
    match kind {
        Kind::Write => 0,
        Kind::Read => 1,
        Kind::Permit(_) => 2,
        Kind::Upgradable => 3,
    }
}

fn counter(key: &Key) {
    metrics::with_recorder(|recorder| recorder.register_counter(key, &METADATA).increment(1));
}

/// Moves the gauge at `key` by `delta`.
fn gauge(key: &Key, delta: f64) {
    metrics::with_recorder(|recorder| {
        let gauge = recorder.register_gauge(key, &METADATA);
        if delta >= 0.0 {
            gauge.increment(delta);
        } else {
            gauge.decrement(-delta);
        }
    });
}
