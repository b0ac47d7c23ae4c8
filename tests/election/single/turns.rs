//! Candidates take turns: resign, drop, a lease deleted under the leader, a forced
//! release, `max_hold`; terms strictly grow; `proclaim`; bad input.

use std::time::Duration;

use tokio::time::Instant;

use super::{election, leader};
use crate::common::election::take_turns;
use crate::common::go_peer::GoPeer;
use crate::common::{at_once, raw, RedisServer, LIVENESS};
use redismutex::{CancelReason, Election, Error, RwMutex};

const TTL: Duration = Duration::from_secs(2);

#[tokio::test]
async fn three_candidates_take_turns_and_every_term_is_larger_than_the_last() {
    let server = RedisServer::start();
    let candidates = [
        election(&server, "sched", TTL).await,
        election(&server, "sched", TTL).await,
        election(&server, "sched", TTL).await,
    ];
    let reader = election(&server, "sched", TTL).await;
    let (third, _, mut terms) = take_turns(&candidates, &reader, async |_, _| {}).await;

    // Forced release: the leader loses, a new one comes in at a larger term.
    let operator = RwMutex::new(server.conn().await, "sched");
    assert!(operator.force_unlock("").await.unwrap());
    let fourth = at_once(candidates[0].campaign("a2")).await.unwrap();
    terms.push(fourth.fencing_token());
    tokio::time::timeout(LIVENESS, third.cancelled())
        .await
        .expect("the forced-out leader learns it at its next renewal");
    assert_eq!(third.cancel_reason(), Some(CancelReason::Lost));
    assert!(terms.windows(2).all(|pair| pair[0] < pair[1]), "{terms:?}");
}

#[tokio::test]
async fn a_leader_whose_lease_is_deleted_under_it_sees_its_token_fire_within_half_the_ttl() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let candidate = election(&server, "compactor", TTL).await;
    let leading = at_once(candidate.campaign("a")).await.unwrap();
    let _: () = raw::cmd(&conn, "DEL", &["compactor"]).await;
    let deleted = Instant::now();
    tokio::time::timeout(TTL, leading.cancelled())
        .await
        .expect("the token fires at the next renewal");
    let after = deleted.elapsed();
    assert_eq!(leading.cancel_reason(), Some(CancelReason::Lost));
    // A renewal comes every ttl / 2; the bound adds room for a slow machine.
    assert!(
        after < TTL / 2 + Duration::from_millis(500),
        "fired {after:?} after the delete"
    );
    assert_eq!(candidate.leader().await.unwrap(), None);
    let next = at_once(candidate.try_campaign("b")).await.unwrap().unwrap();
    assert!(next.fencing_token() > leading.fencing_token());
}

#[tokio::test]
async fn proclaim_changes_the_value_keeps_the_term_and_is_refused_to_a_former_leader() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let a = election(&server, "leader-of", TTL).await;
    let b = election(&server, "leader-of", TTL).await;
    let leading = at_once(a.campaign("one")).await.unwrap();
    let term = leading.fencing_token();
    leading.proclaim("two").await.unwrap();
    assert_eq!(b.leader().await.unwrap(), Some(leader("two", term)));
    assert_eq!(
        raw::get(&conn, "leader-of:leader").await.unwrap(),
        format!("{term}:{}:two", leading.guard().id()),
        "the record: term, id, value"
    );

    // The lock is taken from it: its proclaim is refused and changes nothing.
    let _: () = raw::cmd(&conn, "DEL", &["leader-of"]).await;
    let next = at_once(b.campaign("three")).await.unwrap();
    match leading.proclaim("stale").await {
        Err(Error::NotHeld { key, .. }) => assert_eq!(key, "leader-of"),
        other => panic!("a former leader's proclaim: {other:?}"),
    }
    assert_eq!(leading.cancel_reason(), Some(CancelReason::Lost));
    assert_eq!(
        b.leader().await.unwrap(),
        Some(leader("three", next.fencing_token()))
    );
    // Refused at once once the token has fired.
    assert!(matches!(
        at_once(leading.proclaim("again")).await,
        Err(Error::NotHeld { .. })
    ));
    assert!(!leading.resign().await.unwrap(), "it no longer led");
    assert!(next.resign().await.unwrap());
}

