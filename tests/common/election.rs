//! Helpers for the election tests of every deployment: the expected [`Leader`], the first
//! of two waiting candidates to lead, and everything an observer's receiver shows, in
//! order, with a wait for the value it shows last.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::LIVENESS;
use redismutex::{Error, Leader, Leadership};

/// The leader `value` at term `fencing_token`.
pub fn leader(value: &str, fencing_token: u64) -> Leader {
    Leader {
        value: value.to_owned(),
        fencing_token,
    }
}

/// A candidate's campaign, waiting in a task of its own.
pub type Candidate = JoinHandle<Result<Leadership, Error>>;

/// Waits (at most [`LIVENESS`]) for whichever of `a` and `b` leads first; gives its index
/// (0 for `a`), its leadership, and the other one, still waiting.
pub async fn first_of(a: Candidate, b: Candidate) -> (usize, Leadership, Candidate) {
    let (mut a, mut b) = (a, b);
    let first = tokio::time::timeout(LIVENESS, async {
        tokio::select! {
            led = &mut a => (0, led.unwrap().unwrap()),
            led = &mut b => (1, led.unwrap().unwrap()),
        }
    })
    .await
    .expect("a waiting candidate leads within the liveness bound");
    let rest = if first.0 == 0 { b } else { a };
    (first.0, first.1, rest)
}

/// Every value an observer's receiver showed, in order.
pub type Seen = Arc<Mutex<Vec<Option<Leader>>>>;

/// Everything `receiver` shows, in order, from its first value on.
pub fn record(mut receiver: watch::Receiver<Option<Leader>>) -> Seen {
    let seen = Arc::new(Mutex::new(vec![receiver.borrow_and_update().clone()]));
    let into = Arc::clone(&seen);
    tokio::spawn(async move {
        while receiver.changed().await.is_ok() {
            let now = receiver.borrow_and_update().clone();
            into.lock().unwrap().push(now);
        }
    });
    seen
}

/// Waits (at most `bound`) until the last value seen is `expected`.
pub async fn sees(seen: &Seen, expected: Option<Leader>, bound: Duration) {
    let reached = tokio::time::timeout(bound, async {
        loop {
            if seen.lock().unwrap().last() == Some(&expected) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        reached.is_ok(),
        "expected {expected:?} within {bound:?}; seen {:?}",
        seen.lock().unwrap()
    );
}

/// Everything seen so far.
pub fn all(seen: &Seen) -> Vec<Option<Leader>> {
    seen.lock().unwrap().clone()
}
