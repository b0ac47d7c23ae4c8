//! A lock held on a bare majority is topped up: the nodes that did not take it (another
//! candidate held them for a moment) are tried again in the background and hold the
//! guard's id well before its next renewal; a top-up stops when the guard is released.
//! Each test runs on 3 and on 5 nodes, the minority held by another id for a moment.

use std::time::Duration;

use crate::common::quorum::{on_3_and_5_nodes, Nodes};
use crate::common::raw;
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

/// Renewals every 5 s: whatever holds the minority before then was topped up.
const TTL: Duration = Duration::from_secs(10);

/// How long the other id holds the minority: the top-up's first tries find it there.
const SQUAT_MS: u64 = 300;

on_3_and_5_nodes!(
    a_writer_on_a_bare_majority_is_topped_up_before_its_first_renewal,
    a_reader_on_a_bare_majority_is_topped_up_past_a_writers_intent,
    a_released_guard_is_not_topped_up,
    a_renewal_that_found_a_node_taken_tops_it_up_before_the_next,
);

/// Another writer's id on the first `minority` nodes for `ms` milliseconds.
async fn squat(conns: &[MultiplexedConnection], minority: usize, key: &str, ms: u64) {
    let px = ms.to_string();
    for conn in &conns[..minority] {
        raw::cmd::<()>(conn, "SET", &[key, "someone-else", "PX", &px]).await;
    }
}

/// How many of `conns` hold `id` at `key`, as the writer or as a reader.
async fn holding(conns: &[MultiplexedConnection], key: &str, id: &str) -> usize {
    let mut count = 0;
    for conn in conns {
        let held = match raw::key_type(conn, key).await.as_str() {
            "string" => raw::get(conn, key).await.as_deref() == Some(id),
            "set" => raw::members(conn, key).await.iter().any(|m| m == id),
            _ => false,
        };
        count += usize::from(held);
    }
    count
}

/// Polls until every node holds `id` at `key`; the time that took, or `None` if not by
/// `within`.
async fn everywhere_within(
    conns: &[MultiplexedConnection],
    key: &str,
    id: &str,
    within: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < within {
        if holding(conns, key, id).await == conns.len() {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// The minority held by another writer for 300 ms when a writer acquires: the guard holds
/// a bare majority, and every node holds its id within 4 s, before the first renewal
/// (5 s), with no renewal's help.
async fn a_writer_on_a_bare_majority_is_topped_up_before_its_first_renewal(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    squat(&conns, nodes.minority(), "bare", SQUAT_MS).await;
    let guard = nodes.mutex("bare", TTL).await.write().await.unwrap();
    let id = guard.id().to_owned();
    assert_eq!(
        holding(&conns, "bare", &id).await,
        nodes.majority(),
        "a bare majority"
    );
    let took = everywhere_within(&conns, "bare", &id, Duration::from_secs(4)).await;
    assert!(
        took.is_some(),
        "{} of {n} nodes hold it after 4 s",
        holding(&conns, "bare", &id).await
    );
    assert!(!guard.is_cancelled());
    assert!(guard.unlock().await.unwrap());
    assert_eq!(holding(&conns, "bare", &id).await, 0, "released everywhere");
}

/// A reader on a bare majority (the minority held by a writer for 300 ms, with another
/// writer's intent there for a minute): it holds the lock already, so the intent, which
/// keeps new readers out, does not keep its top-up out; every node has its id in the
/// readers' set within 4 s, and the intent stays.
async fn a_reader_on_a_bare_majority_is_topped_up_past_a_writers_intent(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    squat(&conns, nodes.minority(), "readers", SQUAT_MS).await;
    for conn in &conns[..nodes.minority()] {
        raw::cmd::<()>(
            conn,
            "SET",
            &["readers:lock-intent", "waiting-writer", "PX", "60000"],
        )
        .await;
    }
    let guard = nodes.mutex("readers", TTL).await.read().await.unwrap();
    let id = guard.id().to_owned();
    assert_eq!(holding(&conns, "readers", &id).await, nodes.majority());
    let took = everywhere_within(&conns, "readers", &id, Duration::from_secs(4)).await;
    assert!(
        took.is_some(),
        "{} of {n} nodes hold it after 4 s",
        holding(&conns, "readers", &id).await
    );
    for conn in &conns[..nodes.minority()] {
        let intent = raw::get(conn, "readers:lock-intent").await;
        assert_eq!(
            intent.as_deref(),
            Some("waiting-writer"),
            "the intent stays"
        );
    }
    assert!(guard.unlock().await.unwrap());
}

/// A writer on a bare majority released at once: its top-up, which would find the
/// minority free 300 ms later, takes nothing there after the release.
async fn a_released_guard_is_not_topped_up(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    squat(&conns, nodes.minority(), "gone", SQUAT_MS).await;
    let guard = nodes.mutex("gone", TTL).await.write().await.unwrap();
    let id = guard.id().to_owned();
    assert!(guard.unlock().await.unwrap());
    tokio::time::sleep(Duration::from_millis(3 * SQUAT_MS + 1500)).await;
    assert_eq!(
        holding(&conns, "gone", &id).await,
        0,
        "nothing taken after the release"
    );
    for conn in &conns {
        assert!(!raw::exists(conn, "gone").await, "every node free");
    }
}

/// A guard held on every node whose minority is taken by another writer until just past
/// its first renewal (TTL 6 s: renewals 3 s apart): that renewal keeps the majority and
/// cannot take the minority back; its top-up does, once the other writer's key expires,
/// before the second renewal.
async fn a_renewal_that_found_a_node_taken_tops_it_up_before_the_next(n: usize) {
    let ttl = Duration::from_secs(6);
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let guard = nodes.mutex("renewed", ttl).await.write().await.unwrap();
    let acquired = Instant::now();
    let id = guard.id().to_owned();
    assert_eq!(holding(&conns, "renewed", &id).await, n);
    squat(&conns, nodes.minority(), "renewed", 3_300).await;
    tokio::time::sleep_until(acquired + Duration::from_millis(3_200)).await;
    assert_eq!(
        holding(&conns, "renewed", &id).await,
        nodes.majority(),
        "the first renewal did not take the minority back"
    );
    let left = (acquired + Duration::from_millis(5_700)).saturating_duration_since(Instant::now());
    let took = everywhere_within(&conns, "renewed", &id, left).await;
    assert!(
        took.is_some(),
        "{} of {n} nodes hold it 5.7 s after the acquire",
        holding(&conns, "renewed", &id).await
    );
    assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    assert!(guard.unlock().await.unwrap());
}
