//! `redismutex unlock --lease` and `redismutex renew --lease`: release or extend the hold a
//! lease names (`RwMutex::release` and `RwMutex::renew`, a semaphore's for a permit's
//! lease), on one server or on every node of a quorum. Neither takes the hold over: the
//! lease stays the one `lock --detach` printed.

use std::time::Duration;

use redismutex::{Deployment, Error, Lease, RwMutex, Semaphore};

use crate::chain::chain;
use crate::exit;
use crate::lock::tasks;
use crate::nodes::{Nodes, Reached};

/// What to do with the hold.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Act {
    /// Release it (`unlock --lease`).
    Release,
    /// Extend it by this TTL (`renew --lease --ttl`).
    Renew(Duration),
}

/// Runs `unlock --lease` or `renew --lease`; gives the exit code: 0 done,
/// [`exit::NOT_HELD`] when the hold is gone, [`exit::USAGE`] for a lease that does not
/// parse, [`exit::REDIS`] for a Redis error.
pub(crate) async fn run(urls: &[String], text: &str, act: Act) -> u8 {
    let lease: Lease = match text.trim().parse() {
        Ok(lease) => lease,
        Err(err) => {
            eprintln!("redismutex: {}", chain(&err));
            return exit::USAGE;
        }
    };
    let key = lease.lock_keys().next().unwrap_or_default().to_owned();
    let nodes = match Nodes::open(urls, &key) {
        Ok(nodes) => nodes,
        Err(code) => return code,
    };
    let (servers, reached) = match nodes.reach(&key).await {
        Ok(reached) => reached,
        Err(code) => return code,
    };
    let done = match reached {
        Reached::Server(conn) => apply(conn, &lease, act).await,
        Reached::Quorum(Ok(quorum)) => apply(quorum, &lease, act).await,
        Reached::Quorum(Err(err)) => Err(err),
    };
    report(&servers, &key, act, done)
}

/// Releases or renews the hold through a handle over `conn`: a semaphore for a permit's
/// lease, a mutex otherwise. The handle's name forms no key here (a lease names its own
/// lock keys); its TTL is the renewal's. Its background tasks (over a quorum, the calls
/// to the nodes past the majority) are on the run's tracker, which the command waits for
/// before it exits (`lock::settle`).
async fn apply<C: Deployment>(conn: C, lease: &Lease, act: Act) -> Result<bool, Error> {
    let ttl = match act {
        Act::Renew(ttl) => Some(ttl),
        Act::Release => None,
    };
    if lease.is_permit() {
        let mut builder = Semaphore::builder(conn, "redismutex", 1).task_tracker(tasks());
        if let Some(ttl) = ttl {
            builder = builder.ttl(ttl);
        }
        let sem = builder.build()?;
        return match act {
            Act::Release => sem.release(lease).await,
            Act::Renew(_) => sem.renew(lease).await,
        };
    }
    let mut builder = RwMutex::builder(conn, "redismutex").task_tracker(tasks());
    if let Some(ttl) = ttl {
        builder = builder.ttl(ttl);
    }
    let mx = builder.build()?;
    match act {
        Act::Release => mx.release(lease).await,
        Act::Renew(_) => mx.renew(lease).await,
    }
}

/// Prints what was done, and gives the exit code.
fn report(servers: &str, key: &str, act: Act, done: Result<bool, Error>) -> u8 {
    match (done, act) {
        (Ok(true), Act::Release) => {
            println!("{key}: released");
            0
        }
        (Ok(true), Act::Renew(ttl)) => {
            println!("{key}: renewed for {}", humantime::format_duration(ttl));
            0
        }
        (Ok(false), _) => {
            println!(
                "{key}: not held by this lease (it expired, was released, or was attached \
                 elsewhere); nothing was changed"
            );
            exit::NOT_HELD
        }
        (
            Err(
                err @ (Error::InvalidKey { .. }
                | Error::InvalidOptions(_)
                | Error::InvalidLease { .. }),
            ),
            _,
        ) => {
            eprintln!("redismutex: {}", chain(&err));
            exit::USAGE
        }
        (Err(err), _) => exit::redis_error_at(servers, key, &err),
    }
}
