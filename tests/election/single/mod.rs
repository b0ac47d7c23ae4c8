//! Leader election on one server: candidates take turns (resign, drop, a lease deleted
//! under the leader, a forced release), terms grow, `proclaim` and its refusal to a former
//! leader, what `leader` reads, the observer, and bad input.

mod observe;
mod turns;

use std::time::Duration;

use crate::common::election::leader;
use crate::common::RedisServer;
use redis::aio::MultiplexedConnection;
use redismutex::Election;

type El = Election<MultiplexedConnection>;

/// An election named `name` on its own connection to `server`, with a notifier.
async fn election(server: &RedisServer, name: &str, ttl: Duration) -> El {
    Election::builder(server.conn().await, name)
        .ttl(ttl)
        .notifier(server.client())
        .build()
        .expect("valid options")
}
