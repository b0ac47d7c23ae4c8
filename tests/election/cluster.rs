//! Leader election on a real Redis Cluster (3 masters, 3 replicas) that each test starts:
//! three candidates take turns (a try, a resign, a drop) with strictly growing terms, the
//! lock and the record on the master of the name's slot and `leader` agreeing; the
//! observer with a cluster notifier (sharded Pub/Sub) sees a campaign, a proclaim, a
//! resign, a new leader, a drop and a lease deleted on the master, in order; a name
//! without a hash tag is refused (`hash_tag_keys` tags it); a leader across a failover of
//! its master either keeps leading or has its token fire, and once a newer term leads
//! neither `leader` nor the observer names the former leader again.
#![cfg(feature = "cluster")]

use std::time::Duration;

use crate::common::cluster::{slot, Cluster, SETTLE};
use crate::common::cluster_pubsub;
use crate::common::election::{all, leader, record, record_of, sees, take_turns};
use crate::common::{at_once, eventually, raw, LIVENESS};
use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redismutex::{CancelReason, Election, Error, Leadership, Notifier};

type El = Election<ClusterConnection>;

/// A TTL short enough that a lease deleted under its leader is seen soon (renewals every
/// second).
const TTL: Duration = Duration::from_secs(2);
/// A TTL long enough that no renewal and no expiry-timed read of the observer comes within
/// [`LIVENESS`] of a change: an observer that sees the change within it was told by
/// Pub/Sub.
const LONG_TTL: Duration = Duration::from_secs(30);

/// An election named `name` on a cluster connection of its own, with a cluster notifier.
async fn election(cluster: &Cluster, name: &str, ttl: Duration) -> El {
    Election::builder(cluster.conn().await, name)
        .ttl(ttl)
        .notifier(Notifier::cluster(cluster.client()))
        .build()
        .expect("valid options")
}

/// A plain connection to the master that serves `key`'s slot now.
async fn master_of(cluster: &Cluster, key: &str) -> MultiplexedConnection {
    cluster.node_conn(cluster.master_of_slot(slot(key))).await
}

#[tokio::test]
async fn three_candidates_take_turns_with_growing_terms_and_leader_agrees() {
    let cluster = Cluster::start();
    let name = "{sched}";
    let candidates = [
        election(&cluster, name, TTL).await,
        election(&cluster, name, TTL).await,
        election(&cluster, name, TTL).await,
    ];
    let reader = election(&cluster, name, TTL).await;
    let master = master_of(&cluster, name).await;
    // The lock and the record, in one slot, on the master that serves it.
    let stored = async |leading: &Leadership, value: &str| {
        assert_eq!(
            raw::get(&master, name).await.as_deref(),
            Some(leading.guard().id())
        );
        assert_eq!(
            raw::get(&master, "{sched}:leader").await,
            Some(record_of(leading, value))
        );
    };
    let (third, _, mut terms) = take_turns(&candidates, &reader, stored).await;

    // Nobody leads after the last resign; a try then leads at once, at a larger term.
    assert!(third.resign().await.unwrap());
    assert_eq!(reader.leader().await.unwrap(), None);
    let fourth = at_once(candidates[0].try_campaign("a2"))
        .await
        .unwrap()
        .expect("nobody leads");
    terms.push(fourth.fencing_token());
    assert_eq!(
        reader.leader().await.unwrap(),
        Some(leader("a2", fourth.fencing_token()))
    );
    assert!(terms.windows(2).all(|pair| pair[0] < pair[1]), "{terms:?}");
    assert!(fourth.resign().await.unwrap());
}

