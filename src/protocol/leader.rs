//! An election's record (`<lock key>:leader`): written while the leader holds the lock
//! (`lua/proclaim.lua`), read with the lock's holder in one step (`lua/leader.lua`).

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::Value;

use super::calls::Call;
use super::keys::Keys;
use super::lua::SCRIPTS;
use super::replies::{refusal, unexpected};
use super::topology::Topology;
use crate::error::Error;
use crate::leader::Leader;

/// What follows the lock key in the record's key and in the channel a change of the
/// record is published on: `<lock key>:leader`. A channel is not a key, so the two share
/// the name.
const RECORD_SUFFIX: &str = ":leader";

/// The record's key of the lock at `keys`, which is also its channel.
pub(crate) fn record_key(keys: &Keys) -> String {
    format!("{}{RECORD_SUFFIX}", keys.lock())
}

/// The record of a leader: `<fencing token>:<id>:<value>`.
pub(crate) fn record(fencing_token: u64, id: &str, value: &str) -> String {
    format!("{fencing_token}:{id}:{value}")
}

/// One read of an election: who leads, and until when at the latest.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct LeaderRead {
    /// The leader: the record, when the lock key holds the id it names.
    pub(crate) leader: Option<Leader>,
    /// How long the lock key lives without a renewal (its PTTL), when it exists: a leader
    /// that is not renewed by then has lost its lease, which nothing publishes.
    pub(crate) expires_in: Option<Duration>,
    /// The writer's id at the lock key, if a writer holds it.
    pub(crate) holder: Option<String>,
    /// The record as read, whoever holds the lock: the id it names and its leader. A
    /// backend over several nodes counts holders and records apart (a node that took the
    /// lock back may not have the record).
    pub(crate) recorded: Option<(String, Leader)>,
}

/// Runs `proclaim.lua` for `call`'s id: writes `record` while
/// the id holds the lock as its writer, and publishes it (by `SPUBLISH` in the lock key's
/// slot on a cluster). True when it held the lock and the record was written.
pub(crate) async fn proclaim<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    record: &str,
    topology: Topology,
) -> Result<bool, Error> {
    let keys = &call.keys;
    let reply: Value = SCRIPTS
        .proclaim
        .run(conn, keys, 2, |cmd| {
            cmd.arg(keys.lock())
                .arg(record_key(keys))
                .arg(call.id)
                .arg(record)
                .arg(call.fence_ms)
                .arg(if topology.sharded() { "1" } else { "0" });
        })
        .await
        .map_err(|err| Error::redis(keys.lock(), err))?;
    match &reply {
        Value::Int(0) => Ok(false),
        Value::Int(1 | 3) => Ok(true),
        Value::Array(items) => {
            Err(refusal(items).unwrap_or_else(|| unexpected(&reply, keys.lock())))
        }
        _ => Err(unexpected(&reply, keys.lock())),
    }
}

/// Runs `leader.lua` on the lock at `keys` and reads its reply.
pub(crate) async fn read<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
) -> Result<LeaderRead, Error> {
    let reply: Value = SCRIPTS
        .leader
        .run(conn, keys, 2, |cmd| {
            cmd.arg(keys.lock()).arg(record_key(keys));
        })
        .await
        .map_err(|err| Error::redis(keys.lock(), err))?;
    parse_read(&reply, keys.lock())
}

/// Reads the reply of `leader.lua` for the lock key `key`.
fn parse_read(reply: &Value, key: &str) -> Result<LeaderRead, Error> {
    let Value::Array(items) = reply else {
        return Err(unexpected(reply, key));
    };
    if let Some(refused) = refusal(items) {
        return Err(refused);
    }
    let [Value::BulkString(holder), Value::Int(pttl), Value::BulkString(record)] = items.as_slice()
    else {
        return Err(unexpected(reply, key));
    };
    let holder = (!holder.is_empty()).then(|| String::from_utf8_lossy(holder).into_owned());
    let recorded = parse_record(record);
    let leader = recorded
        .as_ref()
        .filter(|(id, _)| holder.as_ref() == Some(id))
        .map(|(_, leader)| leader.clone());
    Ok(LeaderRead {
        leader,
        expires_in: u64::try_from(*pttl).ok().map(Duration::from_millis),
        holder,
        recorded,
    })
}

/// The id a record names and its leader; `None` for one that is no record (written by
/// something else).
fn parse_record(record: &[u8]) -> Option<(String, Leader)> {
    let record = std::str::from_utf8(record).ok()?;
    let (token, rest) = record.split_once(':')?;
    let (id, value) = rest.split_once(':')?;
    let leader = Leader {
        value: value.to_owned(),
        fencing_token: token.parse().ok()?,
    };
    Some((id.to_owned(), leader))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn read(holder: &str, pttl: i64, record: &str) -> LeaderRead {
        parse_read(
            &Value::Array(vec![bulk(holder), Value::Int(pttl), bulk(record)]),
            "k",
        )
        .unwrap()
    }

    #[test]
    fn a_record_names_the_leader_only_while_its_id_holds_the_lock() {
        let id = "0123456789abcdef0123456789abcdef";
        let rec = record(7, id, "host:8080");
        assert_eq!(rec, format!("7:{id}:host:8080"));
        let held = read(id, 1500, &rec);
        assert_eq!(
            held.leader,
            Some(Leader {
                value: "host:8080".to_owned(),
                fencing_token: 7
            })
        );
        assert_eq!(held.expires_in, Some(Duration::from_millis(1500)));
        // Another holder, no holder, or no record: no leader.
        assert_eq!(
            read("ffffffffffffffffffffffffffffffff", 900, &rec).leader,
            None
        );
        let free = read("", -2, &rec);
        assert_eq!((free.leader, free.expires_in), (None, None));
        assert_eq!(read(id, 900, "").leader, None);
        // A record that is not one: no leader, no panic.
        for odd in ["x", "7", "7:", "x:id:v", "-1:id:v"] {
            assert_eq!(read("id", 900, odd).leader, None, "{odd}");
        }
        // The value may be empty and may hold colons.
        assert_eq!(read("id", 900, "3:id:").leader.unwrap().value, "");
    }

    #[test]
    fn refusals_and_odd_replies_are_errors_naming_the_key() {
        let wrong = Value::Array(vec![bulk("wrongtype"), bulk("k:leader"), bulk("hash")]);
        match parse_read(&wrong, "k") {
            Err(Error::WrongType { key, found }) => {
                assert_eq!((&*key, &*found), ("k:leader", "hash"))
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            Value::Nil,
            Value::Int(1),
            Value::Array(vec![]),
            Value::Array(vec![bulk("id"), bulk("1"), bulk("")]),
        ] {
            match parse_read(&bad, "k") {
                Err(Error::Redis { key, .. }) => assert_eq!(key, "k"),
                other => panic!("{other:?}"),
            }
        }
    }
}
