//! Holder identity over a quorum: each node holds the description of the hold it
//! granted, read through that node's own connection (an inspection over the quorum is
//! refused); a writer's and each reader's, renewed with the hold and gone from every node
//! after a release and a forced release.

use std::time::Duration;

use crate::common::eventually;
use crate::common::quorum::Nodes;
use redis::aio::MultiplexedConnection;
use redismutex::RwMutex;

const TTL: Duration = Duration::from_millis(600);

/// Whether every node describes each of `ids` as a holder of `key` of mutex `name`,
/// with this process's pid and the label; and describes no one else.
async fn described_everywhere(
    conns: &[MultiplexedConnection],
    name: &str,
    key: &str,
    ids: &[&str],
) -> bool {
    for conn in conns {
        let node = RwMutex::new(conn.clone(), name);
        let state = node.inspect(key).await.unwrap();
        let mine = ids.iter().all(|id| {
            state
                .holder_info(id)
                .is_some_and(|info| info.pid() == std::process::id() && info.label() == Some("q"))
        });
        let fields: i64 = redis::cmd("HLEN")
            .arg(format!("{name}:{key}:holders"))
            .query_async(&mut conn.clone())
            .await
            .unwrap();
        if !mine || fields != ids.len() as i64 {
            return false;
        }
    }
    true
}

#[tokio::test]
async fn each_node_describes_the_hold_it_granted_until_it_ends() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = RwMutex::builder(nodes.quorum().await, "qd")
        .ttl(TTL)
        .holder_label("q")
        .build()
        .unwrap();
    let writer = mx.write().key("w").await.unwrap();
    let one = [writer.id()];
    // The acquire's slowest node may answer after the majority did.
    assert!(eventually(|| described_everywhere(&conns, "qd", "w", &one)).await);
    // Three TTLs of renewals keep it on every node.
    tokio::time::sleep(TTL * 3).await;
    assert!(described_everywhere(&conns, "qd", "w", &one).await);
    writer.unlock().await.unwrap();
    assert!(eventually(|| described_everywhere(&conns, "qd", "w", &[])).await);

    let first = mx.read().key("r").await.unwrap();
    let second = mx.read().key("r").await.unwrap();
    let both = [first.id(), second.id()];
    assert!(eventually(|| described_everywhere(&conns, "qd", "r", &both)).await);
    assert!(mx.force_unlock("r").await.unwrap());
    assert!(eventually(|| described_everywhere(&conns, "qd", "r", &[])).await);
}