#[tokio::test]
async fn a_writer_without_a_record_is_no_leader_and_a_go_client_sees_the_leader_hold_the_lock() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let candidate = election(&server, "jobs", TTL).await;

    // A Go client holding the name: held, but nobody published a record.
    let go = GoPeer::new(conn.clone(), 2000);
    let go_id = GoPeer::new_id();
    assert_eq!(go.write("jobs", &go_id, false).await, None);
    assert_eq!(candidate.leader().await.unwrap(), None);
    assert!(candidate.try_campaign("x").await.unwrap().is_none());
    go.unlock("jobs", &go_id).await;

    // A Rust leader: the Go client finds the lock held.
    let leading = at_once(candidate.campaign("x")).await.unwrap();
    assert!(go.write("jobs", &GoPeer::new_id(), false).await.is_some());
    assert_eq!(
        raw::get(&conn, "jobs").await.as_deref(),
        Some(leading.guard().id())
    );
    leading.resign().await.unwrap();
    // The record stays, naming an id the lock no longer holds: no leader.
    assert!(raw::exists(&conn, "jobs:leader").await);
    assert_eq!(candidate.leader().await.unwrap(), None);
}

#[tokio::test]
async fn max_hold_ends_a_leadership_and_the_next_candidate_leads() {
    let server = RedisServer::start();
    let capped = Election::builder(server.conn().await, "capped")
        .ttl(TTL)
        .max_hold(Duration::from_millis(600))
        .notifier(server.client())
        .build()
        .unwrap();
    let other = election(&server, "capped", TTL).await;
    let leading = at_once(capped.campaign("a")).await.unwrap();
    let next = tokio::spawn(async move { other.campaign("b").timeout(LIVENESS).await });
    tokio::time::timeout(LIVENESS, leading.cancelled())
        .await
        .unwrap();
    assert_eq!(leading.cancel_reason(), Some(CancelReason::MaxHold));
    let next = next.await.unwrap().unwrap();
    assert!(next.fencing_token() > leading.fencing_token());
}

#[tokio::test]
async fn keys_of_another_type_are_refused_by_name_and_left_alone() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let candidate = election(&server, "typed", TTL).await;
    let _: () = raw::cmd(&conn, "HSET", &["typed:leader", "f", "v"]).await;
    match candidate.campaign("a").timeout(LIVENESS).await {
        Err(Error::WrongType { key, found, .. }) => {
            assert_eq!((key.as_str(), found.as_str()), ("typed:leader", "hash"))
        }
        other => panic!("a campaign over a foreign record key: {other:?}"),
    }
    match candidate.leader().await {
        Err(Error::WrongType { key, .. }) => assert_eq!(key, "typed:leader"),
        other => panic!("{other:?}"),
    }
    assert_eq!(raw::key_type(&conn, "typed:leader").await, "hash");
    // The lock the failed campaign took is released.
    assert!(
        crate::common::eventually(|| async { !raw::exists(&conn, "typed").await }).await,
        "the lock of a failed campaign is released"
    );
    let _: () = raw::cmd(&conn, "DEL", &["typed:leader"]).await;
    let _: () = raw::cmd(&conn, "SADD", &["typed", "x"]).await;
    let _: () = raw::cmd(&conn, "PEXPIRE", &["typed", "60000"]).await;
    assert_eq!(
        candidate.leader().await.unwrap(),
        None,
        "readers lead nobody"
    );
    let _: () = raw::cmd(&conn, "DEL", &["typed"]).await;
    let _: () = raw::cmd(&conn, "LPUSH", &["typed", "x"]).await;
    match candidate.leader().await {
        Err(Error::WrongType { key, found, .. }) => {
            assert_eq!((key.as_str(), found.as_str()), ("typed", "list"))
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Election::builder(conn.clone(), "").build(),
        Err(Error::InvalidOptions(_))
    ));
}

