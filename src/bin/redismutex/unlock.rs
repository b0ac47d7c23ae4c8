//! `redismutex unlock --force`: release a lock or a semaphore by force, whoever holds it
//! (`RwMutex::force_unlock`), on one server or on every node of a quorum. `unlock --lease`
//! is `lease.rs`'s.

use redismutex::{Deployment, Error, RwMutex};

use crate::args::{Target, UnlockArgs};
use crate::chain::chain;
use crate::exit;
use crate::lease::{self, Act};
use crate::nodes::{Nodes, Reached};

/// Runs `unlock`; gives the exit code: 0 released, [`exit::NOT_HELD`] when nothing was
/// held, [`exit::USAGE`] without `--force` or `--lease` or for a bad key or lease,
/// [`exit::REDIS`] for a Redis error.
pub(crate) async fn run(urls: &[String], args: UnlockArgs) -> u8 {
    if let Some(lease) = &args.lease {
        return lease::run(urls, lease, Act::Release).await;
    }
    let Some(target) = args.target() else {
        // clap requires NAME without --lease.
        return exit::USAGE;
    };
    let key = match target.lock_key() {
        Ok(key) => key,
        Err(code) => return code,
    };
    if !args.force {
        eprintln!(
            "redismutex: unlock releases lock key {key:?} whoever holds it, which breaks \
             mutual exclusion if its holder is still running; pass --force to do it (a \
             `redismutex lock` run releases its own lock when it ends, and `unlock --lease` \
             releases the hold a `lock --detach` run left)"
        );
        return exit::USAGE;
    }
    let nodes = match Nodes::open(urls, &key) {
        Ok(nodes) => nodes,
        Err(code) => return code,
    };
    let target = &target;
    let (servers, reached) = match nodes.reach(&key).await {
        Ok(reached) => reached,
        Err(code) => return code,
    };
    let forced = match reached {
        Reached::Server(conn) => force_unlock(conn, target).await,
        Reached::Quorum(Ok(quorum)) => force_unlock(quorum, target).await,
        Reached::Quorum(Err(err)) => Err(err),
    };
    report(&servers, &key, forced)
}

/// Releases the lock `target` names by force, through a mutex over `conn` that forms its
/// keys as the target says.
async fn force_unlock<C: Deployment>(conn: C, target: &Target) -> Result<bool, Error> {
    RwMutex::builder(conn, target.name.clone())
        .hash_tag_keys(target.hash_tag_keys)
        .build()?
        .force_unlock(target.key_arg())
        .await
}

/// Prints what the forced release did, and gives the exit code.
fn report(servers: &str, key: &str, forced: Result<bool, Error>) -> u8 {
    match forced {
        Ok(true) => {
            println!("{key}: released by force");
            0
        }
        Ok(false) => {
            println!("{key}: nothing was held");
            exit::NOT_HELD
        }
        Err(err @ (Error::InvalidKey { .. } | Error::InvalidOptions(_))) => {
            eprintln!("redismutex: {}", chain(&err));
            exit::USAGE
        }
        Err(err) => exit::redis_error_at(servers, key, &err),
    }
}
