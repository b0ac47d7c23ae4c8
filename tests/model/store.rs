//! One server's keyspace as the model sees it: the keys of one lock (or semaphore, or
//! election) key and the lock, intent and fence keys of a second lock key (lock 1, for
//! the sets of `lock_all.lua`), each with its value and its expiry on the abstract
//! clock, and the Redis commands the scripts run on them, with Redis's own semantics (a
//! key whose expiry is not after the clock is gone; a command on the wrong type fails).

use std::collections::{BTreeMap, BTreeSet};

use crate::bugs::Bug;

/// A client's lock id, by number: [`id_text`] is the 32 hex characters the scripts see.
pub type Id = u8;

/// The 32 lowercase hex characters of id `id`, as the crate draws them.
pub fn id_text(id: Id) -> String {
    format!("{:032x}", 0x5eed_0000_u128 + u128::from(id))
}

/// The id whose [`id_text`] is `text`, if any.
pub fn id_of(text: &str) -> Option<Id> {
    let n = u128::from_str_radix(text, 16).ok()?;
    (text.len() == 32)
        .then(|| n.checked_sub(0x5eed_0000))
        .flatten()
        .and_then(|n| Id::try_from(n).ok())
}

/// The keys of one lock key `K`, by their role (the differential test names them), and
/// the lock, intent and fence keys of a second lock key `K:b` of the same mutex (lock 1;
/// `K` is lock 0), which `lock_all.lua` takes together with `K`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// `K`: a writer's string, a readers' set, or a semaphore's sorted set.
    Lock,
    /// `K:lock-intent`: the id of the writer waiting (or Go's "1").
    Intent,
    /// `K:fence`: the last fencing token minted.
    Fence,
    /// `K:fence-granted`: quorum mode's last granted token (or a forced release's mark).
    Granted,
    /// `K:queue`: the fair queue, scored by arrival ticket.
    Queue,
    /// `K:queue-deadline`: the fair queue, scored by each waiter's deadline (ms).
    QueueDeadline,
    /// `K:leader`: an election's record.
    Record,
    /// `K:data`: the data a guarded write (`exec`) changes.
    Data,
    /// `K:upgrader`: the id of the upgradable reader; it counts only while that id is a
    /// member of the readers' set (`lua/upgradable.lua`).
    Upgrader,
    /// `K:b`: lock 1's lock key, as [`Key::Lock`].
    Lock1,
    /// `K:b:lock-intent`: lock 1's intent, as [`Key::Intent`].
    Intent1,
    /// `K:b:fence`: lock 1's fence, as [`Key::Fence`].
    Fence1,
    /// `K:holders`: the holders' descriptions (`lua/describe.lua`), a hash id → text.
    Holders,
    /// `K:b:holders`: lock 1's, as [`Key::Holders`].
    Holders1,
}

impl Key {
    /// Every key, in the order the differential test reads them.
    pub const ALL: [Key; 14] = [
        Key::Lock,
        Key::Intent,
        Key::Fence,
        Key::Granted,
        Key::Queue,
        Key::QueueDeadline,
        Key::Record,
        Key::Data,
        Key::Upgrader,
        Key::Lock1,
        Key::Intent1,
        Key::Fence1,
        Key::Holders,
        Key::Holders1,
    ];

    /// The key that plays this key's role for lock `l` (0 or 1): lock 1's lock, intent,
    /// fence and holders keys for lock 0's and back; every other key is lock 0's alone,
    /// and stays.
    pub fn on(self, l: usize) -> Key {
        if l == 0 {
            return self;
        }
        match self {
            Key::Lock => Key::Lock1,
            Key::Intent => Key::Intent1,
            Key::Fence => Key::Fence1,
            Key::Holders => Key::Holders1,
            Key::Lock1 => Key::Lock,
            Key::Intent1 => Key::Intent,
            Key::Fence1 => Key::Fence,
            Key::Holders1 => Key::Holders,
            other => other,
        }
    }

