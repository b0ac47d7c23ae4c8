//! Upgradable reads over a quorum: the upgradable reader is held on a majority (its id in
//! the readers' set and at the upgrader key), plain readers share it, writers and a second
//! upgradable reader stay out; `upgrade` waits for a plain reader and then holds the write
//! lock on a majority with a token larger than every earlier one on every node;
//! `try_upgrade` beside a reader gives the guard back, which is still renewed and whose
//! release leaves nothing, also when the upgrade turned a minority of the nodes; an
//! upgraded guard is renewed and downgrades; `downgrade` of the upgradable reader keeps a
//! plain reader; a frozen minority node does not stop an upgrade; a node that lost the
//! upgraded writer's key is taken back under the upgrade's token; an upgrade that won
//! beside a reader on a minority completes there once it leaves, or is released there
//! with its intent. Each test runs on 3 and on 5 nodes.

use std::time::Duration;

use crate::common::quorum::{
    counter, gone_everywhere, on_3_and_5_nodes, on_every_node, raised_everywhere, read_everywhere,
    Fault, Nodes,
};
use crate::common::{at_once, raw, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{Notifier, Quorum, RwMutex};

const KEY: &str = "entry";
const UPGRADER: &str = "entry:upgrader";
const INTENT: &str = "entry:lock-intent";
const FENCE: &str = "entry:fence";
const CHANNEL: &str = "entry:released";
const GRANTED: &str = "entry:fence-granted";
/// Long: no renewal runs while a test looks at the nodes, and a waiter's fallback timer
/// (half the TTL) is past [`LIVENESS`], so only a release notification wakes it in time.
const TTL: Duration = Duration::from_secs(30);
/// Short, for the tests that watch renewals: the guard is renewed every second.
const SHORT_TTL: Duration = Duration::from_secs(2);
/// Past two short TTLs: what renewals did not keep has expired by then.
const PAST_TWO_TTLS: Duration = Duration::from_millis(4500);
/// Another reader's id, written straight into some nodes' readers' sets.
const SOMEONE: &str = "someone-else";

on_3_and_5_nodes!(
    an_upgradable_read_is_held_on_a_majority_beside_plain_readers_only,
    upgrade_waits_for_a_plain_reader_then_writes_with_a_larger_token_everywhere,
    renewals_keep_the_upgrader_key_and_then_the_upgraded_writer,
    try_upgrade_beside_a_reader_gives_the_guard_back_and_its_release_leaves_nothing,
    an_upgrade_that_turned_a_minority_completes_once_the_readers_leave,
    downgrade_keeps_a_plain_reader_and_lets_the_next_upgradable_reader_in,
    a_frozen_minority_node_does_not_stop_an_upgrade,
    a_node_that_lost_the_upgraded_writers_key_is_taken_back,
    an_upgrade_won_beside_a_reader_on_a_minority_completes_there_or_is_released_there,
);

/// A mutex named [`KEY`] over `quorum` with `ttl`, told of releases by every node.
fn notified(
    nodes: &Nodes,
    quorum: Quorum<MultiplexedConnection>,
    ttl: Duration,
) -> RwMutex<Quorum<MultiplexedConnection>> {
    RwMutex::builder(quorum, KEY)
        .ttl(ttl)
        .notifier(Notifier::quorum(nodes.clients()))
        .build()
        .unwrap()
}

/// Every node holds `id` as a reader of [`KEY`] and at [`UPGRADER`].
async fn upgradable_everywhere(conns: &[MultiplexedConnection], id: &str) {
    on_every_node(
        conns,
        &format!("{id} is the upgradable reader"),
        |conn| async move {
            raw::key_type(&conn, KEY).await == "set"
                && raw::members(&conn, KEY)
                    .await
                    .iter()
                    .any(|member| member == id)
                && raw::get(&conn, UPGRADER).await.as_deref() == Some(id)
        },
    )
    .await;
}

/// Every node holds [`KEY`] as the writer's string `id` (a node the upgrade's majority
/// did not wait for may hold the readers' set a little longer).
async fn writer_everywhere(conns: &[MultiplexedConnection], key: &str, id: &str) {
    on_every_node(conns, &format!("{key} = {id}"), |conn| async move {
        raw::key_type(&conn, key).await == "string"
            && raw::get(&conn, key).await.as_deref() == Some(id)
    })
    .await;
}

/// Every node holds `id` as one of the readers of [`KEY`] (the acquire returned once a
/// majority did; the others follow).
async fn reading_everywhere(conns: &[MultiplexedConnection], id: &str) {
    on_every_node(conns, &format!("{id} reads"), |conn| async move {
        raw::key_type(&conn, KEY).await == "set"
            && raw::members(&conn, KEY)
                .await
                .iter()
                .any(|member| member == id)
    })
    .await;
}

/// The largest counter at [`FENCE`] on any node.
async fn largest_counter(conns: &[MultiplexedConnection]) -> u64 {
    let mut largest = 0;
    for conn in conns {
        largest = largest.max(counter(conn, FENCE).await.unwrap_or(0));
    }
    largest
}

/// Adds [`SOMEONE`] to the readers' set of [`KEY`] on each of `conns`.
async fn someone_reads(conns: &[MultiplexedConnection]) {
    for conn in conns {
        let added: i64 = raw::cmd(conn, "SADD", &[KEY, SOMEONE]).await;
        assert_eq!(added, 1);
    }
}

/// Removes [`SOMEONE`] from the readers' set of [`KEY`] on each of `conns`, and publishes
/// its release there as `unlock.lua` does: the number of nodes where it was a reader.
async fn someone_leaves(conns: &[MultiplexedConnection]) -> usize {
    let mut removed = 0;
    for conn in conns {
        let gone: i64 = raw::cmd(conn, "SREM", &[KEY, SOMEONE]).await;
        let _: i64 = raw::cmd(conn, "PUBLISH", &[CHANNEL, SOMEONE]).await;
        removed += usize::try_from(gone).unwrap();
    }
    removed
}

/// Whether no node holds anything of the lock but [`SOMEONE`]'s read: no writer's
/// string, no other reader, no upgrader key nor intent.
async fn only_someone_left(conns: &[MultiplexedConnection]) -> bool {
    for conn in conns {
        let clean = match raw::key_type(conn, KEY).await.as_str() {
            "none" => true,
            "set" => raw::members(conn, KEY).await == [SOMEONE],
            _ => false,
        };
        if !clean || raw::exists(conn, UPGRADER).await || raw::exists(conn, INTENT).await {
            return false;
        }
    }
    true
}

/// Nothing of the lock is left on any node: no lock key, upgrader key nor intent.
async fn nothing_left(conns: &[MultiplexedConnection]) {
    for key in [KEY, UPGRADER, INTENT] {
        gone_everywhere(conns, key).await;
    }
}

async fn an_upgradable_read_is_held_on_a_majority_beside_plain_readers_only(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = nodes.mutex(KEY, TTL).await;
    let others = nodes.mutex(KEY, TTL).await;

    let upgradable = mx.upgradable_read().await.unwrap();
    upgradable_everywhere(&conns, upgradable.id()).await;
    raised_everywhere(&conns, FENCE, upgradable.fencing_token()).await;

    let reader = others
        .try_read()
        .await
        .unwrap()
        .expect("a plain reader shares it");
    assert!(reader.fencing_token() > upgradable.fencing_token());
    assert!(
        others.try_write().await.unwrap().is_none(),
        "a writer got in"
    );
    assert!(
        others.try_upgradable_read().await.unwrap().is_none(),
        "a second upgradable reader got in"
    );
    let second = others
        .upgradable_read()
        .timeout(Duration::from_millis(300))
        .await;
    assert!(
        matches!(second, Err(redismutex::Error::Timeout)),
        "{second:?}"
    );

    // Once it leaves, the next upgradable reader gets in beside the plain one.
    assert!(at_once(upgradable.unlock()).await.unwrap());
    gone_everywhere(&conns, UPGRADER).await;
    let next = others
        .try_upgradable_read()
        .await
        .unwrap()
        .expect("free now");
    upgradable_everywhere(&conns, next.id()).await;
    assert!(next.unlock().await.unwrap());
    assert!(reader.unlock().await.unwrap());
    nothing_left(&conns).await;
}

async fn upgrade_waits_for_a_plain_reader_then_writes_with_a_larger_token_everywhere(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = notified(&nodes, nodes.quorum().await, TTL);
    let others = notified(&nodes, nodes.quorum().await, TTL);

    let upgradable = mx.upgradable_read().await.unwrap();
    let read_token = upgradable.fencing_token();
    let reader = others.read().await.unwrap();
    reading_everywhere(&conns, reader.id()).await;
    let reader_token = reader.fencing_token();
    let upgrading = tokio::spawn(upgradable.upgrade());
    // The upgrade sets the intent on every node: new readers and writers stay out.
    on_every_node(&conns, "the upgrade's intent", |conn| async move {
        raw::exists(&conn, INTENT).await
    })
    .await;
    assert!(
        others.try_read().await.unwrap().is_none(),
        "a new reader joined"
    );
    assert!(others.try_write().await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!upgrading.is_finished(), "upgraded beside a reader");

    // The reader leaves: its release wakes the upgrade (the fallback timer is 15 s).
    let before = largest_counter(&conns).await;
    assert!(reader.unlock().await.unwrap());
    let writer = tokio::time::timeout(LIVENESS, upgrading)
        .await
        .expect("woken by the reader's release")
        .unwrap()
        .unwrap();
    let token = writer.fencing_token();
    assert!(
        token > before && before >= reader_token && reader_token > read_token,
        "{read_token} < {reader_token} <= {before} < {token}"
    );
    writer_everywhere(&conns, KEY, writer.id()).await;
    raised_everywhere(&conns, FENCE, token).await;
    for key in [INTENT, UPGRADER] {
        gone_everywhere(&conns, key).await;
    }
    assert!(others.try_read().await.unwrap().is_none());
    assert!(others.try_write().await.unwrap().is_none());

    // The next writer's token is larger still.
    assert!(writer.unlock().await.unwrap());
    gone_everywhere(&conns, KEY).await;
    let next = others.try_write().await.unwrap().expect("free now");
    assert!(next.fencing_token() > token);
    assert!(next.unlock().await.unwrap());
}

async fn renewals_keep_the_upgrader_key_and_then_the_upgraded_writer(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = nodes.mutex(KEY, SHORT_TTL).await;

    let upgradable = mx.upgradable_read().await.unwrap();
    tokio::time::sleep(PAST_TWO_TTLS).await;
    assert!(
        !upgradable.is_cancelled(),
        "{:?}",
        upgradable.cancel_reason()
    );
    upgradable_everywhere(&conns, upgradable.id()).await;

    let writer = at_once(upgradable.upgrade()).await.unwrap();
    writer_everywhere(&conns, KEY, writer.id()).await;
    tokio::time::sleep(PAST_TWO_TTLS).await;
    assert!(!writer.is_cancelled(), "{:?}", writer.cancel_reason());
    writer_everywhere(&conns, KEY, writer.id()).await;

    // The upgraded writer downgrades to a reader on every node, and is renewed as one.
    let token = writer.fencing_token();
    let reader = writer.downgrade().await.unwrap();
    assert_eq!(reader.fencing_token(), token);
    read_everywhere(&conns, KEY, &[reader.id()]).await;
    tokio::time::sleep(PAST_TWO_TTLS).await;
    assert!(!reader.is_cancelled(), "{:?}", reader.cancel_reason());
    read_everywhere(&conns, KEY, &[reader.id()]).await;
    assert!(reader.unlock().await.unwrap());
    nothing_left(&conns).await;
}

async fn try_upgrade_beside_a_reader_gives_the_guard_back_and_its_release_leaves_nothing(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = nodes.mutex(KEY, SHORT_TTL).await;
    let others = nodes.mutex(KEY, SHORT_TTL).await;

    // A reader on every node: no node upgrades, and nothing is set.
    let upgradable = mx.upgradable_read().await.unwrap();
    let reader = others.read().await.unwrap();
    reading_everywhere(&conns, reader.id()).await;
    let upgradable = match upgradable.try_upgrade().await.unwrap() {
        Ok(writer) => panic!("upgraded beside a reader: {writer:?}"),
        Err(upgradable) => upgradable,
    };
    for conn in &conns {
        assert!(
            !raw::exists(conn, INTENT).await,
            "try_upgrade set the intent"
        );
    }
    upgradable_everywhere(&conns, upgradable.id()).await;
    assert!(reader.unlock().await.unwrap());

    // Another reader on a bare majority only: the other nodes upgrade, the majority does
    // not, and the guard comes back with the id in both forms.
    let majority = nodes.majority();
    someone_reads(&conns[..majority]).await;
    let upgradable = match upgradable.try_upgrade().await.unwrap() {
        Ok(writer) => panic!("upgraded beside a reader on a majority: {writer:?}"),
        Err(upgradable) => upgradable,
    };
    let id = upgradable.id().to_owned();
    writer_everywhere(&conns[majority..], KEY, &id).await;
    for conn in &conns[..majority] {
        let mut members = raw::members(conn, KEY).await;
        members.sort();
        let mut expected = vec![id.clone(), SOMEONE.to_owned()];
        expected.sort();
        assert_eq!(members, expected);
        assert_eq!(raw::get(conn, UPGRADER).await.as_deref(), Some(id.as_str()));
    }

    // The guard still works: renewed past two TTLs in both forms, held all along.
    tokio::time::sleep(PAST_TWO_TTLS).await;
    assert!(
        !upgradable.is_cancelled(),
        "{:?}",
        upgradable.cancel_reason()
    );
    writer_everywhere(&conns[majority..], KEY, &id).await;
    upgradable_everywhere(&conns[..majority], &id).await;
    assert!(
        others.try_write().await.unwrap().is_none(),
        "a writer got in"
    );

    // Its release removes the id in either form from every node, well before the TTL
    // would (a second at least is left since the last renewal).
    assert!(upgradable.unlock().await.unwrap());
    let released = tokio::time::timeout(Duration::from_millis(500), async {
        while !only_someone_left(&conns).await {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        released.is_ok(),
        "the id, its upgrader key or intent is left"
    );
    gone_everywhere(&conns[majority..], KEY).await;
    // The other reader's set lives by the TTL our renewals gave it, and may be gone.
    someone_leaves(&conns[..majority]).await;
    nothing_left(&conns).await;
}

async fn an_upgrade_that_turned_a_minority_completes_once_the_readers_leave(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = notified(&nodes, nodes.quorum().await, TTL);

    // A reader on a bare majority: try_upgrade turns the other nodes only.
    let upgradable = mx.upgradable_read().await.unwrap();
    let majority = nodes.majority();
    someone_reads(&conns[..majority]).await;
    let upgradable = match upgradable.try_upgrade().await.unwrap() {
        Ok(writer) => panic!("upgraded beside a reader on a majority: {writer:?}"),
        Err(upgradable) => upgradable,
    };
    let id = upgradable.id().to_owned();
    writer_everywhere(&conns[majority..], KEY, &id).await;

    // A waiting upgrade: the turned nodes answer again (a resent upgrade), the others
    // get the intent, and it completes once the reader leaves them.
    let upgrading = tokio::spawn(upgradable.upgrade());
    on_every_node(&conns[..majority], "the upgrade's intent", |conn| {
        let id = id.clone();
        async move { raw::get(&conn, INTENT).await.as_deref() == Some(id.as_str()) }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!upgrading.is_finished(), "upgraded beside a reader");
    let before = largest_counter(&conns).await;
    assert_eq!(someone_leaves(&conns[..majority]).await, majority);
    // Its published release wakes the upgrade (the fallback timer is 15 s).
    let writer = tokio::time::timeout(LIVENESS, upgrading)
        .await
        .expect("upgraded once the reader left")
        .unwrap()
        .unwrap();
    assert_eq!(writer.id(), id);
    assert!(writer.fencing_token() > before);
    writer_everywhere(&conns, KEY, &id).await;
    raised_everywhere(&conns, FENCE, writer.fencing_token()).await;
    gone_everywhere(&conns, INTENT).await;
    assert!(writer.unlock().await.unwrap());
    nothing_left(&conns).await;
}

async fn downgrade_keeps_a_plain_reader_and_lets_the_next_upgradable_reader_in(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = notified(&nodes, nodes.quorum().await, TTL);
    let others = notified(&nodes, nodes.quorum().await, TTL);

    let upgradable = mx.upgradable_read().await.unwrap();
    let token = upgradable.fencing_token();
    let waiting = tokio::spawn(async move { others.upgradable_read().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "a second upgradable reader got in");

    let reader = at_once(upgradable.downgrade()).await.unwrap();
    assert_eq!(reader.fencing_token(), token);
    // The waiting upgradable reader is told, and gets in beside the plain one.
    let next = tokio::time::timeout(LIVENESS, waiting)
        .await
        .expect("woken by the downgrade")
        .unwrap()
        .unwrap();
    let mut ids = [reader.id(), next.id()];
    ids.sort_unstable();
    read_everywhere(&conns, KEY, &ids).await;
    upgradable_everywhere(&conns, next.id()).await;
    assert!(reader.unlock().await.unwrap());
    assert!(next.unlock().await.unwrap());
    nothing_left(&conns).await;
}

async fn a_frozen_minority_node_does_not_stop_an_upgrade(n: usize) {
    let mut nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = nodes.mutex(KEY, SHORT_TTL).await;

    let upgradable = mx.upgradable_read().await.unwrap();
    upgradable_everywhere(&conns, upgradable.id()).await;
    let before = largest_counter(&conns).await;
    let minority = nodes.minority();
    nodes.fault(Fault::Freeze, 0..minority);

    let writer = tokio::time::timeout(LIVENESS, upgradable.upgrade())
        .await
        .expect("upgraded without the frozen nodes")
        .unwrap();
    assert!(writer.fencing_token() > before);
    let up = &conns[minority..];
    writer_everywhere(up, KEY, writer.id()).await;
    raised_everywhere(up, FENCE, writer.fencing_token()).await;
    // Renewed on the majority while the minority stays frozen.
    tokio::time::sleep(PAST_TWO_TTLS).await;
    assert!(!writer.is_cancelled(), "{:?}", writer.cancel_reason());
    writer_everywhere(up, KEY, writer.id()).await;

    assert!(writer.unlock().await.unwrap());
    nodes.thaw_all();
    // The frozen nodes run what they were sent, or their keys expire.
    nothing_left(&conns).await;
}

async fn a_node_that_lost_the_upgraded_writers_key_is_taken_back(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = nodes.mutex(KEY, SHORT_TTL).await;

    let upgradable = mx.upgradable_read().await.unwrap();
    // A majority's counters far ahead: every majority that decides the upgrade has one of
    // them, so its token is theirs, larger than the token the last node mints, whose
    // granted token the second round then raises past its own.
    // (After the acquire's calls have ended on every node.)
    upgradable_everywhere(&conns, upgradable.id()).await;
    raised_everywhere(&conns, GRANTED, upgradable.fencing_token()).await;
    let ahead = largest_counter(&conns).await + 1_000_000_000;
    for conn in &conns[..nodes.majority()] {
        let _: () = raw::cmd(conn, "SET", &[FENCE, &ahead.to_string(), "PX", "600000"]).await;
    }
    let writer = at_once(upgradable.upgrade()).await.unwrap();
    let token = writer.fencing_token();
    assert!(token > ahead, "{token} <= {ahead}");
    writer_everywhere(&conns, KEY, writer.id()).await;
    raised_everywhere(&conns, GRANTED, token).await;

    // The last node loses the key (its granted token stays the upgrade's): the next
    // renewal takes it back under the writer's token.
    let last = &conns[n - 1];
    let deleted: i64 = raw::cmd(last, "DEL", &[KEY]).await;
    assert_eq!(deleted, 1);
    writer_everywhere(&conns, KEY, writer.id()).await;
    assert!(!writer.is_cancelled(), "{:?}", writer.cancel_reason());
    assert!(writer.unlock().await.unwrap());
    nothing_left(&conns).await;
}

async fn an_upgrade_won_beside_a_reader_on_a_minority_completes_there_or_is_released_there(
    n: usize,
) {
    // Tops up back off to ttl/8 and stop at ttl/2: 1.25 s and 5 s.
    const TOP_UP_TTL: Duration = Duration::from_secs(10);
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = nodes.mutex(KEY, TOP_UP_TTL).await;
    let (minority, majority) = (&conns[..nodes.minority()], &conns[nodes.minority()..]);

    // Won on the majority; on the minority the other reader keeps it out, and the
    // upgrade's intent keeps new readers out there.
    for release_first in [false, true] {
        let upgradable = mx.upgradable_read().await.unwrap();
        someone_reads(minority).await;
        let writer = at_once(upgradable.upgrade()).await.unwrap();
        let id = writer.id().to_owned();
        writer_everywhere(majority, KEY, &id).await;
        for conn in minority {
            let mut members = raw::members(conn, KEY).await;
            members.sort();
            let mut expected = vec![id.clone(), SOMEONE.to_owned()];
            expected.sort();
            assert_eq!(members, expected);
            assert_eq!(raw::get(conn, INTENT).await.as_deref(), Some(id.as_str()));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        if release_first {
            // Released while the other reader is still there: the id and its intent go
            // from the minority too.
            assert!(writer.unlock().await.unwrap());
            let released = tokio::time::timeout(Duration::from_millis(500), async {
                while !only_someone_left(&conns).await {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await;
            assert!(released.is_ok(), "the id or its intent is left");
            assert_eq!(someone_leaves(minority).await, minority.len());
        } else {
            // The other reader leaves (no release published): the top-up upgrades the
            // minority in the background.
            assert_eq!(someone_leaves(minority).await, minority.len());
            writer_everywhere(&conns, KEY, &id).await;
            gone_everywhere(&conns, INTENT).await;
            assert!(writer.unlock().await.unwrap());
        }
        nothing_left(&conns).await;
    }
}
