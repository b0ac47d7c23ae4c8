//! Faults of a real Redis Cluster's masters under held guards: a master killed
//! (SIGKILL) until its replica takes over, and a master frozen (SIGSTOP). Nothing may
//! hang past its own bound, a guard whose lock may be lost must fire, and the slots
//! must work again afterwards.
// The doc comes first: without the feature the crate is empty but still wants one.
#![cfg(feature = "cluster")]

mod common;

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use common::cluster::{slot, Cluster};
use common::LIVENESS;
use redis::cluster_async::ClusterConnection;
use redismutex::{CancelReason, Error, Guard, Notifier, RwMutex};

/// Slack for scheduling on a loaded 2-core machine, added to every bound.
const SLACK: Duration = Duration::from_millis(400);
/// The clean-up a wait that gives up may wait for (`GIVE_UP_GRACE`).
const GIVE_UP: Duration = Duration::from_millis(100);

/// The validity of a lock with `ttl`: the TTL minus Redlock's drift margin.
fn validity(ttl: Duration) -> Duration {
    ttl - ttl / 100 - Duration::from_millis(2)
}

/// A key of `mx` (tagged) whose slot master `i` serves.
fn key_on(cluster: &Cluster, i: usize) -> String {
    let name = cluster.name_on_master(i, "k");
    name.trim_matches(|c| c == '{' || c == '}').to_owned()
}

fn mutex(conn: &ClusterConnection, ttl: Duration, cluster: &Cluster) -> RwMutex<ClusterConnection> {
    RwMutex::builder(conn.clone(), "f")
        .hash_tag_keys(true)
        .ttl(ttl)
        .lock_intent(true)
        .notifier(Notifier::cluster(cluster.client()))
        .build()
        .unwrap()
}

/// Runs `fut` and says how long it took; fails the test past [`LIVENESS`].
async fn timed<T>(fut: impl IntoFuture<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let out = tokio::time::timeout(LIVENESS * 4, fut.into_future())
        .await
        .expect("nothing hangs");
    (out, started.elapsed())
}

/// A master killed while guards on its slots (and on the others') are held: the guards
/// on its slots fire (their lock may be lost), the others do not; requests on its slots
/// return within their bounds, with a guard, `None` or a clear error; once its replica
/// has taken over, new locks on those slots work, with tokens above the old ones.
#[tokio::test]
async fn a_killed_master_fires_its_guards_and_its_slots_work_after_the_failover() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let ttl = Duration::from_secs(1);
    let mx = mutex(&conn, ttl, &cluster);
    let keys: Vec<String> = (0..3).map(|i| key_on(&cluster, i)).collect();
    let victim = cluster.masters()[0].port;
    assert_eq!(
        cluster.master_of_slot(slot(&format!("f:{{{}}}", keys[0]))),
        victim
    );

    let mut guards: Vec<Guard> = Vec::new();
    for key in &keys {
        guards.push(mx.write().key(key).await.unwrap());
        guards.push(
            mx.read()
                .key(format!("{key}:r"))
                .await
                .unwrap_or_else(|err| panic!("{err}")),
        );
    }
    let old_tokens: Vec<u64> = guards.iter().map(Guard::fencing_token).collect();
    // A waiter on the victim's slot, with a timeout.
    let waiting = tokio::spawn({
        let mx = mx.clone();
        let key = keys[0].clone();
        async move { timed(mx.write().key(key).timeout(Duration::from_millis(1500))).await }
    });

    let killed = Instant::now();
    cluster.kill(victim);

    // The victim's guards fire by their deadline: the failover takes longer than the
    // 1 s TTL, so no refresh can succeed in time.
    let on_victim = |guard: &&Guard| cluster.master_of_slot(slot(guard.key())) == victim;
    for guard in guards.iter().filter(on_victim) {
        let (_, _) = timed(guard.cancelled()).await;
        let fired = killed.elapsed();
        eprintln!("{} fired {fired:?} after the kill", guard.key());
        let reason = guard.cancel_reason();
        assert_eq!(reason, Some(CancelReason::Expired), "{}", guard.key());
        assert!(
            fired < validity(ttl) + SLACK,
            "{} fired {fired:?}",
            guard.key()
        );
    }

    // Requests on the victim's slots return within their bounds.
    let (tried, took) = timed(mx.try_write().key(&keys[0])).await;
    assert!(
        took < validity(ttl) + GIVE_UP + SLACK,
        "try_write took {took:?}: {tried:?}"
    );
    assert!(
        matches!(tried, Ok(None) | Err(Error::Timeout | Error::Redis { .. })),
        "{tried:?}"
    );
    let (waited, took) = waiting.await.unwrap();
    assert!(
        took < Duration::from_millis(1500) + GIVE_UP + SLACK,
        "write took {took:?}"
    );
    eprintln!(
        "write().timeout(1.5 s) during the failover: {:?} after {took:?}",
        waited.as_ref().map(Guard::key)
    );

    // The other masters' guards were refreshed all along.
    for guard in guards.iter().filter(|guard| !on_victim(guard)) {
        assert!(
            !guard.is_cancelled(),
            "{}: {:?}",
            guard.key(),
            guard.cancel_reason()
        );
    }

    let promoted = cluster.wait_failover(victim).await;
    eprintln!(
        "replica {promoted} took over {:?} after the kill",
        killed.elapsed()
    );
    // Every unlock returns within one TTL: true, or false for a lock lost on the way.
    for guard in guards {
        let (released, took) = timed(guard.unlock()).await;
        assert!(took < ttl + SLACK, "unlock took {took:?}");
        if let Err(err) = released {
            assert!(
                matches!(err, Error::Timeout | Error::Redis { .. }),
                "{err:?}"
            );
        }
    }
    // New locks on the victim's slots work, through the same connection and a fresh one,
    // and their tokens are above every earlier one.
    for conn in [conn.clone(), cluster.conn().await] {
        let mx = mutex(&conn, ttl, &cluster);
        let guard = tokio::time::timeout(LIVENESS, mx.write().key(&keys[0]))
            .await
            .expect("acquired after the failover")
            .unwrap();
        assert!(guard.fencing_token() > old_tokens[0]);
        assert_eq!(cluster.master_of_slot(slot(guard.key())), promoted);
        assert!(guard.unlock().await.unwrap());
    }
}