    /// The key's suffix after the lock key (`""` for the lock key itself).
    pub fn suffix(self) -> &'static str {
        match self {
            Key::Lock => "",
            Key::Intent => ":lock-intent",
            Key::Fence => ":fence",
            Key::Granted => ":fence-granted",
            Key::Queue => ":queue",
            Key::QueueDeadline => ":queue-deadline",
            Key::Record => ":leader",
            Key::Data => ":data",
            Key::Upgrader => ":upgrader",
            Key::Lock1 => ":b",
            Key::Intent1 => ":b:lock-intent",
            Key::Fence1 => ":b:fence",
            Key::Holders => ":holders",
            Key::Holders1 => ":b:holders",
        }
    }
}

/// A string value, by what it holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Text {
    /// A lock id ([`id_text`]).
    Id(Id),
    /// A decimal integer with no sign or leading zero (a token, a counter, Go's intent "1").
    Int(u64),
    /// An election's record: "<token>:<id>:<value>".
    Record { token: u64, id: Id, value: u8 },
    /// Any other string (a hostile value): "junk".
    Junk,
}

impl Text {
    /// The string Redis holds.
    pub fn render(&self) -> String {
        match self {
            Text::Id(id) => id_text(*id),
            Text::Int(n) => n.to_string(),
            Text::Record { token, id, value } => format!("{token}:{}:v{value}", id_text(*id)),
            Text::Junk => "junk".to_owned(),
        }
    }

    /// The text `s` is the render of.
    pub fn parse(s: &str) -> Text {
        if let Some(id) = id_of(s) {
            return Text::Id(id);
        }
        if !s.is_empty() && !s.starts_with('0') && s.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(n) = s.parse() {
                return Text::Int(n);
            }
        }
        let parts: Vec<&str> = s.split(':').collect();
        if let [token, id, value] = parts[..] {
            if let (Ok(token), Some(id), Some(Ok(value))) = (
                token.parse(),
                id_of(id),
                value.strip_prefix('v').map(str::parse),
            ) {
                return Text::Record { token, id, value };
            }
        }
        Text::Junk
    }
}

/// A sorted set's member: a permit's id, or a fair waiter ("<kind>:<id>").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Member {
    /// A semaphore permit's id.
    Id(Id),
    /// A queued waiter: `kind` is `b'w'`, `b'r'` or `b'p'`.
    Queued(u8, Id),
}

impl Member {
    /// The member whose string is `s` (an id's text, or "<kind>:<id's text>"), if any.
    pub fn parse(s: &str) -> Option<Member> {
        if let Some(id) = id_of(s) {
            return Some(Member::Id(id));
        }
        let (kind, id) = s.split_once(':')?;
        match kind {
            "w" | "r" | "p" => Some(Member::Queued(kind.as_bytes()[0], id_of(id)?)),
            _ => None,
        }
    }
}

// Redis orders members of equal score by their bytes; the renders of the same shape
// order as (kind, id) do, and an id's render ("000...") sorts before "p:", "r:", "w:".
impl Ord for Member {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let rank = |m: &Member| match *m {
            Member::Id(id) => (0, id),
            Member::Queued(kind, id) => (kind, id),
        };
        rank(self).cmp(&rank(other))
    }
}

impl PartialOrd for Member {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A key's value, by Redis type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Val {
    /// `string`.
    Str(Text),
    /// `set` of lock ids (readers).
    Set(BTreeSet<Id>),
    /// `zset`: member → score (a deadline in ms, or an arrival ticket).
    ZSet(BTreeMap<Member, i64>),
    /// `hash`: a type this protocol writes only at a holders key (a hostile key).
    Hash,
    /// `hash` at a holders key: each described id's acquisition time (server ms), the
    /// rest of its text being the fixed description the steps send
    /// ([`crate::scripts::describe::TEXT`]).
    Holders(BTreeMap<Id, i64>),
}

impl Val {
    /// Redis's `TYPE`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Val::Str(_) => "string",
            Val::Set(_) => "set",
            Val::ZSet(_) => "zset",
            Val::Hash | Val::Holders(_) => "hash",
        }
    }
}

/// A key's value and its expiry on the abstract clock (ms; `None`: no TTL).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    pub val: Val,
    pub expires: Option<i64>,
}

/// A command failed on a key of another type (Redis's WRONGTYPE): what `redis.pcall`
/// returns as an error table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrongType;

