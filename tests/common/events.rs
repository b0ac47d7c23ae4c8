//! The events the fault workers print (see `examples/fault_worker.rs`), collected from
//! every worker into one shared log.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Microseconds since the UNIX epoch: the clock every worker stamps its events with.
pub fn now_us() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    u64::try_from(since.as_micros()).expect("µs fit u64")
}

/// One line a worker printed: `<kind> <us> <fields...>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub worker: String,
    pub kind: String,
    pub us: u64,
    pub fields: Vec<String>,
}

impl Event {
    /// Parses a line; `None` for anything that is not `<KIND> <us> ...`.
    pub fn parse(worker: &str, line: &str) -> Option<Event> {
        let mut words = line.split_whitespace();
        let kind = words.next()?.to_string();
        let us = words.next()?.parse().ok()?;
        Some(Event {
            worker: worker.to_string(),
            kind,
            us,
            fields: words.map(str::to_string).collect(),
        })
    }

    pub fn is(&self, kind: &str) -> bool {
        self.kind == kind
    }

    pub fn field(&self, i: usize) -> &str {
        self.fields.get(i).map_or("", String::as_str)
    }

    /// The lock key of a section event (every kind but ACQUIRED has it first).
    pub fn key(&self) -> &str {
        self.field(usize::from(self.is("ACQUIRED")))
    }

    /// The fencing token of a section event.
    pub fn token(&self) -> u64 {
        self.field(usize::from(self.is("ACQUIRED")) + 1)
            .parse()
            .unwrap_or(0)
    }

    /// The guard id of an ACQUIRED.
    pub fn id(&self) -> &str {
        self.field(3)
    }

    /// The last field: a FIRED's or ABANDONED's reason, a FENCED's `write`/`probe`.
    pub fn last(&self) -> &str {
        self.fields.last().map_or("", String::as_str)
    }

    /// An EXEC's verdict: `accepted`, `refused` or `error`.
    pub fn verdict(&self) -> &str {
        self.field(3)
    }

    /// What an EXEC was: `read`, `write` or `probe`.
    pub fn exec_what(&self) -> &str {
        self.field(4)
    }

    /// An EXEC's guard's cancel reason when the call began and when it returned (`-`:
    /// none).
    pub fn exec_reasons(&self) -> (&str, &str) {
        (self.field(5), self.field(6))
    }

    /// An EXEC refused by the server: the guard had no cancel reason when the call began
    /// (so it did not refuse it before sending) and `Lost` after it, which the exec
    /// script's not-held reply fires.
    pub fn refused_by_server(&self) -> bool {
        self.is("EXEC") && self.verdict() == "refused" && self.exec_reasons() == ("-", "Lost")
    }

    /// A FIRED that means the lock was (or may have been) lost: not our own unlock.
    pub fn is_loss(&self) -> bool {
        self.is("FIRED") && matches!(self.last(), "Lost" | "Expired" | "ClockJump")
    }
}

/// The events of every worker, in the order they were read.
#[derive(Debug, Clone, Default)]
pub struct Log(Arc<Mutex<Vec<Event>>>);

impl Log {
    pub fn push(&self, event: Event) {
        self.0.lock().expect("log lock").push(event);
    }

    pub fn all(&self) -> Vec<Event> {
        self.0.lock().expect("log lock").clone()
    }

    /// The events that satisfy `pred`.
    pub fn filter(&self, pred: impl Fn(&Event) -> bool) -> Vec<Event> {
        let log = self.0.lock().expect("log lock");
        log.iter().filter(|event| pred(event)).cloned().collect()
    }

    /// How many events satisfy `pred`.
    pub fn count(&self, pred: impl Fn(&Event) -> bool) -> usize {
        let log = self.0.lock().expect("log lock");
        log.iter().filter(|event| pred(event)).count()
    }

    /// The first event (in log order) that satisfies `pred`, waiting up to `timeout`
    /// for it to arrive.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&Event) -> bool,
    ) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let found = self
                .0
                .lock()
                .expect("log lock")
                .iter()
                .find(|event| pred(event))
                .cloned();
            if found.is_some() || tokio::time::Instant::now() >= deadline {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}