#[tokio::test]
async fn the_observer_with_a_cluster_notifier_sees_every_change_in_order() {
    // By sharded Pub/Sub; on Redis 6.2, which has none, by classic Pub/Sub.
    eprintln!("changes pushed by {}", cluster_pubsub::kind());
    let cluster = Cluster::start();
    let name = "{obs}";
    let a = election(&cluster, name, LONG_TTL).await;
    let b = election(&cluster, name, LONG_TTL).await;
    let short = election(&cluster, name, TTL).await;
    let watcher = election(&cluster, name, LONG_TTL).await;
    let seen = record(watcher.observe().await.unwrap());
    // Subscribed, the observer no longer reads again on each retry of its subscription.
    let master = cluster.master_of_slot(slot("{obs}:leader"));
    let subscribed = || cluster_pubsub::subscribed(&cluster, master, "{obs}:leader", 1);
    assert!(
        eventually(subscribed).await,
        "the observer never subscribed"
    );
    let mut expected = vec![None];

    // Nobody leads, so the observer reads again only when told: each change below is
    // seen within LIVENESS, far sooner than the 30 s lease would make it read.
    let one = a.campaign("a").await.unwrap();
    expected.push(Some(leader("a", one.fencing_token())));
    sees(&seen, expected[1].clone(), LIVENESS).await;
    one.proclaim("a2").await.unwrap();
    expected.push(Some(leader("a2", one.fencing_token())));
    sees(&seen, expected[2].clone(), LIVENESS).await;
    assert!(one.resign().await.unwrap());
    expected.push(None);
    sees(&seen, None, LIVENESS).await;

    let two = b.campaign("b").await.unwrap();
    assert!(two.fencing_token() > expected[1].as_ref().unwrap().fencing_token);
    expected.push(Some(leader("b", two.fencing_token())));
    sees(&seen, expected[4].clone(), LIVENESS).await;
    drop(two);
    expected.push(None);
    sees(&seen, None, LIVENESS).await;

    // A lease deleted on the master publishes nothing: seen at the lease's PTTL.
    let three = short.campaign("c").await.unwrap();
    expected.push(Some(leader("c", three.fencing_token())));
    sees(&seen, expected[6].clone(), LIVENESS).await;
    let master = master_of(&cluster, name).await;
    let deleted: i64 = raw::cmd(&master, "DEL", &[name]).await;
    assert_eq!(deleted, 1, "the lease was on the master of the name's slot");
    expected.push(None);
    sees(&seen, None, TTL + LIVENESS).await;
    tokio::time::timeout(TTL / 2 + LIVENESS, three.cancelled())
        .await
        .expect("the leader learns it at its next renewal");
    assert_eq!(three.cancel_reason(), Some(CancelReason::Lost));

    assert_eq!(all(&seen), expected, "every change, in order");
    assert_eq!(watcher.leader().await.unwrap(), None);
}

#[tokio::test]
async fn a_name_without_a_hash_tag_is_refused_and_hash_tag_keys_tags_it() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    // The lock key `sched` and the record `sched:leader` would hash to two slots.
    assert_ne!(slot("sched"), slot("sched:leader"));
    match Election::builder(conn.clone(), "sched").build() {
        Err(Error::InvalidOptions(why)) => {
            assert!(
                why.contains("\"sched\"") && why.contains("hash tag"),
                "{why}"
            )
        }
        other => panic!("an untagged name on a cluster: {other:?}"),
    }
    // An election from `new` cannot fail: each request reports it, at once.
    let bare = Election::new(conn.clone(), "sched");
    let refused = [
        at_once(bare.campaign("a")).await.map(drop),
        at_once(bare.try_campaign("a")).await.map(drop),
        at_once(bare.leader()).await.map(drop),
    ];
    for result in refused {
        assert!(
            matches!(result, Err(Error::InvalidOptions(_))),
            "{result:?}"
        );
    }
    // A single-server notifier cannot hear SPUBLISH: refused too.
    let single = redis::Client::open(cluster.url(cluster.masters()[0].port)).unwrap();
    let err = Election::builder(conn.clone(), "{sched}")
        .notifier(single)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("Notifier::cluster"), "{err}");
    assert_eq!(cluster.key_count().await, 0, "nothing was sent");

    // With hash_tag_keys the lock key is `{sched}`, the record `{sched}:leader`.
    let tagged = Election::builder(conn.clone(), "sched")
        .hash_tag_keys(true)
        .ttl(TTL)
        .notifier(Notifier::cluster(cluster.client()))
        .build()
        .expect("tagging gives the keys one slot");
    let leading = at_once(tagged.campaign("a")).await.unwrap();
    let master = master_of(&cluster, "{sched}").await;
    assert_eq!(
        raw::get(&master, "{sched}").await.as_deref(),
        Some(leading.guard().id())
    );
    assert_eq!(
        raw::get(&master, "{sched}:leader").await,
        Some(record_of(&leading, "a"))
    );
    assert_eq!(
        tagged.leader().await.unwrap(),
        Some(leader("a", leading.fencing_token()))
    );
    assert!(leading.resign().await.unwrap());
    assert_eq!(tagged.leader().await.unwrap(), None);
}