/// The keyspace and the clocks. `now` (ms) is the clock keys expire by and that scripts
/// read as `now_ms()`; `clock_us` is what they read as `now_us()` (TIME): in the checker
/// `now` in microseconds, in the differential test the real server's reading.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Store {
    pub now: i64,
    pub clock_us: i64,
    pub keys: BTreeMap<Key, Entry>,
    /// A seeded bug of the model the scripts take (`crate::bugs`); `None` but in the
    /// checker's runs that show a property can fail.
    pub bug: Option<Bug>,
}

impl Store {
    /// An empty keyspace at `now` ms, whose TIME reads `now` in microseconds.
    pub fn at(now: i64) -> Store {
        Store {
            now,
            clock_us: now * 1000,
            keys: BTreeMap::new(),
            bug: None,
        }
    }

    /// Moves both clocks `ms` forward; the keys whose expiry is not after the new `now` go.
    pub fn advance(&mut self, ms: i64) {
        self.set_clock_us(self.clock_us + ms * 1000);
    }

    /// Sets the server clock (TIME) to `us` microseconds, and `now` with it; the keys whose
    /// expiry is not after it go. (A clock that moves back revives nothing: gone is gone.)
    pub fn set_clock_us(&mut self, us: i64) {
        self.clock_us = us;
        self.now = us.div_euclid(1000);
        self.expire();
    }

    /// Moves the data `ms` back in time instead of the clock forward (the differential
    /// test's way of advancing time on a real server): every expiry and every deadline
    /// (the scores of a semaphore's sorted set and of the queue's deadlines) less `ms`.
    pub fn shift(&mut self, ms: i64) {
        for (key, e) in self.keys.iter_mut() {
            e.expires = e.expires.map(|at| at - ms);
            if let (Key::Lock | Key::QueueDeadline, Val::ZSet(z)) = (key, &mut e.val) {
                z.values_mut().for_each(|score| *score -= ms);
            }
        }
        self.expire();
    }

    /// Drops the keys whose expiry is not after `now`.
    pub fn expire(&mut self) {
        let now = self.now;
        self.keys.retain(|_, e| e.expires.is_none_or(|at| at > now));
    }

    /// Runs `f` (a script of one lock key) on lock `l`'s keys: for lock 1, with lock 1's
    /// lock, intent and fence keys in lock 0's places and back after ([`Key::on`]), so
    /// that what `f` reads and writes as `Key::Lock`, `Key::Intent` and `Key::Fence` is
    /// lock 1's (a refusal in its reply names them as lock 0's), and so is
    /// `Key::Holders`. Only for scripts that touch no other key (lock.lua and rlock.lua
    /// not fair, unlock.lua's "w" and "r", renew.lua's `w` and `r`, exec.lua's check,
    /// describe.lua of one key): lock 1 has no queue, upgrader or data of its own.
    pub fn on_lock<R>(&mut self, l: usize, f: impl FnOnce(&mut Store) -> R) -> R {
        if l == 0 {
            return f(self);
        }
        self.swap_locks();
        let reply = f(self);
        self.swap_locks();
        reply
    }

    /// Lock 0's lock, intent, fence and holders keys and lock 1's change places.
    fn swap_locks(&mut self) {
        for k in [Key::Lock, Key::Intent, Key::Fence, Key::Holders] {
            let (a, b) = (self.keys.remove(&k), self.keys.remove(&k.on(1)));
            if let Some(a) = a {
                self.keys.insert(k.on(1), a);
            }
            if let Some(b) = b {
                self.keys.insert(k, b);
            }
        }
    }

    /// Whether the seeded bug `bug` is on.
    pub fn has(&self, bug: Bug) -> bool {
        self.bug == Some(bug)
    }

