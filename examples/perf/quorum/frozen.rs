//! Row 13: one node of the quorum frozen by SIGSTOP, and what that adds to the latency
//! of an acquire, an unlock, a refused `try_write` and an in-process hand-off.

use std::time::Duration;

use redismutex::{Notifier, Quorum, RwMutex};

use super::frozen_phase::{
    answers, frozen_phase, FrozenPhase, FROZEN_ACQUIRES, FROZEN_UNLOCKS, FROZEN_WARM_UP,
};
use super::QUORUM_NODES;
use crate::server::RedisServer;
use crate::table::{brief, ms, quantile, spread, Row};
use crate::{Result, TTL_MS};

/// The per-node bound of a quorum mutex with the default TTL: ttl/10.
const NODE_BOUND: Duration = Duration::from_millis(TTL_MS / 10);

/// Row 13 on the quorum of `servers`: a phase with every node up, then one with the
/// last node frozen.
pub(crate) async fn rows(servers: &[RedisServer]) -> Result<Vec<Row>> {
    let (mut up, mut frozen) = phases(servers).await?;
    up.sort();
    frozen.sort();
    Ok(table(&mut up, &mut frozen))
}

/// Both phases on the quorum of `servers`, by two mutexes over it on their own
/// connections (the second with `Notifier::quorum`): every node up, then the last node
/// frozen (and resumed, even when the phase failed).
async fn phases(servers: &[RedisServer]) -> Result<(FrozenPhase, FrozenPhase)> {
    let (mut nodes_a, mut nodes_b, mut clients) = (Vec::new(), Vec::new(), Vec::new());
    for server in servers {
        nodes_a.push(server.conn().await);
        nodes_b.push(server.conn().await);
        clients.push(server.client());
    }
    let a = RwMutex::new(Quorum::new(nodes_a)?, "perf-frozen");
    let b = RwMutex::builder(Quorum::new(nodes_b)?, "perf-frozen")
        .notifier(Notifier::quorum(clients))
        .build()?;
    let up = frozen_phase(&a, &b, "up", FROZEN_WARM_UP).await?;
    let frozen_node = &servers[QUORUM_NODES - 1];
    let mut probe = frozen_node.conn().await;
    frozen_node.pause();
    let frozen = if answers(&mut probe).await {
        Err("the node answered after SIGSTOP".into())
    } else {
        frozen_phase(&a, &b, "frozen", 0).await
    };
    frozen_node.resume();
    Ok((up, frozen?))
}

/// What freezing a node adds at p50 and at the max, `frozen` and `up` being sorted; for
/// the requests that acquire (or try to), when `judged`, whether that is at most the
/// per-node bound; `why` in parentheses, if any.
fn adds(frozen: &[i128], up: &[i128], judged: bool, why: &str) -> String {
    let bound_ns = NODE_BOUND.as_nanos() as i128;
    let p50 = quantile(frozen, 0.5) - quantile(up, 0.5);
    let max = frozen[frozen.len() - 1] - up[up.len() - 1];
    let mut text = format!("adds p50 {}, max {}", ms(p50 as f64), ms(max as f64));
    if judged {
        let verdict = if p50 <= bound_ns && max <= bound_ns {
            "met"
        } else {
            "missed"
        };
        text.push_str(&format!(
            "; at most the per-node bound ttl/10 = {} ms: {verdict}",
            NODE_BOUND.as_millis()
        ));
    }
    if !why.is_empty() {
        text.push_str(&format!(" ({why})"));
    }
    text
}

/// Rows 13a–d from the sorted measurements of the two phases.
fn table(up: &mut FrozenPhase, frozen: &mut FrozenPhase) -> Vec<Row> {
    let node =
        format!("node {QUORUM_NODES} of the {QUORUM_NODES}-node quorum frozen (SIGSTOP) vs all up");
    vec![
        Row::new(
            "13a",
            format!(
                "acquire latency, 1 task, uncontended write() on fresh keys (guards held), \
                 {FROZEN_ACQUIRES} acquires: {node}"
            ),
            format!("frozen: {}", spread(&mut frozen.acquires)),
            format!("all up: {}", spread(&mut up.acquires)),
            adds(&frozen.acquires, &up.acquires, true, ""),
        ),
        Row::new(
            "13b",
            format!("unlock latency, {FROZEN_UNLOCKS} unlocks one at a time: {node}"),
            format!("frozen: {}", brief(&frozen.unlocks)),
            format!("all up: {}", brief(&up.unlocks)),
            adds(
                &frozen.unlocks,
                &up.unlocks,
                false,
                "an unlock returns at a majority; the frozen node's release goes on in the \
                 background",
            ),
        ),
        Row::new(
            "13c",
            format!(
                "try_write() on a lock another handle holds (returns None), \
                 {FROZEN_UNLOCKS} tries: {node}"
            ),
            format!("frozen: {}", brief(&frozen.refusals)),
            format!("all up: {}", brief(&up.refusals)),
            adds(
                &frozen.refusals,
                &up.refusals,
                true,
                "a lost attempt queues its releases and returns; the frozen node's waits \
                 its turn there in the background",
            ),
        ),
        Row::new(
            "13d",
            format!(
                "hand-off in one process, {FROZEN_UNLOCKS} hand-offs: B (Notifier::quorum) \
                 blocked in write(), A calls unlock() → B's write returns: {node}"
            ),
            format!("frozen: {}", brief(&frozen.handoffs)),
            format!("all up: {}", brief(&up.handoffs)),
            adds(
                &frozen.handoffs,
                &up.handoffs,
                true,
                "B's attempts are decided by the two nodes up",
            ),
        ),
    ]
}
