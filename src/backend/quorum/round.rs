//! One round of a quorum: the same call sent to every node at once, each bounded by the
//! per-node bound, and the answers counted until a majority decides; the calls still in
//! flight then go on to their end in a background task.

use std::future::{poll_fn, Future};
use std::task::Poll;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::time::error::Elapsed;

use crate::error::Error;
use crate::observe::Meters;
use crate::spawner::Spawner;

/// What one node said in a round.
#[derive(Debug)]
pub(super) enum Answer<T> {
    /// It answered.
    Reply(T),
    /// Its request failed.
    Failed(Error),
    /// No answer within the per-node bound.
    Silent,
}

/// The answers of a round, by node: `None` for a node whose call was still in flight when
/// the round was decided (it goes on to its end in the background), or that was skipped.
pub(super) type Answers<T> = Vec<Option<Answer<T>>>;

/// What `pick` finds in each reply of `answers` (the nodes that answered, in order):
/// say the token of each node that took the lock.
pub(super) fn replies<'a, T, U>(
    answers: &'a Answers<T>,
    pick: impl Fn(&'a T) -> Option<U> + 'a,
) -> impl Iterator<Item = U> + 'a {
    answers
        .iter()
        .flatten()
        .filter_map(move |answer| match answer {
            Answer::Reply(reply) => pick(reply),
            _ => None,
        })
}

/// Sends `each` to every node at once (but those for which it gives `None`), each call
/// bounded by `bound`, and collects the answers until `done` says the round is decided,
/// or every node has answered.
///
/// A call still in flight then goes on to its end in a task spawned by `spawner`: a node
/// the majority did not wait for still takes the lock, is refreshed or is taken back.
/// (redis-rs does not send a request whose future is dropped before its turn, so the
/// calls are never simply dropped.) Every call is polled once before the first answer is
/// awaited, which puts its request on its node's connection: a later call to that node
/// runs after it. A call that fails or gets no answer in time is counted in `meters`,
/// in the round or after it.
pub(super) async fn round<N, T, Fut>(
    spawner: &Spawner,
    meters: &Meters,
    nodes: Vec<N>,
    bound: Duration,
    mut each: impl FnMut(usize, N) -> Option<Fut>,
    done: impl Fn(&Answers<T>) -> bool,
) -> Answers<T>
where
    T: Send + 'static,
    Fut: Future<Output = Result<T, Error>> + Send + 'static,
{
    let mut answers: Answers<T> = nodes.iter().map(|_| None).collect();
    let mut calls: FuturesUnordered<_> = nodes
        .into_iter()
        .enumerate()
        .filter_map(|(at, node)| {
            let call = bounded(meters.clone(), at, bound, each(at, node)?);
            Some(async move { (at, call.await) })
        })
        .collect();
    while let Some((at, outcome)) = calls.next().await {
        answers[at] = Some(match outcome {
            Ok(Ok(reply)) => Answer::Reply(reply),
            Ok(Err(err)) => Answer::Failed(err),
            Err(_) => Answer::Silent,
        });
        if done(&answers) {
            break;
        }
    }
    finish_in_background(spawner, calls);
    answers
}

/// Sends `each` to every node at once (but those for which it gives `None`), each call
/// bounded by `bound`, and returns once every request is on its node's connection,
/// without waiting for an answer: a later call to a node runs after it. The answers are
/// awaited in a background task; `unanswered` is called with the count of nodes that
/// failed or gave no answer in time, if any, and each such node is counted in `meters`.
pub(super) async fn send<N, T, Fut>(
    spawner: &Spawner,
    meters: &Meters,
    nodes: Vec<N>,
    bound: Duration,
    mut each: impl FnMut(usize, N) -> Option<Fut>,
    unanswered: impl FnOnce(usize) + Send + 'static,
) where
    T: Send + 'static,
    Fut: Future<Output = Result<T, Error>> + Send + 'static,
{
    let mut calls: FuturesUnordered<_> = nodes
        .into_iter()
        .enumerate()
        .filter_map(|(at, node)| Some(bounded(meters.clone(), at, bound, each(at, node)?)))
        .collect();
    // Polls every call once: each puts its request on its connection.
    let mut failed = 0;
    poll_fn(|cx| loop {
        match calls.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(Ok(_)))) => {}
            Poll::Ready(Some(_)) => failed += 1,
            Poll::Ready(None) | Poll::Pending => return Poll::Ready(()),
        }
    })
    .await;
    spawner.spawn(async move {
        while let Some(outcome) = calls.next().await {
            if !matches!(outcome, Ok(Ok(_))) {
                failed += 1;
            }
        }
        if failed > 0 {
            unanswered(failed);
        }
    });
}

