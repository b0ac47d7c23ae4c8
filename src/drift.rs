//! Redlock's clock drift margin: how far two clocks may drift apart over a span.

use std::time::Duration;

/// Redlock's clock drift factor: 1% of the span (redis.io, "Distributed Locks with
/// Redis", the `CLOCK_DRIFT_FACTOR` of the reference implementations).
const DRIFT_FACTOR_PERCENT: u32 = 1;
/// Redlock's fixed drift allowance of 2 ms added to the factor (same source).
const DRIFT_FIXED: Duration = Duration::from_millis(2);

/// How far the server's clock may drift from ours over `span`: 1 % of it plus 2 ms
/// (Redlock's margin). A lock's validity is its TTL less the margin over the TTL; a
/// server clock that moved more than this beyond our own over a span jumped, or runs
/// at another rate.
pub(crate) fn margin(span: Duration) -> Duration {
    span * DRIFT_FACTOR_PERCENT / 100 + DRIFT_FIXED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_one_percent_plus_two_milliseconds() {
        assert_eq!(margin(Duration::from_secs(1)), Duration::from_millis(12));
        assert_eq!(margin(Duration::ZERO), Duration::from_millis(2));
        assert_eq!(margin(Duration::from_secs(60)), Duration::from_millis(602));
    }
}
