//! Redis keyspace notifications of a lock key (`notify-keyspace-events`), for a notifier
//! made with [`Notifier::keyspace_events`](crate::Notifier::keyspace_events): the channel
//! of a key, what its events mean to a waiter, and reading a node's setting.
//!
//! A lock key that is deleted (`del`), expires (`expired`) or is evicted (`evicted`) is a
//! release, whoever held it: a Go client's `DEL`, the last `SREM` of its readers (Redis
//! emits `srem`, then `del` when the set empties), a crashed holder's expiry.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::bounded::bounded;

/// The prefix of a keyspace channel: `__keyspace@<db>__:<key>`.
const PREFIX: &str = "__keyspace@";

/// How long a lock key's deletion waits for the release message that a release by this
/// crate publishes right after it in the same script (on the same connection): when it
/// comes, the deletion wakes nobody (the message does, once); when it does not, the
/// deletion wakes the queue as a message would. A few milliseconds: the two are written
/// to the subscriber connection together.
pub(crate) const GRACE: Duration = Duration::from_millis(5);

/// What the setting is set to, to let a keyspace notifier hear a lock key's releases.
pub(crate) const WANTED: &str = "Kgx";

/// Writes the keyspace channel of `lock_key` in database `db` into `out`.
pub(crate) fn write_channel(out: &mut String, db: i64, lock_key: &str) {
    out.push_str(PREFIX);
    // Writing to a `String` cannot fail.
    let _ = write!(out, "{db}__:{lock_key}");
}

/// The lock key of a keyspace channel (`__keyspace@<db>__:<lock key>`), or `None` for a
/// channel not named so.
pub(crate) fn lock_of_keyspace(channel: &str) -> Option<&str> {
    let rest = channel.strip_prefix(PREFIX)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    rest[digits..].strip_prefix("__:")
}

/// Whether a keyspace event (the message on a key's channel) removed the key.
pub(crate) fn is_gone(event: &[u8]) -> bool {
    matches!(event, b"del" | b"expired" | b"evicted")
}

/// Whether `flags` (the value of `notify-keyspace-events`) makes Redis publish a key's
/// deletions and expiries on its keyspace channel: `K`, and `g` and `x` (or `A`).
pub(crate) fn flags_suffice(flags: &str) -> bool {
    flags.contains('K') && (flags.contains('A') || (flags.contains('g') && flags.contains('x')))
}

/// What one node answered to `CONFIG GET notify-keyspace-events`.
#[derive(Debug, Clone)]
pub(crate) struct Setting {
    /// The node, as `host:port`.
    pub(crate) node: String,
    /// Its flags, or why it did not say.
    pub(crate) found: Result<String, String>,
}

impl Setting {
    /// What is wrong with the node's setting, and what to set; `None` when it suffices.
    pub(crate) fn problem(&self) -> Option<String> {
        match &self.found {
            Ok(flags) if flags_suffice(flags) => None,
            Ok(flags) => Some(format!(
                "notify-keyspace-events is {flags:?}; set it to include K, g and x \
                 (CONFIG SET notify-keyspace-events {WANTED}, or in redis.conf)"
            )),
            Err(reason) => Some(format!(
                "CONFIG GET notify-keyspace-events failed ({reason}); set \
                 notify-keyspace-events {WANTED} in the server's configuration"
            )),
        }
    }
}

/// The command that reads the setting.
fn config_get() -> redis::Cmd {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("notify-keyspace-events");
    cmd
}

/// The setting's value in a `CONFIG GET` reply (a map in RESP3, pairs in RESP2).
fn flags_of(reply: redis::Value) -> Result<String, String> {
    let pairs: HashMap<String, String> =
        redis::FromRedisValue::from_redis_value(reply).map_err(|err| err.to_string())?;
    Ok(pairs
        .get("notify-keyspace-events")
        .cloned()
        .unwrap_or_default())
}

/// The setting of one server, read over a connection of its own, bounded.
pub(crate) async fn read_server(client: &redis::Client) -> Setting {
    let node = client.get_connection_info().addr().to_string();
    let found = async {
        let mut conn = bounded(client.get_multiplexed_async_connection(), "connecting").await?;
        let reply = bounded(
            config_get().query_async::<redis::Value>(&mut conn),
            "CONFIG GET",
        )
        .await?;
        flags_of(reply)
    }
    .await;
    Setting { node, found }
}

/// The setting of every master of a cluster, read over `conn`, bounded.
#[cfg(feature = "cluster")]
pub(crate) async fn read_cluster(
    mut conn: redis::cluster_async::ClusterConnection,
) -> Vec<Setting> {
    use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
    let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
    let reply = bounded(conn.route_command(config_get(), routing), "CONFIG GET").await;
    match reply {
        Ok(redis::Value::Map(nodes)) => nodes
            .into_iter()
            .map(|(node, reply)| Setting {
                node: match node {
                    redis::Value::BulkString(node) => String::from_utf8_lossy(&node).into_owned(),
                    other => format!("{other:?}"),
                },
                found: match reply {
                    redis::Value::ServerError(err) => Err(format!("{err:?}")),
                    reply => flags_of(reply),
                },
            })
            .collect(),
        Ok(other) => vec![Setting {
            node: "the cluster".to_owned(),
            found: Err(format!("unexpected reply {other:?}")),
        }],
        Err(reason) => vec![Setting {
            node: "the cluster".to_owned(),
            found: Err(reason),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyspace_channel_names_its_lock_key() {
        let mut channel = String::new();
        write_channel(&mut channel, 3, "m:{k}");
        assert_eq!(channel, "__keyspace@3__:m:{k}");
        assert_eq!(lock_of_keyspace(&channel), Some("m:{k}"));
        assert_eq!(lock_of_keyspace("__keyspace@__:m"), None);
        assert_eq!(lock_of_keyspace("m:released"), None);
    }

    #[test]
    fn the_setting_needs_k_with_g_and_x_or_a() {
        for flags in ["Kgx", "AK", "KEA", "xgK", "Kgxe"] {
            assert!(flags_suffice(flags), "{flags}");
        }
        for flags in ["", "Kg", "Kx", "Egx", "EA", "gx"] {
            assert!(!flags_suffice(flags), "{flags}");
        }
        let off = Setting {
            node: "n:1".into(),
            found: Ok(String::new()),
        };
        assert!(off
            .problem()
            .unwrap()
            .contains("CONFIG SET notify-keyspace-events Kgx"));
        let on = Setting {
            node: "n:1".into(),
            found: Ok("xKg".into()),
        };
        assert!(on.problem().is_none());
    }

    #[test]
    fn only_a_removal_is_a_release() {
        for event in ["del", "expired", "evicted"] {
            assert!(is_gone(event.as_bytes()));
        }
        for event in ["set", "srem", "sadd", "expire", "zrem"] {
            assert!(!is_gone(event.as_bytes()));
        }
    }
}
