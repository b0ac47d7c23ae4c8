//! The wait loop's decisions, as pure functions: a reply in, what to do next out; and how
//! long to sleep before the next attempt. No Redis, no clock: unit-tested below.

use std::time::Duration;

use crate::error::Error;
use crate::protocol::replies::Attempt;

/// First retry delay before jitter when polling; jitter adds up to as much again.
pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(1);
/// Largest retry delay before jitter when polling, so retries come at most every 50 ms.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_millis(25);
/// The first sleep of a waiter that a message will wake, on a lock none of whose
/// releases this process has heard yet (its holders may publish nothing: a Go client);
/// each such sleep that no message cuts short doubles it, up to the fallback timer.
/// 750 ms rather than 250 ms or 500 ms: one waiter blocked 2 s on a new key then sends
/// one probe (at 0.75 s; the next is at 2.25 s), and the waiting-cost row (8b: its first
/// attempt, loading the script, its attempt once subscribed, the probe) stays at 2
/// `EVALSHA`/`EVAL` a second; from 250 ms it read 3 a second, from 500 ms 2.5.
pub(crate) const PROBE_FIRST: Duration = Duration::from_millis(750);

/// What came of one attempt.
#[derive(Debug)]
pub(crate) enum Reply {
    /// Redis answered; `in_time` when the answer came before the validity the attempt
    /// would start had ended (it matters only for [`Attempt::Acquired`]).
    Answered { attempt: Attempt, in_time: bool },
    /// No reply within the lock's validity: the attempt may still take effect.
    Unanswered,
    /// The request failed.
    Failed(Error),
}

/// What the wait loop knows besides the reply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context {
    /// The request waits (`write()`, `read()`, `acquire()`), rather than trying once.
    pub(crate) waits: bool,
    /// The mutex has a notifier, so a waiter can be woken by releases.
    pub(crate) notifier: bool,
    /// The request is in this process's queue of waiters on the lock (and so subscribed,
    /// or subscribing, to its release channel).
    pub(crate) queued: bool,
    /// How many attempts took the lock too late to be valid, this one included.
    pub(crate) late_replies: u32,
}

/// What the wait loop does next.
#[derive(Debug)]
pub(crate) enum Next {
    /// Taken, with this fencing token: the wait is over.
    Taken(u64),
    /// Attempt again at once.
    Attempt,
    /// Join this process's queue for the lock, subscribe, then attempt again at once, since
    /// a release before the subscription would go unheard.
    Subscribe,
    /// Sleep (until woken, or for the pause [`pause`] gives for this blocker's PTTL), then
    /// attempt again.
    Sleep(Duration),
    /// Too few nodes of a quorum answered: poll (the backoff's next pause), then attempt
    /// again.
    Retry,
    /// A single attempt found the lock held: `Ok(None)`.
    Unavailable,
    /// End the request with this error.
    Fail(Error),
}

/// The next step after `reply`.
pub(crate) fn decide(reply: Reply, context: Context) -> Next {
    let attempt = match reply {
        Reply::Answered { attempt, in_time } => (attempt, in_time),
        // Unanswered, it may have taken the lock: the next attempt (same id) renews what
        // it took, and giving up releases it.
        Reply::Unanswered if context.waits => return Next::Attempt,
        Reply::Unanswered => return Next::Fail(Error::Timeout),
        Reply::Failed(err) if context.waits && err.passing() => return Next::Retry,
        Reply::Failed(err) => return Next::Fail(err),
    };
    match attempt {
        (Attempt::Acquired(token), true) => Next::Taken(token),
        // Taken too late to be valid: the next attempt, under the same id, renews it if it
        // is still ours. A try gets one immediate retry; a wait backs off.
        (Attempt::Acquired(_), false) if context.waits => Next::Sleep(BACKOFF_MIN),
        (Attempt::Acquired(_), false) if context.late_replies > 1 => Next::Unavailable,
        (Attempt::Acquired(_), false) => Next::Attempt,
        // The fast path's answers, and an unusable fence key: the script says more.
        (Attempt::Busy | Attempt::TakenWithoutToken | Attempt::Unchecked, _) => Next::Attempt,
        (Attempt::Blocked(_), _) if !context.waits => Next::Unavailable,
        (Attempt::Blocked(_), _) if context.notifier && !context.queued => Next::Subscribe,
        (Attempt::Blocked(pttl), _) => Next::Sleep(pttl),
    }
}

/// How long to sleep before the next attempt when what blocks expires in `blocked_for`.
///
/// A waiter a release will wake (`notified`) sleeps until the blocker's PTTL, for
/// holders that publish nothing (Go clients, a key that expires), and at most half the
/// TTL, so a waiting writer renews its intent (PX ttl) in time. Otherwise it polls:
/// the `backoff`'s next delay, never past the PTTL and never below [`BACKOFF_MIN`].
pub(crate) fn pause(
    blocked_for: Duration,
    notified: bool,
    ttl: Duration,
    backoff: impl FnOnce() -> Option<Duration>,
) -> Duration {
    if notified {
        return blocked_for.min(ttl / 2);
    }
    backoff()
        .unwrap_or(BACKOFF_MAX)
        .min(blocked_for)
        .max(BACKOFF_MIN)
}

/// The sleep of a notified waiter whose fallback timer is `pause`, on a lock whose
/// releases are not known to wake it (`probe`, the waiter's next probing sleep) or are
/// (`None`): the shorter of the two.
pub(crate) fn probed(pause: Duration, probe: Option<Duration>) -> Duration {
    probe.map_or(pause, |probe| pause.min(probe))
}

#[cfg(test)]
mod tests {
    use super::*;