/// `call` to node `at`, bounded by `bound`; a failure or no answer in time is counted
/// against the node in `meters`.
async fn bounded<T>(
    meters: Meters,
    at: usize,
    bound: Duration,
    call: impl Future<Output = Result<T, Error>>,
) -> Result<Result<T, Error>, Elapsed> {
    let outcome = tokio::time::timeout(bound, call).await;
    if !matches!(outcome, Ok(Ok(_))) {
        meters.node_error(at);
    }
    outcome
}

/// Drives the calls of a decided round to their end in a task of their own.
fn finish_in_background<F>(spawner: &Spawner, mut calls: FuturesUnordered<F>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if !calls.is_empty() {
        spawner.spawn(async move { while calls.next().await.is_some() {} });
    }
}

/// The count of a round's answers: yes, no, and failed (an error or no answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tally {
    pub(super) nodes: usize,
    pub(super) yes: usize,
    pub(super) no: usize,
    pub(super) failed: usize,
}

impl Tally {
    /// Counts `answers`, a reply being a yes when `yes` says so.
    pub(super) fn of<T>(answers: &Answers<T>, yes: impl Fn(&T) -> bool) -> Self {
        let mut tally = Self {
            nodes: answers.len(),
            yes: 0,
            no: 0,
            failed: 0,
        };
        for answer in answers.iter().flatten() {
            match answer {
                Answer::Reply(reply) if yes(reply) => tally.yes += 1,
                Answer::Reply(_) => tally.no += 1,
                Answer::Failed(_) | Answer::Silent => tally.failed += 1,
            }
        }
        tally
    }

    /// How many nodes make a majority: `nodes / 2 + 1`.
    pub(super) fn needed(&self) -> usize {
        majority(self.nodes)
    }

    /// Nodes not heard from yet.
    pub(super) fn pending(&self) -> usize {
        self.nodes - self.yes - self.no - self.failed
    }

    /// How many nodes gave an answer, yes or no.
    pub(super) fn answered(&self) -> usize {
        self.yes + self.no
    }

    /// A majority said yes.
    pub(super) fn won(&self) -> bool {
        self.yes >= self.needed()
    }

    /// A majority said no: the answer is a definite no.
    pub(super) fn refused(&self) -> bool {
        self.no >= self.needed()
    }

    /// Too few nodes are left to say yes for a majority.
    pub(super) fn out_of_reach(&self) -> bool {
        self.yes + self.pending() < self.needed()
    }

    /// An acquire attempt needs to hear no more: won; or out of reach, with a majority
    /// heard and a node among them saying the lock is held by others (the attempt is
    /// then busy, however the rest answer), or with every node heard (so that an error
    /// counts every answer: nodes that fail at once do not cut short the answers of
    /// those that are up).
    pub(super) fn decided(&self) -> bool {
        let busy = self.no > 0 && self.answered() >= self.needed();
        self.won() || (self.out_of_reach() && (busy || self.pending() == 0))
    }

    /// Won, definitely refused, or every node heard: a refresh, release or downgrade
    /// needs to hear no more (out of reach alone does not tell a loss from an outage).
    pub(super) fn settled(&self) -> bool {
        self.won() || self.refused() || self.pending() == 0
    }
}

