//! Reading the whole state of one lock key at once: `inspect.lua`, and its reply read into
//! a [`LockState`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::ConnectionLike;
use redis::Value;

use super::keys::Keys;
use super::lua::SCRIPTS;
use super::replies::{refusal, unexpected};
use crate::error::Error;
use crate::lock_state::{HolderInfo, LockState, QueueEntry};
use crate::mode::Mode;

/// What kind of handle's key is read: it decides which types the lock key may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// A read-write lock's: a writer's string or a readers' set.
    Lock,
    /// A semaphore's: a sorted set of permits.
    Semaphore,
}

impl Form {
    fn arg(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Semaphore => "semaphore",
        }
    }
}

/// The names of the five keys `inspect.lua` reads, in the order of its `KEYS`: the lock
/// key, its intent, its fence, and its fair queue's two keys.
type Names<'a> = [&'a str; 5];

/// Runs `inspect.lua` on the lock's `keys`, which must include the fair queue's
/// ([`Keys::queue`]), with its holders key, and reads its reply: one snapshot, nothing
/// written.
pub(crate) async fn inspect<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    form: Form,
) -> Result<LockState, Error> {
    let key = keys.lock();
    let Some(queue) = keys.queue() else {
        return Err(unexpected(&Value::Nil, key));
    };
    let [intent, fence, order, deadline] =
        [keys.intent(), keys.fence(), queue.order, queue.deadline].map(|name| name.to_string());
    let names: Names<'_> = [key, &intent, &fence, &order, &deadline];
    let reply: Value = SCRIPTS
        .inspect
        .run(conn, keys, 6, |cmd| {
            for name in names {
                cmd.arg(name);
            }
            cmd.arg(keys.holders()).arg(form.arg());
        })
        .await
        .map_err(|err| Error::redis(key, err))?;
    parse(reply, &names)
}

/// Reads the reply of `inspect.lua` on the keys `names`.
fn parse(reply: Value, names: &Names<'_>) -> Result<LockState, Error> {
    let key = names[0];
    let Value::Array(items) = &reply else {
        return Err(unexpected(&reply, key));
    };
    if let Some(refused) = refusal(items) {
        return Err(refused);
    }
    state(items, names).ok_or_else(|| unexpected(&reply, key))
}

/// The state the `items` of a reply give; `None` when they are no reply of the script.
fn state(items: &[Value], names: &Names<'_>) -> Option<LockState> {
    let [lock_type, pttl, intent, fence, holders, queue, rest @ ..] = items else {
        return None;
    };
    let [now, intent_value, pttls, permits, tickets, deadlines, descriptions] = rest else {
        return None;
    };
    let (lock_type, pttl, fence, now) = (text(lock_type)?, int(pttl)?, int(fence)?, int(now)?);
    let mut holders = texts(holders)?;
    let mode = match lock_type.as_str() {
        "none" => None,
        "string" => Some(Mode::Write),
        "set" => Some(Mode::Read),
        // A semaphore whose every permit ran out is free.
        "zset" => (!holders.is_empty()).then_some(Mode::Read),
        _ => return None,
    };
    if lock_type == "set" {
        holders.sort_unstable();
    }
    let ttl = match mode {
        None => None,
        Some(_) => Some(Duration::from_millis(u64::try_from(pttl).ok()?)),
    };
    let waiting_writer = match int(intent)? {
        1 => Some(text(intent_value)?),
        _ => None,
    };
    Some(LockState {
        mode,
        holders,
        ttl,
        last_fencing_token: u64::try_from(fence).ok().filter(|token| *token > 0),
        queue: texts(queue)?.into_iter().map(entry).collect(),
        server_time: UNIX_EPOCH.checked_add(Duration::from_millis(u64::try_from(now).ok()?))?,
        waiting_writer,
        key_ttls: key_ttls(names, pttl, pttls)?,
        permit_deadlines: scored(permits, deadline)?,
        queue_tickets: entries(scored(tickets, ticket)?),
        queue_deadlines: entries(scored(deadlines, deadline)?),
        holder_info: described(descriptions)?,
    })
}

/// The holders' descriptions, flat `{id, text, ...}`, each read by
/// [`HolderInfo::parse`]: a text in a format this release does not read is left out.
/// `None` when it is not such an array.
fn described(value: &Value) -> Option<Vec<(String, HolderInfo)>> {
    let flat = texts(value)?;
    if flat.len() % 2 != 0 {
        return None;
    }
    Some(
        flat.chunks(2)
            .filter_map(|pair| Some((pair[0].clone(), HolderInfo::parse(&pair[1])?)))
            .collect(),
    )
}

