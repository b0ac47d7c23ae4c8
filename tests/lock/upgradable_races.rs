//! Upgradable reads under contention, on one real server: an upgrade against a writer
//! already waiting with its intent, two tasks racing for the one upgradable read, an
//! upgrade while a frozen reader's id is left in the readers' set, a reentrant mutex's
//! upgradable read (never nested), and a stress of many tasks mixing reads, writes and
//! upgradable reads that may upgrade, checked in process.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common;
use crate::common::{at_once, eventually, raw, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, RwMutex, UpgradableReadGuard};

const KEY: &str = "entry";
const UPGRADER: &str = "entry:upgrader";
const INTENT: &str = "entry:lock-intent";
/// Long enough that no lock here expires unless a test makes it.
const TTL: Duration = Duration::from_secs(30);

/// A mutex named `entry` on its own connection to `server`, with a `ttl`, the lock
/// intent on, and release notifications.
async fn notified(server: &RedisServer, ttl: Duration) -> RwMutex<MultiplexedConnection> {
    RwMutex::builder(server.conn().await, KEY)
        .ttl(ttl)
        .lock_intent(true)
        .notifier(server.client())
        .build()
        .unwrap()
}

/// A writer that set its intent before the upgrade began: the upgrade still finishes
/// first (the lock stays a readers' set holding the upgrader's id, which the writer
/// cannot take), the writer's intent is left for it, and the writer gets in only after
/// the upgraded guard's release, with a larger token.
#[tokio::test]
async fn an_upgrade_finishes_before_a_writer_already_waiting_with_intent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server, TTL).await;
    let writers = notified(&server, TTL).await;

    let upgradable = mx.upgradable_read().await.unwrap();
    let reader = mx.read().await.unwrap();
    let upgraded_inside = Arc::new(AtomicBool::new(false));
    let writer = {
        let upgraded_inside = Arc::clone(&upgraded_inside);
        tokio::spawn(async move {
            let guard = writers.write().await.unwrap();
            let overlapped = upgraded_inside.load(Ordering::SeqCst);
            (guard, overlapped)
        })
    };
    // The writer waits with its own id as the intent.
    assert!(eventually(|| async { raw::exists(&conn, INTENT).await }).await);
    let writer_intent = raw::get(&conn, INTENT).await.unwrap();
    assert_ne!(writer_intent, upgradable.id());

    let upgrading = tokio::spawn(upgradable.upgrade());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!upgrading.is_finished(), "upgraded beside a plain reader");
    assert_eq!(
        raw::get(&conn, INTENT).await.as_deref(),
        Some(writer_intent.as_str()),
        "the upgrade replaced the waiting writer's intent"
    );

    assert!(reader.unlock().await.unwrap());
    let upgraded = tokio::time::timeout(LIVENESS, upgrading)
        .await
        .expect("the upgrade finishes once the plain reader left")
        .unwrap()
        .unwrap();
    upgraded_inside.store(true, Ordering::SeqCst);
    assert_eq!(raw::get(&conn, KEY).await.as_deref(), Some(upgraded.id()));
    assert_eq!(
        raw::get(&conn, INTENT).await.as_deref(),
        Some(writer_intent.as_str()),
        "the waiting writer's intent is its own to remove"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !writer.is_finished(),
        "the writer got in beside the upgraded guard"
    );

    let upgraded_token = upgraded.fencing_token();
    upgraded_inside.store(false, Ordering::SeqCst);
    assert!(upgraded.unlock().await.unwrap());
    let (guard, overlapped) = tokio::time::timeout(LIVENESS, writer)
        .await
        .expect("the writer gets in after the upgraded guard's release")
        .unwrap();
    assert!(
        !overlapped,
        "the writer got in while the upgraded guard held"
    );
    assert!(guard.fencing_token() > upgraded_token);
    assert!(
        !raw::exists(&conn, INTENT).await,
        "the writer left its intent"
    );
    assert!(guard.unlock().await.unwrap());
}

/// How the first upgradable reader of the race lets go.
#[derive(Debug, Clone, Copy)]
enum LetGo {
    Unlock,
    Downgrade,
    /// Upgrades (alone, at once), then releases the write lock.
    UpgradeThenUnlock,
}

