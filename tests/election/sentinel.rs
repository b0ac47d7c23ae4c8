//! Feature `sentinel`: leader election over a [`SentinelConnection`] on a primary with 2
//! replicas and 3 Sentinels (`tests/common/sentinel.rs`), with `Notifier::sentinel` and
//! replica acknowledgement (`replicas(1, ..)`): a campaign, a proclaim, `leader`, the
//! observer and a resign on the primary the Sentinels name; the lock and each record a
//! campaign or proclaim wrote are on a replica when it returns; a proclaim no replica
//! acknowledges is `NotReplicated` though the primary has it (and observers see it); a
//! leader whose lock and record were acknowledged keeps leading across a failover, the
//! new primary names it, and its proclaim and resign reach the observer there.
#![cfg(feature = "sentinel")]

use std::time::Duration;

use crate::common::election::{all, holding, leader, record, record_of, sees};
use crate::common::sentinel::Sentinels;
use crate::common::{at_once, raw, LIVENESS};
use redismutex::{Election, Error, Notifier, SentinelConnection};

/// Renewals every 4 s: none comes while the replicas are frozen below.
const TTL: Duration = Duration::from_secs(8);
/// How long a write waits for a replica: generous for a loaded machine, and within a
/// quarter of the TTL as `replicas` asks.
const ACK_TIMEOUT: Duration = Duration::from_millis(500);

/// An election named `name` over a Sentinel connection of its own, with a Sentinel
/// notifier, whose writes wait for one replica.
fn election(deployment: &Sentinels, name: &str) -> Election<SentinelConnection> {
    election_with_ttl(deployment, name, TTL)
}

fn election_with_ttl(
    deployment: &Sentinels,
    name: &str,
    ttl: Duration,
) -> Election<SentinelConnection> {
    Election::builder(SentinelConnection::new(deployment.sentinel_client()), name)
        .ttl(ttl)
        .replicas(1, ACK_TIMEOUT)
        .notifier(Notifier::sentinel(deployment.sentinel_client()))
        .build()
        .expect("valid options")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_over_sentinel_with_acknowledged_records() {
    let mut deployment = Sentinels::start();
    let a = election(&deployment, "sched");
    let b = election(&deployment, "sched");
    let watcher = election(&deployment, "sched");
    let primary = deployment.server(deployment.primary()).conn().await;
    let replica_nodes = deployment.replicas();
    let mut replicas = Vec::new();
    for &i in &replica_nodes {
        replicas.push(deployment.server(i).conn().await);
    }
    let seen = record(watcher.observe().await.unwrap());
    let mut expected = vec![None];

    // Acknowledged: a replica has the lock and the record when the campaign returns.
    let leading = at_once(a.campaign("a")).await.unwrap();
    let term = leading.fencing_token();
    assert!(holding(&replicas, "sched", leading.guard().id()).await >= 1);
    assert!(holding(&replicas, "sched:leader", &record_of(&leading, "a")).await >= 1);
    assert_eq!(
        raw::get(&primary, "sched:leader").await,
        Some(record_of(&leading, "a"))
    );
    assert_eq!(b.leader().await.unwrap(), Some(leader("a", term)));
    expected.push(Some(leader("a", term)));
    sees(&seen, expected[1].clone(), LIVENESS).await;
    assert!(at_once(b.try_campaign("b")).await.unwrap().is_none());

    leading.proclaim("a2").await.unwrap();
    assert!(holding(&replicas, "sched:leader", &record_of(&leading, "a2")).await >= 1);
    assert_eq!(b.leader().await.unwrap(), Some(leader("a2", term)));
    expected.push(Some(leader("a2", term)));
    sees(&seen, expected[2].clone(), LIVENESS).await;

    // Both replicas frozen: the record is written on the primary (and published), but
    // not acknowledged; the leadership goes on.
    for &i in &replica_nodes {
        deployment.freeze_replica(i);
    }
    let unacked = leading.proclaim("a3").await;
    for &i in &replica_nodes {
        deployment.thaw(i);
    }
    assert!(
        matches!(
            &unacked,
            Err(Error::NotReplicated {
                acked: 0,
                wanted: 1,
                ..
            })
        ),
        "{unacked:?}"
    );
    assert_eq!(
        raw::get(&primary, "sched:leader").await,
        Some(record_of(&leading, "a3"))
    );
    assert!(!leading.is_cancelled(), "{:?}", leading.cancel_reason());
    expected.push(Some(leader("a3", term)));
    sees(&seen, expected[3].clone(), LIVENESS).await;

    assert!(leading.resign().await.unwrap(), "it led when it resigned");
    expected.push(None);
    sees(&seen, None, LIVENESS).await;
    assert_eq!(b.leader().await.unwrap(), None);

    let next = at_once(b.campaign("b")).await.unwrap();
    assert!(next.fencing_token() > term);
    assert!(holding(&replicas, "sched:leader", &record_of(&next, "b")).await >= 1);
    expected.push(Some(leader("b", next.fencing_token())));
    sees(&seen, expected[5].clone(), LIVENESS).await;
    drop(next);
    expected.push(None);
    sees(&seen, None, LIVENESS).await;

    assert_eq!(all(&seen), expected, "every change, in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_leader_keeps_leading_across_a_failover() {
    let mut deployment = Sentinels::start();
    // Long enough that no renewal is due across the failover (4–15 s).
    let ttl = Duration::from_secs(40);
    let a = election_with_ttl(&deployment, "ha", ttl);
    let b = election_with_ttl(&deployment, "ha", ttl);
    let watcher = election_with_ttl(&deployment, "ha", ttl);
    let seen = record(watcher.observe().await.unwrap());
    let leading = at_once(a.campaign("a")).await.unwrap();
    let term = leading.fencing_token();
    sees(&seen, Some(leader("a", term)), LIVENESS).await;

    let old = deployment.kill_primary();
    let new = deployment.failover().await;
    assert_ne!(new, old);
    // Both were acknowledged by a replica before the campaign returned: the new primary
    // has the lock and the record, and names the leader at its term.
    let primary = deployment.server(new).conn().await;
    assert_eq!(
        raw::get(&primary, "ha").await.as_deref(),
        Some(leading.guard().id())
    );
    assert_eq!(
        raw::get(&primary, "ha:leader").await,
        Some(record_of(&leading, "a"))
    );
    assert_eq!(b.leader().await.unwrap(), Some(leader("a", term)));
    assert!(!leading.is_cancelled(), "{:?}", leading.cancel_reason());

    // The leader's writes and the observer follow the new primary.
    at_once(leading.proclaim("a2")).await.unwrap();
    assert_eq!(
        raw::get(&primary, "ha:leader").await,
        Some(record_of(&leading, "a2"))
    );
    sees(&seen, Some(leader("a2", term)), LIVENESS).await;
    assert!(leading.resign().await.unwrap(), "it still led");
    sees(&seen, None, LIVENESS).await;
    let next = at_once(b.try_campaign("b"))
        .await
        .unwrap()
        .expect("nobody leads");
    assert!(next.fencing_token() > term);
    sees(&seen, Some(leader("b", next.fencing_token())), LIVENESS).await;
    assert!(next.resign().await.unwrap());
}