/// A master frozen with SIGSTOP (shorter than the node timeout, so no failover): every
/// call on its slots returns within its own bound, though the connection has no
/// response timeout; after it resumes, everything works again.
#[tokio::test]
async fn a_paused_master_holds_no_call_past_its_bound() {
    let cluster = Cluster::start_with_node_timeout(15_000);
    let conn = cluster.conn().await;
    let ttl = Duration::from_secs(1);
    let mx = mutex(&conn, ttl, &cluster);
    let key = key_on(&cluster, 1);
    let other = key_on(&cluster, 2);
    let paused = cluster.masters()[1].port;
    let held = mx.write().key(&key).await.unwrap();
    let elsewhere = mx.write().key(&other).await.unwrap();

    cluster.pause(paused);
    let frozen = Instant::now();
    let (tried, took) = timed(mx.try_write().key(&key)).await;
    assert!(matches!(tried, Err(Error::Timeout)), "{tried:?}");
    assert!(
        took < validity(ttl) + GIVE_UP + SLACK,
        "try_write took {took:?}"
    );
    let (tried, took) = timed(mx.try_read().key(&key)).await;
    assert!(matches!(tried, Err(Error::Timeout)), "{tried:?}");
    assert!(
        took < validity(ttl) + GIVE_UP + SLACK,
        "try_read took {took:?}"
    );
    let (waited, took) = timed(mx.write().key(&key).timeout(Duration::from_millis(300))).await;
    assert!(
        matches!(waited, Err(Error::Timeout)),
        "{:?}",
        waited.map(|guard| guard.key().to_owned())
    );
    assert!(
        took < Duration::from_millis(300) + GIVE_UP + SLACK,
        "write took {took:?}"
    );

    // The held guard's refresh gets no reply: it fires at its deadline.
    let (_, _) = timed(held.cancelled()).await;
    assert_eq!(held.cancel_reason(), Some(CancelReason::Expired));
    assert!(frozen.elapsed() < validity(ttl) * 3 + GIVE_UP * 2 + SLACK * 2);
    let (released, took) = timed(held.unlock()).await;
    assert!(took < ttl + SLACK, "unlock took {took:?}: {released:?}");
    // A lock on another master is untouched.
    assert!(!elsewhere.is_cancelled(), "{:?}", elsewhere.cancel_reason());

    cluster.resume(paused);
    let guard = tokio::time::timeout(LIVENESS, mx.write().key(&key))
        .await
        .expect("acquired after the resume")
        .unwrap();
    assert!(guard.unlock().await.unwrap());
    assert!(elsewhere.unlock().await.unwrap());
}