    /// `now_ms()`: TIME in whole milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.clock_us.div_euclid(1000)
    }

    pub fn exists(&self, k: Key) -> bool {
        self.keys.contains_key(&k)
    }

    /// `TYPE`.
    pub fn type_of(&self, k: Key) -> &'static str {
        self.keys.get(&k).map_or("none", |e| e.val.type_name())
    }

    /// `PTTL`: -2 absent, -1 no TTL, else the ms left.
    pub fn pttl(&self, k: Key) -> i64 {
        match self.keys.get(&k) {
            None => -2,
            Some(Entry { expires: None, .. }) => -1,
            Some(Entry {
                expires: Some(at), ..
            }) => at - self.now,
        }
    }

    /// `PEXPIRE`: 1 if the key exists (a TTL not above 0 deletes it).
    pub fn pexpire(&mut self, k: Key, ms: i64) -> bool {
        let now = self.now;
        let Some(e) = self.keys.get_mut(&k) else {
            return false;
        };
        if ms <= 0 {
            self.keys.remove(&k);
        } else {
            e.expires = Some(now + ms);
        }
        true
    }

    /// `PERSIST`: the key's TTL removed; whether it had one.
    pub fn persist(&mut self, k: Key) -> bool {
        self.keys
            .get_mut(&k)
            .is_some_and(|e| e.expires.take().is_some())
    }

    /// `GET`: `Ok(None)` absent, `Err` on another type.
    pub fn get(&self, k: Key) -> Result<Option<&Text>, WrongType> {
        match self.keys.get(&k) {
            None => Ok(None),
            Some(Entry {
                val: Val::Str(t), ..
            }) => Ok(Some(t)),
            Some(_) => Err(WrongType),
        }
    }

    /// `GET` compared with a string: what `redis.pcall('GET', k) == text` answers.
    pub fn get_is(&self, k: Key, text: &Text) -> bool {
        matches!(self.get(k), Ok(Some(t)) if t == text)
    }

    /// `SET k v [PX ms]` (any type replaced; no PX: no TTL).
    pub fn set(&mut self, k: Key, text: Text, px: Option<i64>) {
        let expires = px.map(|ms| self.now + ms);
        self.keys.insert(
            k,
            Entry {
                val: Val::Str(text),
                expires,
            },
        );
    }

    /// `DEL`: whether it existed.
    pub fn del(&mut self, k: Key) -> bool {
        self.keys.remove(&k).is_some()
    }

    fn set_mut(&mut self, k: Key) -> Result<Option<&mut BTreeSet<Id>>, WrongType> {
        match self.keys.get_mut(&k) {
            None => Ok(None),
            Some(Entry {
                val: Val::Set(s), ..
            }) => Ok(Some(s)),
            Some(_) => Err(WrongType),
        }
    }

    /// `SADD`: 1 added, 0 already a member.
    pub fn sadd(&mut self, k: Key, id: Id) -> Result<i64, WrongType> {
        if let Some(set) = self.set_mut(k)? {
            return Ok(i64::from(set.insert(id)));
        }
        self.keys.insert(
            k,
            Entry {
                val: Val::Set(BTreeSet::from([id])),
                expires: None,
            },
        );
        Ok(1)
    }

    /// `SREM`: 1 removed; the set goes with its last member.
    pub fn srem(&mut self, k: Key, id: Id) -> Result<i64, WrongType> {
        let Some(set) = self.set_mut(k)? else {
            return Ok(0);
        };
        let removed = set.remove(&id);
        if set.is_empty() {
            self.keys.remove(&k);
        }
        Ok(i64::from(removed))
    }

    /// `SCARD`: the members of the set at `k` (0 when absent).
    pub fn scard(&self, k: Key) -> Result<i64, WrongType> {
        match self.keys.get(&k) {
            None => Ok(0),
            Some(Entry {
                val: Val::Set(s), ..
            }) => Ok(s.len() as i64),
            Some(_) => Err(WrongType),
        }
    }

    /// `SISMEMBER`.
    pub fn sismember(&self, k: Key, id: Id) -> Result<bool, WrongType> {
        match self.keys.get(&k) {
            None => Ok(false),
            Some(Entry {
                val: Val::Set(s), ..
            }) => Ok(s.contains(&id)),
            Some(_) => Err(WrongType),
        }
    }

    /// The sorted set at `k` (empty when absent), or `Err` on another type.
    pub fn zset(&self, k: Key) -> Result<BTreeMap<Member, i64>, WrongType> {
        match self.keys.get(&k) {
            None => Ok(BTreeMap::new()),
            Some(Entry {
                val: Val::ZSet(z), ..
            }) => Ok(z.clone()),
            Some(_) => Err(WrongType),
        }
    }

    /// The members of `k` in Redis's order (score, then member).
    pub fn zrange(&self, k: Key) -> Result<Vec<(Member, i64)>, WrongType> {
        let mut all: Vec<(Member, i64)> = self.zset(k)?.into_iter().collect();
        all.sort_by_key(|&(m, score)| (score, m));
        Ok(all)
    }

    /// `ZSCORE`.
    pub fn zscore(&self, k: Key, m: Member) -> Result<Option<i64>, WrongType> {
        Ok(self.zset(k)?.get(&m).copied())
    }

    /// `ZADD k score m` (the key is made with no TTL when absent).
    pub fn zadd(&mut self, k: Key, score: i64, m: Member) -> Result<(), WrongType> {
        let mut z = self.zset(k)?;
        z.insert(m, score);
        self.put_zset(k, z);
        Ok(())
    }

    /// `ZREM`: 1 removed; the key goes with its last member.
    pub fn zrem(&mut self, k: Key, m: Member) -> Result<i64, WrongType> {
        let mut z = self.zset(k)?;
        let removed = z.remove(&m).is_some();
        self.put_zset(k, z);
        Ok(i64::from(removed))
    }

    /// `ZREMRANGEBYSCORE k -inf max`.
    pub fn zrem_upto(&mut self, k: Key, max: i64) -> Result<(), WrongType> {
        let mut z = self.zset(k)?;
        z.retain(|_, score| *score > max);
        self.put_zset(k, z);
        Ok(())
    }

    /// `ZCOUNT k (min +inf`.
    pub fn zcount_after(&self, k: Key, min: i64) -> Result<i64, WrongType> {
        Ok(self.zset(k)?.values().filter(|&&s| s > min).count() as i64)
    }

    /// Stores `z` at `k`, keeping its TTL; an empty set deletes the key.
    fn put_zset(&mut self, k: Key, z: BTreeMap<Member, i64>) {
        if z.is_empty() {
            self.keys.remove(&k);
            return;
        }
        let expires = self.keys.get(&k).and_then(|e| e.expires);
        self.keys.insert(
            k,
            Entry {
                val: Val::ZSet(z),
                expires,
            },
        );
    }

    /// `HSET k id at` on a holders hash (made with no TTL when absent); `Err` on another
    /// type. (A hostile hash is never put at a holders key, so it counts as another type.)
    pub fn hset(&mut self, k: Key, id: Id, at: i64) -> Result<(), WrongType> {
        match self.keys.get_mut(&k) {
            None => {
                let val = Val::Holders(BTreeMap::from([(id, at)]));
                self.keys.insert(k, Entry { val, expires: None });
                Ok(())
            }
            Some(Entry {
                val: Val::Holders(h),
                ..
            }) => {
                h.insert(id, at);
                Ok(())
            }
            Some(_) => Err(WrongType),
        }
    }

    /// `HDEL k id` on a holders hash: whether it was there; the hash goes with its last
    /// field. `Err` on another type.
    pub fn hdel(&mut self, k: Key, id: Id) -> Result<bool, WrongType> {
        let removed = match self.keys.get_mut(&k) {
            None => return Ok(false),
            Some(Entry {
                val: Val::Holders(h),
                ..
            }) => h.remove(&id).is_some(),
            Some(_) => return Err(WrongType),
        };
        if matches!(&self.keys[&k].val, Val::Holders(h) if h.is_empty()) {
            self.keys.remove(&k);
        }
        Ok(removed)
    }

    /// The described ids of the holders hash at `k` with their acquisition times (empty
    /// when absent or of another type).
    pub fn holders(&self, k: Key) -> BTreeMap<Id, i64> {
        match self.keys.get(&k) {
            Some(Entry {
                val: Val::Holders(h),
                ..
            }) => h.clone(),
            _ => BTreeMap::new(),
        }
    }

    /// `INCR`: the new value; `Err(())` on a value that is not an integer (Redis's ERR).
    /// An absent key becomes 1 with no TTL; an existing one keeps its TTL.
    pub fn incr(&mut self, k: Key) -> Result<i64, ()> {
        let (n, expires) = match self.keys.get(&k) {
            None => (0, None),
            Some(Entry {
                val: Val::Str(Text::Int(n)),
                expires,
            }) if *n < i64::MAX as u64 => (*n as i64, *expires),
            Some(_) => return Err(()),
        };
        self.keys.insert(
            k,
            Entry {
                val: Val::Str(Text::Int((n + 1) as u64)),
                expires,
            },
        );
        Ok(n + 1)
    }
}
