//! `lua/leader.lua` (read who leads) and `lua/proclaim.lua` (write the leader's record
//! while holding the election's lock as the writer).

use super::{Refusal, Reply};
use crate::bugs::Bug;
use crate::store::{Id, Key, Store, Text};

/// leader.lua.
pub fn leader(s: &Store) -> Reply {
    let holder = match s.get(Key::Lock) {
        Ok(holder) => holder.cloned(),
        Err(_) => match s.type_of(Key::Lock) {
            "set" | "zset" => None,
            found => return Refusal::wrongtype(Key::Lock, found).into(),
        },
    };
    let pttl = s.pttl(Key::Lock);
    if pttl == -1 {
        return Refusal::NoExpiry { key: Key::Lock }.into();
    }
    let record = match s.get(Key::Record) {
        Ok(record) => record.cloned(),
        Err(_) => return Refusal::wrongtype(Key::Record, s.type_of(Key::Record)).into(),
    };
    let holder = match &record {
        Some(Text::Record { id, .. }) if s.has(Bug::LeaderNamesRecord) => Some(Text::Id(*id)),
        _ => holder,
    };
    Reply::Leader {
        holder,
        pttl,
        record,
    }
}

/// proclaim.lua: `record` with PX `px` when `id` holds the lock as the writer.
pub fn proclaim(s: &mut Store, id: Id, record: Text, px: i64) -> Reply {
    match s.get(Key::Lock) {
        Ok(holder) if holder == Some(&Text::Id(id)) || s.has(Bug::ProclaimUnchecked) => {}
        Ok(_) => return Reply::Int(0),
        Err(_) => {
            return match s.type_of(Key::Lock) {
                "set" | "zset" => Reply::Int(0),
                found => Refusal::wrongtype(Key::Lock, found).into(),
            }
        }
    }
    let found = s.type_of(Key::Record);
    if found != "none" && found != "string" {
        return Refusal::wrongtype(Key::Record, found).into();
    }
    s.set(Key::Record, record, Some(px));
    Reply::Int(3)
}
