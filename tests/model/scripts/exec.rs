//! `lua/exec.lua`: run a pipeline's commands only while the id holds every lock named.

use super::Reply;
use crate::bugs::Bug;
use crate::store::{Id, Key, Member, Store, Text};

/// A command of the pipeline, on [`Key::Data`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// `INCR data`: replies the new value.
    Incr,
    /// `INCRBY data x`: fails ("ERR value is not an integer"), changes nothing.
    Fail,
}

/// Whether `id` holds the lock as exec.lua checks it: the writer's string, a member of
/// the readers' set, or a permit whose deadline is after TIME.
pub fn holds(s: &Store, id: Id) -> bool {
    match s.get(Key::Lock) {
        Ok(value) => value == Some(&Text::Id(id)),
        Err(_) => match s.type_of(Key::Lock) {
            "set" => s.sismember(Key::Lock, id) == Ok(true),
            "zset" => matches!(s.zscore(Key::Lock, Member::Id(id)), Ok(Some(d)) if d > s.now_ms()),
            _ => false,
        },
    }
}

/// exec.lua with the lock keys of `locks` (KEYS[1..m], each lock 0 or 1: [`Key::on`];
/// ARGV[2] is m) and `commands`.
pub fn exec(s: &mut Store, id: Id, locks: &[usize], commands: &[Command]) -> Reply {
    for (i, &l) in locks.iter().enumerate() {
        if !s.on_lock(l, |s| holds(s, id)) && !s.has(Bug::ExecUnchecked) {
            if s.has(Bug::ExecRunsWhenRefusing) {
                let _ = s.incr(Key::Data);
            }
            return Reply::NotHeld(i + 1);
        }
    }
    let mut replies = Vec::new();
    for (i, command) in commands.iter().enumerate() {
        match command {
            Command::Incr => match s.incr(Key::Data) {
                Ok(n) => replies.push(n),
                Err(()) => return Reply::Failed { command: i + 1 },
            },
            Command::Fail => return Reply::Failed { command: i + 1 },
        }
    }
    Reply::Ran(replies)
}