/// Two tasks ask for the upgradable read at once: one gets it, the other waits, and gets
/// it once the first lets go: by a release, by a downgrade to a plain reader (beside
/// which it then gets in), or by an upgrade whose write lock it waits out.
#[tokio::test]
async fn two_tasks_race_for_the_upgradable_read_and_the_loser_gets_it_after() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    for let_go in [LetGo::Unlock, LetGo::Downgrade, LetGo::UpgradeThenUnlock] {
        let _: () = raw::cmd(&conn, "FLUSHALL", &[]).await;
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<UpgradableReadGuard>();
        for _ in 0..2 {
            let mx = notified(&server, TTL).await;
            let (barrier, tx) = (Arc::clone(&barrier), tx.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let guard = mx.upgradable_read().timeout(TTL).await.unwrap();
                tx.send(guard).unwrap();
            });
        }
        let first = at_once(rx.recv()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(rx.try_recv().is_err(), "both got the upgradable read");
        assert_eq!(raw::members(&conn, KEY).await, [first.id()]);
        assert_eq!(raw::get(&conn, UPGRADER).await.as_deref(), Some(first.id()));

        let kept = match let_go {
            LetGo::Unlock => {
                assert!(at_once(first.unlock()).await.unwrap());
                None
            }
            LetGo::Downgrade => Some(at_once(first.downgrade()).await.unwrap()),
            LetGo::UpgradeThenUnlock => {
                let writer = at_once(first.upgrade()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(300)).await;
                assert!(rx.try_recv().is_err(), "an upgradable read beside a writer");
                assert!(at_once(writer.unlock()).await.unwrap());
                None
            }
        };
        let second = tokio::time::timeout(LIVENESS, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("the loser waits on after {let_go:?}"))
            .unwrap();
        assert_eq!(
            raw::get(&conn, UPGRADER).await.as_deref(),
            Some(second.id())
        );
        let mut expected = vec![second.id().to_owned()];
        expected.extend(kept.as_ref().map(|reader| reader.id().to_owned()));
        expected.sort();
        assert_eq!(raw::members(&conn, KEY).await, expected);
        if let Some(reader) = kept {
            assert!(second.fencing_token() > reader.fencing_token());
            // The second upgrader waits for the downgraded reader, then upgrades.
            let upgrading = tokio::spawn(second.upgrade());
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(
                !upgrading.is_finished(),
                "upgraded beside the downgraded reader"
            );
            assert!(reader.unlock().await.unwrap());
            let writer = tokio::time::timeout(LIVENESS, upgrading)
                .await
                .expect("the upgrade finishes once the downgraded reader left")
                .unwrap()
                .unwrap();
            assert!(writer.unlock().await.unwrap());
        } else {
            assert!(second.unlock().await.unwrap());
        }
        assert!(!raw::exists(&conn, KEY).await);
        assert!(!raw::exists(&conn, UPGRADER).await);
    }
}

/// A writer waiting with its intent gives up while an upgrade waits behind the same
/// intent: its release of the intent wakes the upgrade, which sets its own, so new
/// readers stay out until the upgrade is done.
#[tokio::test]
async fn a_writer_giving_up_its_intent_leaves_the_waiting_upgrade_its_own() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server, TTL).await;
    let writers = notified(&server, TTL).await;
    let upgradable = mx.upgradable_read().await.unwrap();
    let reader = mx.read().await.unwrap();
    let writer = tokio::spawn(async move {
        writers
            .write()
            .timeout(Duration::from_millis(800))
            .await
            .map(drop)
    });
    assert!(eventually(|| async { raw::exists(&conn, INTENT).await }).await);
    let upgrade_id = upgradable.id().to_owned();
    let upgrading = tokio::spawn(upgradable.upgrade());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_ne!(
        raw::get(&conn, INTENT).await.as_deref(),
        Some(upgrade_id.as_str())
    );

    let gave_up = at_once(writer).await.unwrap();
    assert!(matches!(gave_up, Err(Error::Timeout)), "{gave_up:?}");
    let own = eventually(|| async {
        raw::get(&conn, INTENT).await.as_deref() == Some(upgrade_id.as_str())
    })
    .await;
    assert!(
        own,
        "the waiting upgrade did not set its intent after the writer's"
    );
    assert!(
        mx.try_read().await.unwrap().is_none(),
        "a new reader joined"
    );
    assert!(!upgrading.is_finished());
    assert!(reader.unlock().await.unwrap());
    let upgraded = tokio::time::timeout(LIVENESS, upgrading)
        .await
        .expect("the upgrade finishes once the reader left")
        .unwrap()
        .unwrap();
    assert!(!raw::exists(&conn, INTENT).await);
    assert!(upgraded.unlock().await.unwrap());
}

