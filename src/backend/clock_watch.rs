//! Watching a server's clock through the times its renewals report ([`ClockWatch`]).

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::util;

/// A server clock that moved, between two renewals, by more than this process's monotonic
/// clock could have in the same span, plus the drift margin ([`crate::drift::margin`]):
/// how far beyond.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClockJump {
    /// The server's clock went ahead (a jump forward, or a clock running fast): keys it
    /// holds expire early by up to this much, and a lock found gone was likely expired by
    /// it.
    Forward(Duration),
    /// The server's clock went back (or runs slow): keys live longer; nothing is lost.
    Back(Duration),
}

/// The server time (`TIME`, µs) one renewal reported, and when its request was sent and
/// its reply came, on this process's monotonic clock.
#[derive(Debug, Clone, Copy)]
struct Sample {
    server_us: u64,
    sent: Instant,
    received: Instant,
}

/// The last server time a backend's renewals reported, to compare the next with.
#[derive(Debug, Default)]
pub(crate) struct ClockWatch {
    last: Mutex<Option<Sample>>,
}

impl ClockWatch {
    /// Takes the server time `server_us` (µs) of a renewal sent at `sent` and answered at
    /// `received`, and compares it with the last one: the server read its clock
    /// somewhere inside each request's span, so between the two readings our clock moved
    /// at least `sent - last.received` and at most `received - last.sent`. A server clock
    /// that moved outside those bounds by more than the drift margin over the longer span
    /// jumped (or runs at another rate).
    pub(crate) fn observe(
        &self,
        sent: Instant,
        received: Instant,
        server_us: u64,
    ) -> Option<ClockJump> {
        let now = Sample {
            server_us,
            sent,
            received,
        };
        let last = {
            let mut last = util::lock(&self.last);
            let before = *last;
            if before.is_none_or(|before| before.received <= received) {
                *last = Some(now);
            }
            before?
        };
        compare(&last, &now)
    }
}

/// What the clock did between `a` and `b`, as [`ClockWatch::observe`] says.
fn compare(a: &Sample, b: &Sample) -> Option<ClockJump> {
    let micros = |d: Duration| i128::try_from(d.as_micros()).unwrap_or(i128::MAX);
    let signed_span = |from: Instant, to: Instant| {
        if to >= from {
            micros(to - from)
        } else {
            -micros(from - to)
        }
    };
    let server = i128::from(b.server_us) - i128::from(a.server_us);
    let most = signed_span(a.sent, b.received);
    let least = signed_span(a.received, b.sent);
    let margin = micros(crate::drift::margin(Duration::from_micros(
        u64::try_from(most.max(0)).unwrap_or(u64::MAX),
    )));
    let beyond = |by: i128| Duration::from_micros(u64::try_from(by).unwrap_or(u64::MAX));
    if server > most + margin {
        Some(ClockJump::Forward(beyond(server - most)))
    } else if server < least - margin {
        Some(ClockJump::Back(beyond(least - server)))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: Instant, ms: u64, rtt_ms: u64, server_ms: u64) -> Sample {
        let sent = at + Duration::from_millis(ms);
        Sample {
            server_us: server_ms * 1000,
            sent,
            received: sent + Duration::from_millis(rtt_ms),
        }
    }

    #[test]
    fn a_clock_that_keeps_time_within_the_margin_is_no_jump() {
        let t = Instant::now();
        let a = sample(t, 0, 1, 1_000_000);
        // 500 ms later on both clocks, within the round trips and the margin.
        assert_eq!(compare(&a, &sample(t, 500, 1, 1_000_500)), None);
        assert_eq!(compare(&a, &sample(t, 500, 1, 1_000_507)), None);
        assert_eq!(compare(&a, &sample(t, 500, 1, 1_000_494)), None);
    }

    #[test]
    fn a_clock_ahead_or_behind_by_more_than_the_span_and_margin_is_a_jump() {
        let t = Instant::now();
        let a = sample(t, 0, 1, 1_000_000);
        // The server moved 3.5 s while we moved at most 501 ms.
        assert_eq!(
            compare(&a, &sample(t, 500, 1, 1_003_500)),
            Some(ClockJump::Forward(Duration::from_millis(2999)))
        );
        // It moved back 2 s while we moved at least 499 ms.
        assert_eq!(
            compare(&a, &sample(t, 500, 1, 998_000)),
            Some(ClockJump::Back(Duration::from_millis(2499)))
        );
        // Twice as fast over a second: 1 s beyond.
        assert_eq!(
            compare(&a, &sample(t, 1000, 0, 1_002_001)),
            Some(ClockJump::Forward(Duration::from_millis(1001)))
        );
    }

    #[test]
    fn the_watch_keeps_the_latest_reply_and_compares_with_the_one_before() {
        let watch = ClockWatch::default();
        let t = Instant::now();
        let at = |ms: u64| t + Duration::from_millis(ms);
        assert_eq!(watch.observe(at(0), at(1), 5_000_000), None, "nothing yet");
        assert_eq!(watch.observe(at(500), at(501), 5_500_000), None);
        assert_eq!(
            watch.observe(at(1000), at(1001), 9_000_000),
            Some(ClockJump::Forward(Duration::from_millis(2999)))
        );
        // Compared with the last one, which had the jump in it already.
        assert_eq!(watch.observe(at(1500), at(1501), 9_500_000), None);
    }
}