/// The keys of `names` that exist, each with its PTTL: `lock` is the lock key's, `others`
/// the other four's as the script lists them (-2: no such key; a key with no TTL is
/// refused before, so -1 is no reply of the script).
fn key_ttls(names: &Names<'_>, lock: i64, others: &Value) -> Option<Vec<(String, Duration)>> {
    let Value::Array(others) = others else {
        return None;
    };
    if others.len() != names.len() - 1 {
        return None;
    }
    let pttls = std::iter::once(Some(lock)).chain(others.iter().map(int));
    let mut ttls = Vec::new();
    for (name, pttl) in names.iter().zip(pttls) {
        match pttl? {
            -2 => {}
            pttl => ttls.push((
                name.to_string(),
                Duration::from_millis(u64::try_from(pttl).ok()?),
            )),
        }
    }
    Some(ttls)
}

/// A fair queue's `member` as stored (`lua/shared.lua`): `<kind>:<id>`, kind `w` for a
/// writer, `r` for a reader, `p` for a permit, and the id as [`Id`] writes it (32
/// lowercase hex characters); anything else is [`QueueEntry::Unknown`].
///
/// [`Id`]: super::id::Id
fn entry(member: String) -> QueueEntry {
    let id = || member.get(2..).filter(|id| is_id(id)).map(str::to_owned);
    let typed = match member.get(..2) {
        Some("w:") => id().map(QueueEntry::Writer),
        Some("r:") => id().map(QueueEntry::Reader),
        Some("p:") => id().map(QueueEntry::Permit),
        _ => None,
    };
    typed.unwrap_or(QueueEntry::Unknown(member))
}

/// Whether `id` is an id as the crate makes them: 32 lowercase hex characters.
fn is_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Scored members of a fair queue, each read by [`entry`].
fn entries<T>(scored: Vec<(String, T)>) -> Vec<(QueueEntry, T)> {
    scored
        .into_iter()
        .map(|(member, score)| (entry(member), score))
        .collect()
}

/// A flat `{member, score, member, score, ...}` array as pairs, each score read by
/// `score`; `None` when it is not such an array.
fn scored<T>(value: &Value, score: fn(&str) -> Option<T>) -> Option<Vec<(String, Option<T>)>> {
    let Value::Array(items) = value else {
        return None;
    };
    if items.len() % 2 != 0 {
        return None;
    }
    items
        .chunks(2)
        .map(|pair| Some((text(&pair[0])?, score(&text(&pair[1])?))))
        .collect()
}

/// A score as a whole number, when it is one a Lua script holds exactly (below 2^53 in
/// magnitude); `None` for `1.5`, `inf` or anything else.
fn whole(score: &str) -> Option<i64> {
    const EXACT: u64 = 1 << 53;
    let whole = match score.parse::<i64>() {
        Ok(whole) => whole,
        Err(_) => {
            let score: f64 = score.parse().ok()?;
            if !score.is_finite() || score.fract() != 0.0 || score.abs() >= EXACT as f64 {
                return None;
            }
            score as i64
        }
    };
    (whole.unsigned_abs() < EXACT).then_some(whole)
}

/// A deadline score, the server time in milliseconds, as a time.
fn deadline(score: &str) -> Option<SystemTime> {
    let ms = whole(score)?;
    let offset = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        UNIX_EPOCH.checked_add(offset)
    } else {
        UNIX_EPOCH.checked_sub(offset)
    }
}

/// An arrival ticket score: a whole number from 0.
fn ticket(score: &str) -> Option<u64> {
    u64::try_from(whole(score)?).ok()
}

/// An integer reply.
fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

/// A reply as text: a bulk string, lossily decoded.
fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        _ => None,
    }
}

