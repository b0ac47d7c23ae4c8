//! `lua/inspect.lua`: read the whole state of one lock or semaphore key at once, writing
//! nothing.

use super::shared::MAX_TOKEN;
use super::{Refusal, Reply};
use crate::store::{Key, Member, Store, Text};

/// inspect.lua's reply (`now` left out: it is the clock the call read).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Inspection {
    /// The lock key's TYPE.
    pub kind: &'static str,
    /// Its PTTL (ms; -2 absent).
    pub pttl: i64,
    /// Whether the intent key exists.
    pub intent: bool,
    /// The fence's token (0 absent).
    pub fence: u64,
    /// The holders, sorted: the writer's string, the readers, or the permits whose
    /// deadline is after the clock.
    pub holders: Vec<Text>,
    /// The queue's members in queue order, but those whose deadline passed.
    pub queue: Vec<Member>,
    /// The intent's value (`None` for "").
    pub intent_value: Option<Text>,
    /// PTTLs of the intent, fence, queue and deadline keys (ms; -2 absent).
    pub pttls: [i64; 4],
    /// Every permit with its deadline (ms), lowest first.
    pub permits: Vec<(Member, i64)>,
    /// The queue with its tickets, in queue order.
    pub tickets: Vec<(Member, i64)>,
    /// The queue with its deadlines (ms), earliest first.
    pub deadlines: Vec<(Member, i64)>,
    /// The descriptions (KEYS[6], the holders key) of the holders only, sorted: each
    /// described holder's id with its acquisition time (ms).
    pub descriptions: Vec<(Text, i64)>,
}

/// `usable`: the PTTL, or the refusal when `k` exists with a type not in `types` or no TTL.
fn usable(s: &Store, k: Key, types: &[&str]) -> Result<i64, Refusal> {
    let pttl = s.pttl(k);
    if pttl == -2 {
        return Ok(pttl);
    }
    let found = s.type_of(k);
    if !types.contains(&found) {
        return Err(Refusal::wrongtype(k, found));
    }
    if pttl == -1 {
        return Err(Refusal::NoExpiry { key: k });
    }
    Ok(pttl)
}

/// inspect.lua with ARGV[1] "semaphore" when `semaphore`, else "lock".
pub fn inspect(s: &Store, semaphore: bool) -> Reply {
    run(s, semaphore).map_or_else(Reply::from, |i| Reply::Inspected(Box::new(i)))
}

fn run(s: &Store, semaphore: bool) -> Result<Inspection, Refusal> {
    let lock_types: &[&str] = if semaphore {
        &["zset"]
    } else {
        &["string", "set"]
    };
    let pttl = usable(s, Key::Lock, lock_types)?;
    let intent_pttl = usable(s, Key::Intent, &["string"])?;
    let (fence, fence_pttl) = match s.get(Key::Fence) {
        Ok(None) => (0, -2),
        Ok(Some(Text::Int(n))) if n.to_string().len() <= 16 && *n <= MAX_TOKEN => {
            match s.pttl(Key::Fence) {
                -1 => return Err(Refusal::NoExpiry { key: Key::Fence }),
                pttl => (*n, pttl),
            }
        }
        Ok(Some(_)) => return Err(Refusal::wrongtype(Key::Fence, "non-integer string")),
        Err(_) => return Err(Refusal::wrongtype(Key::Fence, s.type_of(Key::Fence))),
    };
    let queue_pttl = usable(s, Key::Queue, &["zset"])?;
    let deadline_pttl = usable(s, Key::QueueDeadline, &["zset"])?;
    let now = s.now_ms();
    let kind = s.type_of(Key::Lock);
    let mut permits = Vec::new();
    let mut holders: Vec<Text> = match kind {
        "string" => s
            .get(Key::Lock)
            .ok()
            .flatten()
            .cloned()
            .into_iter()
            .collect(),
        "set" => match &s.keys[&Key::Lock].val {
            crate::store::Val::Set(ids) => ids.iter().map(|&id| Text::Id(id)).collect(),
            _ => unreachable!("TYPE said set"),
        },
        "zset" => {
            permits = s.zrange(Key::Lock).unwrap_or_default();
            permits
                .iter()
                .filter(|&&(_, d)| d > now)
                .filter_map(|&(m, _)| match m {
                    Member::Id(id) => Some(Text::Id(id)),
                    Member::Queued(..) => None,
                })
                .collect()
        }
        _ => Vec::new(),
    };
    holders.sort();
    let tickets = s.zrange(Key::Queue).unwrap_or_default();
    let deadlines = s.zrange(Key::QueueDeadline).unwrap_or_default();
    let passed: Vec<Member> = deadlines
        .iter()
        .filter(|&&(_, d)| d <= now)
        .map(|&(m, _)| m)
        .collect();
    let queue = tickets
        .iter()
        .map(|&(m, _)| m)
        .filter(|m| !passed.contains(m))
        .collect();
    let intent_value = s.get(Key::Intent).ok().flatten().cloned();
    let described = s.holders(Key::Holders);
    let descriptions = holders
        .iter()
        .filter_map(|h| match h {
            Text::Id(id) => described.get(id).map(|&at| (h.clone(), at)),
            _ => None,
        })
        .collect();
    Ok(Inspection {
        kind,
        pttl,
        intent: intent_pttl != -2,
        fence,
        holders,
        queue,
        intent_value,
        pttls: [intent_pttl, fence_pttl, queue_pttl, deadline_pttl],
        permits,
        tickets,
        deadlines,
        descriptions,
    })
}