/// How many of `nodes` make a majority.
pub(crate) fn majority(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// The error of a round that reached no majority: the first node error that says
/// nothing was changed, when a majority gave one (the keys are not a lock's, or the
/// servers refuse); else [`Error::NoQuorum`], carrying one node's error.
pub(super) fn no_quorum<T>(key: &str, answers: Answers<T>) -> Error {
    let tally = Tally::of(&answers, |_| false);
    let mut errors: Vec<Error> = answers
        .into_iter()
        .flatten()
        .filter_map(|answer| match answer {
            Answer::Failed(err) => Some(err),
            _ => None,
        })
        .collect();
    let definite = errors.iter().filter(|err| err.changed_nothing()).count();
    if definite >= tally.needed() {
        if let Some(at) = errors.iter().position(Error::changed_nothing) {
            return errors.swap_remove(at);
        }
    }
    Error::NoQuorum {
        key: key.to_owned(),
        answered: tally.answered(),
        needed: tally.needed(),
        nodes: tally.nodes,
        source: errors.into_iter().next().map(Box::new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(yes: usize, no: usize, failed: usize, pending: usize) -> Answers<bool> {
        let mut all = Vec::new();
        all.extend((0..yes).map(|_| Some(Answer::Reply(true))));
        all.extend((0..no).map(|_| Some(Answer::Reply(false))));
        all.extend((0..failed).map(|_| Some(Answer::Silent)));
        all.extend((0..pending).map(|_| None));
        all
    }

    fn tally(yes: usize, no: usize, failed: usize, pending: usize) -> Tally {
        Tally::of(&answers(yes, no, failed, pending), |yes| *yes)
    }

    #[tokio::test]
    async fn a_call_in_flight_when_the_round_is_decided_goes_on_to_its_end() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;

        let finished = Arc::new(AtomicBool::new(false));
        let spawner = Spawner::current(None);
        let delays = vec![0_u64, 0, 50];
        let answers = round(
            &spawner,
            &Meters::default(),
            delays,
            Duration::from_secs(5),
            |_, delay| {
                let finished = Arc::clone(&finished);
                Some(async move {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    finished.store(delay > 0, Ordering::SeqCst);
                    Ok(true)
                })
            },
            |answers| Tally::of(answers, |yes| *yes).decided(),
        )
        .await;
        assert!(answers[2].is_none(), "decided at 2 of 3");
        assert!(!finished.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            finished.load(Ordering::SeqCst),
            "the slow call ran to its end"
        );
    }

    #[tokio::test]
    async fn a_send_returns_at_once_and_its_calls_run_to_their_end() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;

        let (ran, unanswered) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let spawner = Spawner::current(None);
        let started = tokio::time::Instant::now();
        let counted = Arc::clone(&unanswered);
        send(
            &spawner,
            &Meters::default(),
            vec![30_u64, 30, 1000],
            Duration::from_millis(100),
            |_, delay| {
                let ran = Arc::clone(&ran);
                Some(async move {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    ran.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            },
            move |failed| counted.store(failed, Ordering::SeqCst),
        )
        .await;
        assert!(
            started.elapsed() < Duration::from_millis(30),
            "no answer awaited"
        );
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(ran.load(Ordering::SeqCst), 2, "both quick calls ran");
        assert_eq!(
            unanswered.load(Ordering::SeqCst),
            1,
            "the slow one past the bound"
        );
    }

    #[tokio::test]
    async fn a_node_past_the_bound_is_silent_and_a_skipped_node_sends_nothing() {
        let spawner = Spawner::current(None);
        let answers = round(
            &spawner,
            &Meters::default(),
            vec![0_u64, 1000, 0],
            Duration::from_millis(20),
            |at, delay| {
                (at != 2).then_some(async move {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    Ok(())
                })
            },
            |_| false,
        )
        .await;
        assert!(matches!(answers[0], Some(Answer::Reply(()))));
        assert!(matches!(answers[1], Some(Answer::Silent)));
        assert!(answers[2].is_none());
    }

    #[test]
    fn a_majority_is_more_than_half() {
        assert_eq!([1, 2, 3, 4, 5, 6, 7].map(majority), [1, 2, 2, 3, 3, 4, 4]);
    }

    #[test]
    fn an_attempt_is_decided_at_a_majority_either_way() {
        assert!(tally(2, 0, 0, 1).won() && tally(2, 0, 0, 1).decided());
        assert!(!tally(1, 0, 0, 2).decided());
        // A split with one node silent waits for it: it could still make a majority.
        assert!(!tally(1, 1, 0, 1).decided());
        assert!(tally(1, 1, 1, 0).decided() && !tally(1, 1, 1, 0).won());
        assert!(tally(0, 0, 2, 1).out_of_reach());
        // Two nodes failed at once: the third is still heard, for the error's count.
        assert!(!tally(0, 0, 2, 1).decided() && tally(1, 0, 2, 0).decided());
        assert!(tally(0, 1, 2, 0).decided() && tally(0, 2, 0, 1).decided());
        // One refusal and a node down: the third is heard, to tell busy from an outage.
        assert!(!tally(0, 1, 1, 1).decided());
        assert!(
            !tally(2, 0, 1, 2).decided(),
            "5 nodes: 2 pending could still win"
        );
        assert!(tally(2, 2, 1, 0).out_of_reach());
        assert_eq!(tally(3, 1, 1, 0).answered(), 4);
    }

    #[test]
    fn a_refresh_settles_on_a_definite_answer_or_when_all_are_heard() {
        assert!(tally(2, 0, 0, 1).settled());
        assert!(tally(0, 2, 0, 1).settled() && tally(0, 2, 0, 1).refused());
        // Out of reach, but a loss cannot yet be told from an outage.
        assert!(!tally(0, 1, 1, 1).settled());
        assert!(tally(0, 1, 2, 0).settled() && !tally(0, 1, 2, 0).refused());
    }

    #[test]
    fn no_quorum_counts_answers_and_keeps_a_definite_majority_error() {
        let mut mixed = answers(0, 1, 0, 0);
        mixed.push(Some(Answer::Failed(Error::Timeout)));
        mixed.push(Some(Answer::Silent));
        match no_quorum("k", mixed) {
            Error::NoQuorum {
                key,
                answered: 1,
                needed: 2,
                nodes: 3,
                source: Some(source),
            } => assert!(key == "k" && matches!(*source, Error::Timeout)),
            other => panic!("{other:?}"),
        }
        let wrong = || {
            Some(Answer::Failed(Error::NoExpiry {
                key: "k:fence".into(),
            }))
        };
        let definite: Answers<bool> = vec![wrong(), wrong(), Some(Answer::Silent)];
        assert!(matches!(no_quorum("k", definite), Error::NoExpiry { .. }));
    }
}
