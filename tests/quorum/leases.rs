//! Leases over a quorum: a detached hold attaches while one node is down (and is kept
//! past several TTLs by the attaching handle), is released and renewed by lease on every
//! node, and a lease whose hold a majority of the nodes lost is refused, the node that
//! moved it releasing it.

use std::time::Duration;

use crate::common::quorum::{gone_everywhere, written_everywhere, Nodes};
use crate::common::{raw, LIVENESS};
use redismutex::Error;

/// A renewal every 250 ms; each node's call is bounded by 50 ms.
const TTL: Duration = Duration::from_millis(500);

#[tokio::test]
async fn a_lease_attaches_with_one_node_down_and_is_kept_there() {
    let mut nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let here = nodes.mutex("job", LIVENESS).await;
    let there = nodes.mutex("job", TTL).await;
    let guard = here.write().await.unwrap();
    let token = guard.fencing_token();
    written_everywhere(&conns, "job", guard.id()).await;
    let lease = guard.detach();
    nodes.kill(2);

    let attached = there.attach_write(&lease).await.unwrap();
    assert_ne!(attached.id(), lease.id());
    assert_eq!(attached.fencing_token(), token);
    written_everywhere(&conns[..2], "job", attached.id()).await;
    tokio::time::sleep(TTL * 3).await;
    assert!(!attached.is_cancelled(), "{:?}", attached.cancel_reason());
    assert!(attached.refreshes() >= 3, "{}", attached.refreshes());
    assert!(
        !there.release(&lease).await.unwrap(),
        "the old id holds nothing"
    );
    assert!(attached.unlock().await.unwrap());
    gone_everywhere(&conns[..2], "job").await;

    // Release and renew by lease, with the node still down.
    let lease = here.read().await.unwrap().detach();
    assert!(there.renew(&lease).await.unwrap());
    for conn in &conns[..2] {
        let pttl = raw::pttl(conn, "job").await;
        assert!(pttl > 4_000, "the reader's TTL is kept at least: {pttl} ms");
        assert_eq!(raw::members(conn, "job").await, [lease.id()]);
    }
    assert!(there.release(&lease).await.unwrap());
    gone_everywhere(&conns[..2], "job").await;
}

#[tokio::test]
async fn a_lease_whose_hold_a_majority_lost_is_refused_and_its_one_node_released() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let here = nodes.mutex("job", LIVENESS).await;
    let there = nodes.mutex("job", TTL).await;
    let guard = here.write().await.unwrap();
    written_everywhere(&conns, "job", guard.id()).await;
    let lease = guard.detach();
    for conn in &conns[1..] {
        raw::cmd::<i64>(conn, "DEL", &["job"]).await;
    }
    let err = there.attach_write(&lease).await.unwrap_err();
    assert!(
        matches!(err, Error::NotHeld { ref key, .. } if key == "job"),
        "{err}"
    );
    // Node 0 moved the hold, then released it under the new id: no node holds it.
    gone_everywhere(&conns, "job").await;
    let next = there.try_write().await.unwrap().expect("the lock is free");
    assert!(next.unlock().await.unwrap());
}