/// With a 10 s lease, renewed every 5 s: the first renewal after the kill most likely
/// finds the failover (about 3 s) done and the lock on the promoted replica, so the
/// leader keeps leading.
#[tokio::test]
async fn a_leader_with_a_long_lease_across_a_failover_of_its_master() {
    leader_across_a_failover(Duration::from_secs(10)).await;
}

/// With a 1 s lease, the failover takes longer than the leader's validity, so its token
/// most likely fires, and its lease lingers on the promoted replica until it expires.
#[tokio::test]
async fn a_leader_with_a_short_lease_across_a_failover_of_its_master() {
    leader_across_a_failover(Duration::from_secs(1)).await;
}

/// The master serving the name's slot is killed under a leader with a lease of `ttl`,
/// and its replica takes over. The leader either keeps leading (its lock reached the
/// replica and its renewals go on there: `leader` still names it at its term) or its
/// token fires; either way a later candidate leads at a larger term, and from then on
/// neither `leader` nor the observer (whose sharded subscription moves to the new master)
/// names the former leader, and the terms the observer shows never go back.
async fn leader_across_a_failover(ttl: Duration) {
    let cluster = Cluster::start();
    let name = "{ha}";
    let a = election(&cluster, name, ttl).await;
    let b = election(&cluster, name, ttl).await;
    let watcher = election(&cluster, name, ttl).await;
    let seen = record(watcher.observe().await.unwrap());

    let leading = at_once(a.campaign("a")).await.unwrap();
    let term = leading.fencing_token();
    sees(&seen, Some(leader("a", term)), LIVENESS).await;
    let victim = cluster.master_of_slot(slot(name));
    cluster.kill(victim);
    let promoted = cluster.wait_failover(victim).await;
    assert_eq!(cluster.master_of_slot(slot(name)), promoted);

    // Decided once a renewal went through on the promoted master (counted from now, long
    // after the killed master could answer one), or the token fired.
    let renewed_before = leading.guard().refreshes();
    let decided = tokio::time::timeout(ttl + LIVENESS, async {
        while leading.guard().refreshes() == renewed_before && !leading.is_cancelled() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        decided.is_ok(),
        "neither renewed nor fired after the failover"
    );
    let kept = !leading.is_cancelled();
    eprintln!(
        "after the failover the leader {}",
        if kept {
            "kept leading"
        } else {
            "lost the lead"
        }
    );
    if kept {
        assert_eq!(
            a.leader().await.unwrap(),
            Some(leader("a", term)),
            "the promoted master names the leader at its term"
        );
        assert!(leading.resign().await.unwrap(), "it still led");
    } else {
        let reason = leading.cancel_reason();
        assert!(
            matches!(reason, Some(CancelReason::Expired | CancelReason::Lost)),
            "{reason:?}"
        );
    }

    // A new leader: at a larger term, on the promoted master, and the only one named.
    let next = tokio::time::timeout(ttl + SETTLE, b.campaign("b"))
        .await
        .expect("a candidate leads once the former leader's lease is gone")
        .unwrap();
    assert!(
        next.fencing_token() > term,
        "{} > {term}",
        next.fencing_token()
    );
    let newer = Some(leader("b", next.fencing_token()));
    let master = cluster.node_conn(promoted).await;
    assert_eq!(
        raw::get(&master, "{ha}:leader").await,
        Some(record_of(&next, "b"))
    );
    for reader in [&a, &b, &watcher] {
        assert_eq!(reader.leader().await.unwrap(), newer);
    }
    // A proclamation lost while the observer's sharded subscription moves to the promoted
    // master shows at the observer's next read, one TTL after it last read nobody
    // leading (`election::observer::next_read`): after a lost lead that read can come
    // late.
    let bound = if kept { LIVENESS } else { ttl + LIVENESS };
    sees(&seen, newer.clone(), bound).await;
    let shown = all(&seen);
    eprintln!("the observer showed {shown:?}");
    let terms: Vec<u64> = shown
        .iter()
        .flatten()
        .map(|leader| leader.fencing_token)
        .collect();
    assert!(
        terms.windows(2).all(|pair| pair[0] <= pair[1]),
        "the observer's terms went back: {shown:?}"
    );
    assert!(next.resign().await.unwrap());
    // The release is published on the new master; a message lost while the observer's
    // sharded subscription moved there is made up by its read at the leader's PTTL.
    sees(&seen, None, ttl + LIVENESS).await;
}