/// An array reply as texts; `None` when it is not an array of bulk strings.
fn texts(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::Array(items) => items.iter().map(text).collect(),
        // RESP3 gives a set as a set.
        Value::Set(items) => items.iter().map(text).collect(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: Names<'static> = [
        "k",
        "k:lock-intent",
        "k:fence",
        "k:queue",
        "k:queue-deadline",
    ];

    /// Fair queue members as the scripts store them, ids of 32 lowercase hex characters.
    const WB: &str = "w:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const RA: &str = "r:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const WC: &str = "w:cccccccccccccccccccccccccccccccc";

    fn writer(c: char) -> QueueEntry {
        QueueEntry::Writer(c.to_string().repeat(32))
    }

    fn reader(c: char) -> QueueEntry {
        QueueEntry::Reader(c.to_string().repeat(32))
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn bulks(items: &[&str]) -> Value {
        Value::Array(items.iter().map(|item| bulk(item)).collect())
    }

    fn ints(items: &[i64]) -> Value {
        Value::Array(items.iter().map(|&n| Value::Int(n)).collect())
    }

    fn reply(kind: &str, pttl: i64, intent: i64, fence: i64, holders: &[&str]) -> Value {
        Value::Array(vec![
            bulk(kind),
            Value::Int(pttl),
            Value::Int(intent),
            Value::Int(fence),
            bulks(holders),
            bulks(&[WB, RA]),
            Value::Int(1_718_000_000_123),
            bulk(if intent == 1 { "w1" } else { "" }),
            ints(&[if intent == 1 { 900 } else { -2 }, -2, 5000, -2]),
            bulks(&[]),
            bulks(&[WB, "1", RA, "2", WC, "1.5"]),
            bulks(&[WC, "5", RA, "1718000000999", WB, "inf"]),
            bulks(&match holders.first() {
                Some(&first) => vec![first, DESCRIPTION, "x", "2\tlater"],
                None => vec![],
            }),
        ])
    }

    /// A description, version 1.
    const DESCRIPTION: &str = "1\thost-a\t42\t\tworker\tbilling\t1718000000000";

    fn parse(reply: Value) -> Result<LockState, Error> {
        super::parse(reply, &NAMES)
    }

    fn at(ms: u64) -> Option<SystemTime> {
        Some(UNIX_EPOCH + Duration::from_millis(ms))
    }

    #[test]
    fn replies_parse_into_states_and_refusals_into_typed_errors() {
        let free = parse(reply("none", -2, 0, 0, &[])).unwrap();
        assert_eq!(
            (free.mode(), free.ttl(), free.last_fencing_token()),
            (None, None, None)
        );
        assert_eq!(
            free.queue(),
            [writer('b'), reader('a')],
            "in the order stored"
        );
        let readers = parse(reply("set", 1500, 1, 7, &["b", "a"])).unwrap();
        assert_eq!(readers.mode(), Some(Mode::Read));
        assert_eq!(readers.holders(), ["a", "b"], "sorted");
        assert_eq!(readers.ttl(), Some(Duration::from_millis(1500)));
        assert!(readers.waiting_writer().is_some());
        assert_eq!(readers.last_fencing_token(), Some(7));
        let permits = parse(reply("zset", 900, 0, 3, &["b", "a"])).unwrap();
        assert_eq!(permits.holders(), ["b", "a"], "by deadline, as sent");
        assert_eq!(
            (permits.mode(), permits.permits_in_use()),
            (Some(Mode::Read), 2)
        );
        let run_out = parse(reply("zset", 900, 0, 3, &[])).unwrap();
        assert_eq!((run_out.mode(), run_out.ttl()), (None, None));
        let writer = parse(reply("string", 10, 0, 1, &["w"])).unwrap();
        assert_eq!(writer.mode(), Some(Mode::Write));
        let info = writer.holder_info("w").expect("described");
        assert_eq!(
            (info.host(), info.pid(), info.label()),
            ("host-a", 42, Some("billing"))
        );
        assert_eq!(info.acquired_at(), at(1_718_000_000_000).unwrap());
        assert_eq!(writer.holder_info("x"), None, "a version not read");
        assert_eq!(free.holder_info("w"), None);
        let refused = Value::Array(vec![bulk("wrongtype"), bulk("k:fence"), bulk("hash")]);
        assert!(matches!(
            parse(refused),
            Err(Error::WrongType { key, found }) if key == "k:fence" && found == "hash"
        ));
        let refused = Value::Array(vec![bulk("noexpiry"), bulk("k")]);
        assert!(matches!(parse(refused), Err(Error::NoExpiry { key }) if key == "k"));
    }

    #[test]
    fn the_clock_the_intent_the_ttls_and_the_scores_are_read_as_sent() {
        let readers = parse(reply("set", 1500, 1, 7, &["b", "a"])).unwrap();
        assert_eq!(readers.server_time(), at(1_718_000_000_123).unwrap());
        assert_eq!(readers.waiting_writer(), Some("w1"));
        let ttls: Vec<(&str, u64)> = readers
            .key_ttls()
            .iter()
            .map(|(key, ttl)| (key.as_str(), ttl.as_millis() as u64))
            .collect();
        assert_eq!(
            ttls,
            [("k", 1500), ("k:lock-intent", 900), ("k:queue", 5000)],
            "the keys that exist, in order"
        );
        assert!(readers.permit_deadlines().is_empty(), "no semaphore");
        assert_eq!(
            readers.queue_tickets(),
            [
                (writer('b'), Some(1)),
                (reader('a'), Some(2)),
                (writer('c'), None),
            ],
            "a ticket that is not whole is none"
        );
        assert_eq!(
            readers.queue_deadlines(),
            [
                (writer('c'), at(5)),
                (reader('a'), at(1_718_000_000_999)),
                (writer('b'), None),
            ]
        );
        let free = parse(reply("none", -2, 0, 0, &[])).unwrap();
        assert_eq!(free.waiting_writer(), None, "the value sent is not read");
        assert_eq!(
            free.key_ttls(),
            [("k:queue".to_owned(), Duration::from_secs(5))]
        );

        let Value::Array(mut items) = reply("zset", 900, 0, 3, &[]) else {
            unreachable!()
        };
        items[9] = bulks(&["a", "-5", "b", "1e3", "c", "9007199254740992", "d", "-inf"]);
        let run_out = parse(Value::Array(items)).unwrap();
        assert_eq!(
            run_out.permit_deadlines(),
            [
                (
                    "a".to_owned(),
                    UNIX_EPOCH.checked_sub(Duration::from_millis(5))
                ),
                ("b".to_owned(), at(1000)),
                ("c".to_owned(), None),
                ("d".to_owned(), None),
            ],
            "2^53 and infinities are no deadline"
        );
        assert_eq!(
            run_out.key_ttls()[0],
            ("k".to_owned(), Duration::from_millis(900))
        );
    }

    #[test]
    fn queue_members_are_typed_and_others_kept_as_stored() {
        let id = "0123456789abcdef0123456789abcdef";
        let typed = [
            (format!("w:{id}"), QueueEntry::Writer(id.to_owned())),
            (format!("r:{id}"), QueueEntry::Reader(id.to_owned())),
            (format!("p:{id}"), QueueEntry::Permit(id.to_owned())),
        ];
        for (member, want) in typed {
            let got = entry(member.clone());
            assert_eq!(got, want);
            assert_eq!((got.id(), got.to_string()), (Some(id), member), "as stored");
        }
        for odd in [
            String::new(),
            "w".to_owned(),
            "w:".to_owned(),
            format!("x:{id}"),
            format!("w:{id}0"),
            format!("w:{}", id.to_uppercase()),
            "é:".to_owned(),
        ] {
            let got = entry(odd.clone());
            assert_eq!(got, QueueEntry::Unknown(odd.clone()));
            assert_eq!((got.id(), got.to_string()), (None, odd));
        }
    }

    #[test]
    fn malformed_replies_are_redis_errors() {
        let with = |at: usize, value: Value| {
            let Value::Array(mut items) = reply("set", 1500, 1, 7, &["a"]) else {
                unreachable!()
            };
            items[at] = value;
            Value::Array(items)
        };
        for bad in [
            Value::Nil,
            Value::Int(1),
            Value::Array(vec![]),
            reply("hash", 10, 0, 0, &[]),
            reply("string", -1, 0, 0, &["w"]),
            Value::Array(vec![bulk("none"), Value::Int(-2)]),
            with(6, Value::Int(-1)),
            with(7, Value::Nil),
            with(8, ints(&[1, 2, 3])),
            with(8, ints(&[-1, -2, -2, -2])),
            with(9, bulks(&["a"])),
            with(10, Value::Int(0)),
            with(11, Value::Array(vec![bulk("a"), Value::Int(1)])),
            with(12, bulks(&["a"])),
            with(12, Value::Int(0)),
        ] {
            assert!(
                matches!(parse(bad.clone()), Err(Error::Redis { key, .. }) if key == "k"),
                "{bad:?}"
            );
        }
    }
}
