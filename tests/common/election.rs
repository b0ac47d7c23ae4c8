//! Helpers for the election tests of every deployment: the expected [`Leader`], the first
//! of two waiting candidates to lead, three candidates taking turns, and everything an
//! observer's receiver shows, in order, with a wait for the value it shows last.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{at_once, LIVENESS};
use redismutex::{Deployment, Election, Error, Leader, Leadership};

/// The leader `value` at term `fencing_token`.
pub fn leader(value: &str, fencing_token: u64) -> Leader {
    Leader {
        value: value.to_owned(),
        fencing_token,
    }
}

/// The record a leader writes: `<term>:<id>:<value>`.
pub fn record_of(leading: &Leadership, value: &str) -> String {
    format!(
        "{}:{}:{value}",
        leading.fencing_token(),
        leading.guard().id()
    )
}

/// How many of `conns` hold `value` at `key`, read at once.
pub async fn holding(conns: &[MultiplexedConnection], key: &str, value: &str) -> usize {
    let mut count = 0;
    for conn in conns {
        if super::raw::get(conn, key).await.as_deref() == Some(value) {
            count += 1;
        }
    }
    count
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

/// Three candidates take turns, each new leader named by `reader` with its value and term
/// and passed to `check` (for what the deployment stores): `candidates[0]` leads with
/// `"a"` and a try by `candidates[1]` is refused while it does; the other two campaign
/// (`"b"`, `"c"`) and wait; the leader resigns (it led), the first of the two to lead is
/// dropped, and the last one leads. Gives the last leadership, its value, and every term
/// in order (each larger than the last).
pub async fn take_turns<C: Deployment>(
    candidates: &[Election<C>; 3],
    reader: &Election<C>,
    check: impl AsyncFn(&Leadership, &str),
) -> (Leadership, &'static str, Vec<u64>) {
    assert_eq!(reader.leader().await.unwrap(), None, "nobody leads yet");
    let names = async |leading: &Leadership, value: &str| {
        check(leading, value).await;
        assert_eq!(
            reader.leader().await.unwrap(),
            Some(leader(value, leading.fencing_token()))
        );
    };
    let first = at_once(candidates[0].campaign("a")).await.unwrap();
    names(&first, "a").await;
    assert!(at_once(candidates[1].try_campaign("b"))
        .await
        .unwrap()
        .is_none());
    let spawn = |at: usize, value: &'static str| {
        let candidate = candidates[at].clone();
        tokio::spawn(async move { candidate.campaign(value).timeout(LIVENESS * 3).await })
    };
    let (b, c) = (spawn(1, "b"), spawn(2, "c"));
    tokio::time::sleep(Duration::from_millis(100)).await;

    // Resign: one of the two waiting leads next.
    let mut terms = vec![first.fencing_token()];
    assert!(first.resign().await.unwrap(), "it led when it resigned");
    let (at, second, rest) = first_of(b, c).await;
    terms.push(second.fencing_token());
    names(&second, ["b", "c"][at]).await;

    // Drop: the last one leads.
    drop(second);
    let third = tokio::time::timeout(LIVENESS, rest)
        .await
        .expect("the last candidate leads after a drop")
        .unwrap()
        .unwrap();
    terms.push(third.fencing_token());
    let third_value = ["c", "b"][at];
    names(&third, third_value).await;
    assert!(terms.windows(2).all(|pair| pair[0] < pair[1]), "{terms:?}");
    (third, third_value, terms)
}
