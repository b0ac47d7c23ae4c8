//! Each node of a quorum keeps the single-server key layout: a Go client of the original
//! package pointed at one node sees an ordinary lock there, and Go clients holding a
//! majority of the nodes keep a quorum mutex out (or share it, as readers).

use crate::common::go_peer::GoPeer;
use crate::common::{eventually, raw, RedisServer};
use redismutex::{Quorum, RwMutex};

const KEY: &str = "shared:doc";

async fn nodes() -> (Vec<RedisServer>, Vec<redis::aio::MultiplexedConnection>) {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut conns = Vec::new();
    for server in &servers {
        conns.push(server.conn().await);
    }
    (servers, conns)
}

#[tokio::test]
async fn a_go_client_on_one_node_sees_the_quorum_writer_and_waits() {
    let (_servers, conns) = nodes().await;
    let mx = RwMutex::new(Quorum::new(conns.clone()).unwrap(), "shared");
    let guard = mx.write().key("doc").await.unwrap();
    let mut holding = 0;
    for conn in &conns {
        if raw::get(conn, KEY).await.as_deref() == Some(guard.id()) {
            holding += 1;
        }
        let go = GoPeer::new(conn.clone(), 4000);
        let blocked = go.write(KEY, &GoPeer::new_id(), false).await;
        assert!(blocked.is_some_and(|pttl| pttl > 0), "{blocked:?}");
        assert!(go.read(KEY, &GoPeer::new_id()).await.is_some());
    }
    assert!(
        holding >= 2,
        "the writer's id is the string value on a majority"
    );
    guard.unlock().await.unwrap();
    // unlock returns at a majority; the last node's release goes on in the background.
    for conn in &conns {
        assert!(
            eventually(|| async { !raw::exists(conn, KEY).await }).await,
            "released on every node"
        );
    }
}

#[tokio::test]
async fn go_writers_on_a_majority_keep_a_quorum_writer_out_and_go_readers_share() {
    let (_servers, conns) = nodes().await;
    let mx = RwMutex::new(Quorum::new(conns.clone()).unwrap(), "shared");
    let go_id = GoPeer::new_id();
    for conn in &conns[..2] {
        assert_eq!(
            GoPeer::new(conn.clone(), 4000)
                .write(KEY, &go_id, false)
                .await,
            None
        );
    }
    assert!(mx.try_write().key("doc").await.unwrap().is_none());
    assert!(mx.try_read().key("doc").await.unwrap().is_none());
    // The failed attempts' releases are sent before they return, and answered after.
    assert!(
        eventually(|| async { !raw::exists(&conns[2], KEY).await }).await,
        "the failed attempt released the free node"
    );
    for conn in &conns[..2] {
        GoPeer::new(conn.clone(), 4000).unlock(KEY, &go_id).await;
    }
    // Go readers on a majority: a quorum reader shares the lock, a writer stays out.
    let reader = GoPeer::new_id();
    for conn in &conns[..2] {
        assert_eq!(
            GoPeer::new(conn.clone(), 4000).read(KEY, &reader).await,
            None
        );
    }
    let shared = mx
        .try_read()
        .key("doc")
        .await
        .unwrap()
        .expect("readers share");
    assert!(mx.try_write().key("doc").await.unwrap().is_none());
    for conn in &conns[..2] {
        let members = raw::members(conn, KEY).await;
        assert!(members.contains(&reader) && members.contains(&shared.id().to_owned()));
    }
    shared.unlock().await.unwrap();
}