#[tokio::test]
async fn a_leader_writes_its_record_again_so_it_outlives_the_fence_retention() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    // The record lives one retention (here 1 s); the leader writes it every half.
    let short = Election::builder(server.conn().await, "long-lead")
        .ttl(Duration::from_secs(1))
        .fence_retention(Duration::from_secs(1))
        .build()
        .unwrap();
    let leading = at_once(short.campaign("a")).await.unwrap();
    let expected = Some(leader("a", leading.fencing_token()));
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert_eq!(short.leader().await.unwrap(), expected);
        let pttl = raw::pttl(&conn, "long-lead:leader").await;
        assert!(
            pttl > 0 && pttl <= 1000,
            "the record's PX is the retention: {pttl}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(leading.resign().await.unwrap());
    // With no leader to write it again, the record goes a retention later.
    assert!(
        crate::common::eventually(|| async { !raw::exists(&conn, "long-lead:leader").await }).await
    );
}

#[tokio::test]
async fn a_value_whose_proclaim_was_dropped_is_kept_and_written_by_the_records_renewal() {
    let server = RedisServer::start();
    let short = Election::builder(server.conn().await, "kept")
        .ttl(Duration::from_secs(1))
        .fence_retention(Duration::from_secs(1))
        .build()
        .unwrap();
    let leading = at_once(short.campaign("a")).await.unwrap();
    // Polled once, then dropped: sent or not, "b" is this leader's value from now on.
    let cut_short = tokio::select! {
        biased;
        _ = leading.proclaim("b") => false,
        () = std::future::ready(()) => true,
    };
    assert!(cut_short, "the proclaim was dropped before its answer");
    let expected = Some(leader("b", leading.fencing_token()));
    assert!(
        crate::common::eventually(|| async { short.leader().await.unwrap() == expected }).await,
        "the record's renewal (every 500 ms here) writes the kept value"
    );
    // And it stays: the renewal never puts "a" back.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(short.leader().await.unwrap(), expected);
    }
}

#[tokio::test]
async fn try_campaign_with_a_parent_leads_under_it_and_refuses_a_cancelled_one() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let candidate = election(&server, "indexer", TTL).await;
    // Already cancelled: refused, and nothing was taken.
    let cancelled = tokio_util::sync::CancellationToken::new();
    cancelled.cancel();
    let err = candidate
        .try_campaign("a")
        .parent(cancelled)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err:?}");
    assert!(!raw::exists(&conn, "indexer").await, "no lock was taken");
    assert_eq!(candidate.leader().await.unwrap(), None);
    // Leading under a live parent: cancelling the parent ends the leadership.
    let parent = tokio_util::sync::CancellationToken::new();
    let leading = candidate
        .try_campaign("b")
        .parent(parent.clone())
        .await
        .unwrap()
        .expect("nobody leads");
    assert_eq!(
        candidate.leader().await.unwrap().map(|l| l.value),
        Some("b".to_owned())
    );
    parent.cancel();
    tokio::time::timeout(LIVENESS, leading.cancelled())
        .await
        .expect("the parent's cancel ends the leadership");
    assert_eq!(leading.cancel_reason(), Some(CancelReason::ParentCancelled));
    assert!(
        crate::common::eventually(|| async { !raw::exists(&conn, "indexer").await }).await,
        "the lock is released"
    );
    // The parent is the leadership's, not the other way round.
    let other = tokio_util::sync::CancellationToken::new();
    let next = candidate
        .try_campaign("c")
        .parent(other.clone())
        .await
        .unwrap()
        .unwrap();
    next.resign().await.unwrap();
    assert!(
        !other.is_cancelled(),
        "resigning does not cancel the parent"
    );
}
