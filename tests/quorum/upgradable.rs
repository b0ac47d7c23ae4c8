//! Upgradable reads over a quorum: refused with `Error::InvalidOptions` naming the quorum,
//! at once, before any script runs on any node, on a plain and on a reentrant mutex
//! (whose reentrancy never nests an upgradable read), and the mutex works after.

use std::time::Duration;

use crate::common::quorum::Nodes;
use crate::common::{at_once, raw};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, RwMutex};

const TTL: Duration = Duration::from_secs(2);

/// How many scripts each node has run (`EVAL` and `EVALSHA` calls).
async fn scripts_run(conns: &[MultiplexedConnection]) -> Vec<u64> {
    let mut counts = Vec::new();
    for conn in conns {
        let (eval, _) = raw::calls(conn, "eval").await;
        let (evalsha, _) = raw::calls(conn, "evalsha").await;
        counts.push(eval + evalsha);
    }
    counts
}

/// [`scripts_run`] once two readings 200 ms apart agree: no call is still running.
async fn settled(conns: &[MultiplexedConnection]) -> Vec<u64> {
    let mut last = scripts_run(conns).await;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = scripts_run(conns).await;
        if now == last {
            return now;
        }
        last = now;
    }
}

#[tokio::test]
async fn upgradable_reads_are_refused_on_a_quorum_before_anything_is_sent() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let plain = nodes.mutex("up", TTL).await;
    // Long enough that the held guard is not renewed (a script) while the refusals run.
    let reentrant = RwMutex::builder(nodes.quorum().await, "up")
        .ttl(Duration::from_secs(30))
        .reentrant(true)
        .build()
        .unwrap();
    // A reentrant mutex's write guard held by this task: the upgradable read still does
    // not nest in it.
    let held = reentrant.write().key("held").await.unwrap();
    // The acquire returned on a majority; the last node's calls may still be running.
    let before = settled(&conns).await;

    for mx in [&plain, &reentrant] {
        let refused = at_once(mx.upgradable_read().key("doc")).await;
        assert!(
            matches!(&refused, Err(Error::InvalidOptions(why)) if why.contains("quorum")),
            "{refused:?}"
        );
        let refused = at_once(mx.try_upgradable_read().key("doc")).await;
        assert!(
            matches!(&refused, Err(Error::InvalidOptions(why)) if why.contains("quorum")),
            "{refused:?}"
        );
        let refused = at_once(mx.upgradable_read().key("held")).await;
        assert!(
            matches!(&refused, Err(Error::InvalidOptions(why)) if why.contains("quorum")),
            "nested in the held write guard? {refused:?}"
        );
    }
    assert_eq!(
        scripts_run(&conns).await,
        before,
        "a script ran for a refusal"
    );
    for conn in &conns {
        let keys: Vec<String> = raw::cmd(conn, "KEYS", &["up:doc*"]).await;
        assert!(keys.is_empty(), "{keys:?}");
        assert!(!raw::exists(conn, "up:held:upgrader").await);
    }

    // Refused, the mutex is as it was: it takes and releases plain locks.
    let reader = plain.read().key("doc").await.unwrap();
    assert!(reader.unlock().await.unwrap());
    assert!(held.unlock().await.unwrap());
}