/// An upgradable reader whose upgrader key is gone (expired while its process stood
/// still; deleted here) is still a reader, and another upgradable reader may come in;
/// but only one of them can upgrade: the one the upgrader key names. The other's upgrade
/// is refused (`NotHeld`) and its guard released, and the next one's waits until then.
#[tokio::test]
async fn an_upgradable_reader_whose_upgrader_key_was_lost_cannot_upgrade_beside_the_next() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server, TTL).await;
    let stale = mx.upgradable_read().await.unwrap();
    let _: () = raw::cmd(&conn, "DEL", &[UPGRADER]).await;
    let next = mx
        .try_upgradable_read()
        .await
        .unwrap()
        .expect("the upgrader key is gone: the next upgradable reader gets in");
    assert_eq!(raw::get(&conn, UPGRADER).await.as_deref(), Some(next.id()));

    let upgrading = tokio::spawn(next.upgrade());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!upgrading.is_finished(), "upgraded beside the stale reader");
    let stale_id = stale.id().to_owned();
    let refused = at_once(stale.upgrade()).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
    let upgraded = tokio::time::timeout(LIVENESS, upgrading).await;
    let writer = upgraded
        .unwrap_or_else(|_| {
            panic!(
                "the next upgrade still waits: the refused stale reader {stale_id} was \
                 not released, and the next upgrader's renewals keep its id in the set"
            )
        })
        .unwrap()
        .unwrap();
    assert_eq!(raw::get(&conn, KEY).await.as_deref(), Some(writer.id()));
    assert!(writer.unlock().await.unwrap());
}

/// A reader whose process froze: its id stays in the readers' set (added raw here, as a
/// stopped process leaves it) with no one renewing it. The readers share one TTL, and
/// the upgrader's own renewals keep the set, and the frozen id with it, alive: the
/// upgrade waits until it is given up (the reentrancy guide says so and advises a
/// timeout). Given up, the upgrader is released with its intent, and the frozen id then
/// expires with the set, so a writer gets in.
#[tokio::test]
async fn a_frozen_readers_id_holds_the_upgrade_until_it_is_given_up() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_millis(1_000);
    let mx = notified(&server, ttl).await;
    let frozen = common::go_peer::GoPeer::new_id();
    let _: () = raw::cmd(&conn, "SADD", &[KEY, &frozen]).await;
    let _: () = raw::cmd(&conn, "PEXPIRE", &[KEY, "1000"]).await;

    let upgradable = mx.upgradable_read().await.unwrap();
    let upgrade = tokio::time::timeout(Duration::from_secs(3), upgradable.upgrade()).await;
    assert!(
        upgrade.is_err(),
        "upgraded beside a reader's id: {upgrade:?}"
    );
    assert_eq!(
        raw::members(&conn, KEY).await.len(),
        2,
        "three TTLs later the frozen id is still there, kept by the upgrader's renewals"
    );
    // Given up: the upgrader leaves with its intent, and nothing renews the set.
    assert!(
        eventually(|| async {
            raw::members(&conn, KEY).await == [frozen.clone()]
                && !raw::exists(&conn, INTENT).await
                && !raw::exists(&conn, UPGRADER).await
        })
        .await
    );
    assert!(eventually(|| async { !raw::exists(&conn, KEY).await }).await);
    let writer = at_once(mx.write()).await.unwrap();
    assert!(writer.unlock().await.unwrap());
}

