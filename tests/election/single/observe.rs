//! The observer: every change in order within a bound (campaign, proclaim, resign, drop,
//! a lease deleted under the leader, a forced release), a killed subscriber connection,
//! and no notifier.

use std::time::Duration;

use super::{election, leader};
use crate::common::election::{record, sees};
use crate::common::{raw, RedisServer, LIVENESS};
use redismutex::{Election, Error, RwMutex};

const TTL: Duration = Duration::from_secs(2);

#[tokio::test]
async fn the_observer_sees_every_change_in_order() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let a = election(&server, "obs", TTL).await;
    let b = election(&server, "obs", TTL).await;
    let watcher = election(&server, "obs", TTL).await;
    let seen = record(watcher.observe().await.unwrap());

    let one = a.campaign("a").await.unwrap();
    let mut expected = vec![None, Some(leader("a", one.fencing_token()))];
    sees(&seen, expected[1].clone(), LIVENESS).await;
    one.proclaim("a2").await.unwrap();
    expected.push(Some(leader("a2", one.fencing_token())));
    sees(&seen, expected[2].clone(), LIVENESS).await;
    one.resign().await.unwrap();
    expected.push(None);
    sees(&seen, None, LIVENESS).await;

    let two = b.campaign("b").await.unwrap();
    expected.push(Some(leader("b", two.fencing_token())));
    sees(&seen, expected[4].clone(), LIVENESS).await;
    drop(two);
    expected.push(None);
    sees(&seen, None, LIVENESS).await;

    // A lease deleted under the leader publishes nothing: seen at the PTTL read before.
    let three = a.campaign("c").await.unwrap();
    expected.push(Some(leader("c", three.fencing_token())));
    sees(&seen, expected[6].clone(), LIVENESS).await;
    let _: () = raw::cmd(&conn, "DEL", &["obs"]).await;
    expected.push(None);
    sees(&seen, None, TTL + LIVENESS).await;

    // A forced release publishes: seen at once.
    let four = b.campaign("d").await.unwrap();
    expected.push(Some(leader("d", four.fencing_token())));
    sees(&seen, expected[8].clone(), LIVENESS).await;
    RwMutex::new(conn.clone(), "obs")
        .force_unlock("")
        .await
        .unwrap();
    expected.push(None);
    sees(&seen, None, LIVENESS).await;

    assert_eq!(*seen.lock().unwrap(), expected, "every change, in order");
    drop(three);
}

#[tokio::test]
async fn an_observer_whose_connection_is_killed_reconnects_and_reads_again() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let a = election(&server, "rec", TTL).await;
    let watcher = election(&server, "rec", TTL).await;
    let seen = record(watcher.observe().await.unwrap());
    let leading = a.campaign("x").await.unwrap();
    sees(&seen, Some(leader("x", leading.fencing_token())), LIVENESS).await;

    let killed: i64 = raw::cmd(&conn, "CLIENT", &["KILL", "TYPE", "pubsub"]).await;
    assert!(
        killed >= 1,
        "the observer's subscriber connection was killed"
    );
    leading.proclaim("y").await.unwrap();
    sees(&seen, Some(leader("y", leading.fencing_token())), LIVENESS).await;
    // Subscribed again: a change is pushed (a resign publishes; no timer is near).
    assert!(
        crate::common::eventually(|| async { raw::subscribers(&conn, "rec:leader").await >= 1 })
            .await
    );
    leading.resign().await.unwrap();
    sees(&seen, None, LIVENESS).await;
}

#[tokio::test]
async fn observe_needs_a_notifier_and_stops_when_its_receivers_are_gone() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let bare = Election::new(conn.clone(), "bare");
    match bare.observe().await {
        Err(Error::InvalidOptions(why)) => assert!(why.contains("notifier"), "{why}"),
        other => panic!("observe without a notifier: {other:?}"),
    }
    let watcher = election(&server, "gone", TTL).await;
    let receiver = watcher.observe().await.unwrap();
    assert!(
        crate::common::eventually(|| async { raw::subscribers(&conn, "gone:leader").await == 1 })
            .await
    );
    drop(receiver);
    // The observer ends with its last receiver, and its connection with it.
    let leading = watcher.campaign("x").await.unwrap();
    assert!(
        crate::common::eventually(|| async { raw::subscribers(&conn, "gone:leader").await == 0 })
            .await,
        "the observer's subscription is closed once nobody observes"
    );
    leading.resign().await.unwrap();
}

#[tokio::test]
async fn a_change_nobody_published_is_seen_within_a_ttl() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(1);
    let watcher = election(&server, "quiet", ttl).await;
    let seen = record(watcher.observe().await.unwrap());
    // A leader written by hand, as a message lost in transit would leave it: no publish.
    let id = "0123456789abcdef0123456789abcdef";
    let _: () = raw::cmd(&conn, "SET", &["quiet", id, "PX", "60000"]).await;
    let _: () = raw::cmd(
        &conn,
        "SET",
        &["quiet:leader", &format!("9:{id}:v"), "PX", "60000"],
    )
    .await;
    sees(&seen, Some(leader("v", 9)), ttl + LIVENESS).await;
}