    impl PartialEq for Next {
        fn eq(&self, other: &Self) -> bool {
            match (self, other) {
                (Next::Taken(a), Next::Taken(b)) => a == b,
                (Next::Sleep(a), Next::Sleep(b)) => a == b,
                (Next::Fail(a), Next::Fail(b)) => a.to_string() == b.to_string(),
                _ => std::mem::discriminant(self) == std::mem::discriminant(other),
            }
        }
    }

    const WAITS: Context = Context {
        waits: true,
        notifier: false,
        queued: false,
        late_replies: 0,
    };
    const TRIES: Context = Context {
        waits: false,
        ..WAITS
    };

    fn answered(attempt: Attempt) -> Reply {
        Reply::Answered {
            attempt,
            in_time: true,
        }
    }

    fn late() -> Reply {
        Reply::Answered {
            attempt: Attempt::Acquired(7),
            in_time: false,
        }
    }

    #[test]
    fn a_token_in_time_is_a_guard_and_a_late_one_is_tried_again() {
        assert_eq!(
            decide(answered(Attempt::Acquired(7)), TRIES),
            Next::Taken(7)
        );
        assert_eq!(decide(late(), WAITS), Next::Sleep(BACKOFF_MIN));
        let first = Context {
            late_replies: 1,
            ..TRIES
        };
        assert_eq!(decide(late(), first), Next::Attempt);
        let second = Context {
            late_replies: 2,
            ..TRIES
        };
        assert_eq!(decide(late(), second), Next::Unavailable);
    }

    #[test]
    fn a_blocked_try_gives_up_and_a_blocked_wait_subscribes_once_then_sleeps() {
        let pttl = Duration::from_millis(300);
        let blocked = || answered(Attempt::Blocked(pttl));
        assert_eq!(decide(blocked(), TRIES), Next::Unavailable);
        assert_eq!(decide(blocked(), WAITS), Next::Sleep(pttl));
        let notified = Context {
            notifier: true,
            ..WAITS
        };
        assert_eq!(decide(blocked(), notified), Next::Subscribe);
        let queued = Context {
            queued: true,
            ..notified
        };
        assert_eq!(decide(blocked(), queued), Next::Sleep(pttl));
        let try_notified = Context {
            notifier: true,
            ..TRIES
        };
        assert_eq!(decide(blocked(), try_notified), Next::Unavailable);
    }

    #[test]
    fn the_fast_paths_answers_lead_to_the_script() {
        for attempt in [
            Attempt::Busy,
            Attempt::TakenWithoutToken,
            Attempt::Unchecked,
        ] {
            assert_eq!(decide(answered(attempt), TRIES), Next::Attempt);
            assert_eq!(decide(answered(attempt), WAITS), Next::Attempt);
        }
    }

    #[test]
    fn no_reply_ends_a_try_and_a_wait_attempts_again_and_errors_end_both() {
        assert_eq!(decide(Reply::Unanswered, WAITS), Next::Attempt);
        assert!(matches!(
            decide(Reply::Unanswered, TRIES),
            Next::Fail(Error::Timeout)
        ));
        let refused = || Reply::Failed(Error::NoExpiry { key: "k".into() });
        assert!(matches!(
            decide(refused(), WAITS),
            Next::Fail(Error::NoExpiry { .. })
        ));
        assert!(matches!(
            decide(refused(), TRIES),
            Next::Fail(Error::NoExpiry { .. })
        ));
    }

    #[test]
    fn an_unreachable_quorum_ends_a_try_and_a_wait_polls_on() {
        let no_quorum = || {
            Reply::Failed(Error::NoQuorum {
                key: "k".into(),
                answered: 1,
                needed: 2,
                nodes: 3,
                source: None,
            })
        };
        assert_eq!(decide(no_quorum(), WAITS), Next::Retry);
        assert!(matches!(
            decide(no_quorum(), TRIES),
            Next::Fail(Error::NoQuorum { answered: 1, .. })
        ));
    }

    #[test]
    fn a_notified_waiter_sleeps_to_the_pttl_and_at_most_half_the_ttl() {
        let ttl = Duration::from_secs(4);
        let never = || -> Option<Duration> { panic!("a notified waiter takes no backoff") };
        let short = Duration::from_millis(300);
        assert_eq!(pause(short, true, ttl, never), short);
        assert_eq!(pause(Duration::from_secs(60), true, ttl, never), ttl / 2);
    }

    #[test]
    fn a_waiter_on_a_lock_never_heard_from_probes_at_doubling_sleeps_up_to_its_timer() {
        let fallback = Duration::from_secs(5);
        let mut probe = PROBE_FIRST;
        let mut sleeps = Vec::new();
        while sleeps.last() != Some(&fallback) {
            sleeps.push(probed(fallback, Some(probe)));
            probe *= 2;
        }
        let ms = Duration::from_millis;
        assert_eq!(sleeps, [ms(750), ms(1500), ms(3000), fallback]);
        assert_eq!(probed(fallback, None), fallback);
        assert_eq!(
            probed(ms(100), Some(PROBE_FIRST)),
            ms(100),
            "never past the PTTL"
        );
    }

    #[test]
    fn a_polling_waiter_backs_off_within_the_pttl_and_above_the_minimum() {
        let ttl = Duration::from_secs(4);
        let pttl = Duration::from_secs(1);
        let ms = Duration::from_millis;
        assert_eq!(pause(pttl, false, ttl, || Some(ms(20))), ms(20));
        assert_eq!(pause(ms(5), false, ttl, || Some(ms(20))), ms(5));
        assert_eq!(
            pause(Duration::ZERO, false, ttl, || Some(ms(20))),
            BACKOFF_MIN
        );
        assert_eq!(pause(pttl, false, ttl, || None), BACKOFF_MAX);
    }
}