/// On a reentrant mutex an upgradable read is a lock of its own: beside a plain read
/// guard of the same task it gets a second id (and the plain read after it a third, not
/// the upgradable reader's), and its upgrade waits for that task's own plain readers.
#[tokio::test]
async fn a_reentrant_mutexs_upgradable_read_is_not_nested() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), KEY)
        .ttl(TTL)
        .reentrant(true)
        .build()
        .unwrap();

    let outer = mx.read().await.unwrap();
    let nested = mx.read().await.unwrap();
    assert_eq!(nested.id(), outer.id(), "plain reads nest on this mutex");
    let upgradable = at_once(mx.upgradable_read()).await.unwrap();
    assert_ne!(upgradable.id(), outer.id(), "the upgradable read nested");
    let after = mx.read().await.unwrap();
    assert_eq!(
        after.id(),
        outer.id(),
        "a later plain read nests on the plain one"
    );
    assert_ne!(after.id(), upgradable.id());
    let mut ids = vec![outer.id().to_owned(), upgradable.id().to_owned()];
    ids.sort();
    assert_eq!(raw::members(&conn, KEY).await, ids, "two guards, two ids");
    assert!(
        at_once(mx.try_upgradable_read()).await.unwrap().is_none(),
        "a second upgradable read of the same task got in"
    );

    // Its upgrade waits for the task's own plain reader, which it does not count as its.
    let upgradable = match at_once(upgradable.try_upgrade()).await.unwrap() {
        Ok(writer) => panic!("upgraded beside the task's own plain reader: {writer:?}"),
        Err(upgradable) => upgradable,
    };
    let upgrading = tokio::spawn(upgradable.upgrade());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!upgrading.is_finished(), "upgraded beside the plain reader");
    drop((after, nested));
    assert!(outer.unlock().await.unwrap());
    let writer = tokio::time::timeout(LIVENESS, upgrading)
        .await
        .expect("the upgrade finishes once the plain reader left")
        .unwrap()
        .unwrap();
    assert_eq!(raw::get(&conn, KEY).await.as_deref(), Some(writer.id()));
    assert!(writer.unlock().await.unwrap());
    assert!(!raw::exists(&conn, KEY).await);
}

/// What the stress's tasks saw, counted as they entered and left their sections (each
/// section entered after its lock was granted and left before it was released, so a
/// correct lock never shows an overlap here).
#[derive(Default)]
struct Checker {
    /// Readers inside now, an upgradable reader included.
    readers: AtomicU64,
    /// Writers inside now, an upgraded one included.
    writers: AtomicU64,
    /// Upgradable readers inside now.
    upgradable: AtomicU64,
    /// Bumped by every writer section: an upgrade must find it as its read found it.
    version: AtomicU64,
    /// The largest writer token seen.
    last_writer_token: AtomicU64,
    /// Each violation found, described.
    violations: std::sync::Mutex<Vec<String>>,
    /// Sections completed: (plain reads, plain writes, upgradable reads, upgrades).
    reads: AtomicU64,
    writes: AtomicU64,
    upgradable_reads: AtomicU64,
    upgrades: AtomicU64,
}

impl Checker {
    fn violation(&self, what: String) {
        self.violations.lock().unwrap().push(what);
    }

    fn enter_reader(&self, token: u64, what: &str) {
        self.readers.fetch_add(1, Ordering::SeqCst);
        let writers = self.writers.load(Ordering::SeqCst);
        if writers != 0 {
            self.violation(format!("{what} entered beside {writers} writer(s)"));
        }
        let last = self.last_writer_token.load(Ordering::SeqCst);
        if token <= last {
            self.violation(format!("{what} token {token} not above writer's {last}"));
        }
    }

    fn enter_writer(&self, token: u64, what: &str) {
        let writers = self.writers.fetch_add(1, Ordering::SeqCst);
        let readers = self.readers.load(Ordering::SeqCst);
        if writers != 0 || readers != 0 {
            self.violation(format!(
                "{what} entered beside {writers} writer(s) and {readers} reader(s)"
            ));
        }
        let last = self.last_writer_token.fetch_max(token, Ordering::SeqCst);
        if token <= last {
            self.violation(format!(
                "{what} token {token} not above the last writer's {last}"
            ));
        }
    }

    fn write_section(&self) {
        self.version.fetch_add(1, Ordering::SeqCst);
    }
}

