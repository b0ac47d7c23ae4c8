//! Row 12: the hand-off across two processes over the quorum, next to the raw quorum
//! waiter and to the library on the first node alone.

use super::QUORUM_NODES;
use crate::handoff::{handoffs, Side, HANDOFFS};
use crate::table::{quantile, spread, Row};
use crate::Result;

/// Row 12 on the quorum of `urls` (and on its first node alone).
pub(crate) async fn rows(urls: &[String]) -> Result<Vec<Row>> {
    let mut raw = handoffs(urls, Side::QuorumRaw).await?;
    let mut library = handoffs(urls, Side::QuorumLibrary).await?;
    let mut single = handoffs(&urls[..1], Side::Library).await?;
    let negative = [&library, &raw, &single]
        .iter()
        .flat_map(|values| values.iter())
        .filter(|&&ns| ns < 0)
        .count();
    let p50 = |values: &mut Vec<i128>| {
        values.sort_unstable();
        quantile(values, 0.5)
    };
    let (lib_p50, raw_p50, single_p50) = (p50(&mut library), p50(&mut raw), p50(&mut single));
    let target = if lib_p50 <= 1_000_000 {
        "met"
    } else {
        "missed"
    };
    let mut what = format!(
        "hand-off across two processes over the {QUORUM_NODES}-node quorum: A unlocks, B \
         (Notifier::quorum) was blocked in write(); A's unlock returning to B's write \
         returning, {HANDOFFS} hand-offs"
    );
    if negative > 0 {
        what.push_str(&format!(" ({negative} negative: clocks read out of order)"));
    }
    Ok(vec![
        Row::new(
            "12a",
            format!("{what}; vs raw"),
            spread(&mut library),
            format!(
                "{} (raw quorum waiter: SUBSCRIBE on every node, raw quorum acquire when \
                 woken; A releases with compare-delete-PUBLISH on every node)",
                spread(&mut raw)
            ),
            format!(
                "latency, p50 {:.1}× raw; target p50 ≤ 1 ms: {target}",
                lib_p50 as f64 / raw_p50.max(1) as f64
            ),
        ),
        Row::new(
            "12b",
            format!("{what}; vs the same on node 1 alone (row 6's library setup)"),
            spread(&mut library),
            format!("{} (single server, Notifier::new)", spread(&mut single)),
            format!(
                "latency, p50 {:.1}× one server",
                lib_p50 as f64 / single_p50.max(1) as f64
            ),
        ),
    ])
}