/// One section of a stress task: a plain read, a plain write, or an upgradable read that
/// upgrades (and writes) or lets go, by release or by downgrade.
async fn stress_step(
    mx: &RwMutex<MultiplexedConnection>,
    checker: &Checker,
    pick: u32,
) -> Result<(), Error> {
    let bound = Duration::from_secs(20);
    let hold = Duration::from_millis(u64::from(pick % 7));
    match pick % 10 {
        0..=3 => {
            let guard = mx.read().timeout(bound).await?;
            checker.enter_reader(guard.fencing_token(), "reader");
            tokio::time::sleep(hold).await;
            checker.readers.fetch_sub(1, Ordering::SeqCst);
            checker.reads.fetch_add(1, Ordering::SeqCst);
            guard.unlock().await?;
        }
        4..=5 => {
            let guard = mx.write().timeout(bound).await?;
            checker.enter_writer(guard.fencing_token(), "writer");
            checker.write_section();
            let mut set = redis::pipe();
            set.incr("data", 1).ignore();
            let () = guard.exec(&set).await?;
            tokio::time::sleep(hold).await;
            checker.writers.fetch_sub(1, Ordering::SeqCst);
            checker.writes.fetch_add(1, Ordering::SeqCst);
            guard.unlock().await?;
        }
        _ => {
            let guard = mx.upgradable_read().timeout(bound).await?;
            if checker.upgradable.fetch_add(1, Ordering::SeqCst) != 0 {
                checker.violation("two upgradable readers at once".into());
            }
            checker.enter_reader(guard.fencing_token(), "upgradable reader");
            let version = checker.version.load(Ordering::SeqCst);
            let mut get = redis::pipe();
            get.get("data");
            let (data,): (Option<u64>,) = guard.exec(&get).await?;
            tokio::time::sleep(hold).await;
            checker.upgradable_reads.fetch_add(1, Ordering::SeqCst);
            match pick % 3 {
                0 => {
                    let writer = tokio::time::timeout(bound, guard.upgrade())
                        .await
                        .map_err(|_| Error::Timeout)??;
                    // Now the writer: no longer counted as a reader nor an upgrader.
                    checker.upgradable.fetch_sub(1, Ordering::SeqCst);
                    checker.readers.fetch_sub(1, Ordering::SeqCst);
                    checker.enter_writer(writer.fencing_token(), "upgraded writer");
                    let now = checker.version.load(Ordering::SeqCst);
                    if now != version {
                        checker.violation(format!(
                            "a writer came between an upgradable read ({version}) and its \
                             upgrade ({now})"
                        ));
                    }
                    let mut incr = redis::pipe();
                    incr.get("data").incr("data", 1).ignore();
                    let (again,): (Option<u64>,) = writer.exec(&incr).await?;
                    if again != data {
                        checker.violation(format!(
                            "data changed between the upgradable read ({data:?}) and the \
                             upgrade ({again:?})"
                        ));
                    }
                    checker.write_section();
                    tokio::time::sleep(hold).await;
                    checker.writers.fetch_sub(1, Ordering::SeqCst);
                    checker.upgrades.fetch_add(1, Ordering::SeqCst);
                    writer.unlock().await?;
                }
                1 => {
                    checker.upgradable.fetch_sub(1, Ordering::SeqCst);
                    let reader = guard.downgrade().await?;
                    tokio::time::sleep(hold).await;
                    checker.readers.fetch_sub(1, Ordering::SeqCst);
                    reader.unlock().await?;
                }
                _ => {
                    checker.upgradable.fetch_sub(1, Ordering::SeqCst);
                    checker.readers.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().await?;
                }
            }
        }
    }
    Ok(())
}

/// 16 tasks on one key for about 3 s, each on its own mutex handle and connection,
/// mixing plain reads, writes and upgradable reads that upgrade, downgrade or release:
/// no writer overlaps a reader or another writer, at most one upgradable reader holds at
/// once, nothing is written between an upgradable read and its upgrade, writers' tokens
/// strictly increase, every lock comes within 20 s, and every kind of section ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stress_of_reads_writes_and_upgrades_never_overlaps() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let checker = Arc::new(Checker::default());
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..16u32 {
        let mx = notified(&server, Duration::from_secs(5)).await;
        let checker = Arc::clone(&checker);
        tasks.spawn(async move {
            let mut pick = task.wrapping_mul(2_654_435_761);
            while Instant::now() < deadline {
                pick = pick.wrapping_mul(1_103_515_245).wrapping_add(12_345) >> 1;
                if let Err(err) = stress_step(&mx, &checker, pick).await {
                    checker.violation(format!("task {task}: {err}"));
                    return;
                }
            }
        });
    }
    common::join_within(&mut tasks, Duration::from_secs(60), "a stress task hung").await;

    let violations = checker.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "{violations:#?}");
    let counts = [
        checker.reads.load(Ordering::SeqCst),
        checker.writes.load(Ordering::SeqCst),
        checker.upgradable_reads.load(Ordering::SeqCst),
        checker.upgrades.load(Ordering::SeqCst),
    ];
    println!("reads, writes, upgradable reads, upgrades: {counts:?}");
    assert!(counts.iter().all(|&n| n > 0), "{counts:?}");
    let data: u64 = raw::get(&conn, "data").await.unwrap().parse().unwrap();
    assert_eq!(data, counts[1] + counts[3], "a write was lost");
    assert_eq!(checker.version.load(Ordering::SeqCst), data);
    for key in [KEY, UPGRADER, INTENT] {
        assert!(!raw::exists(&conn, key).await, "{key} is left");
    }
}
