//! The one read of `status`: the lock's state as one snapshot of the server, taken by
//! `RwMutex::inspect` or `Semaphore::inspect` (`lua/inspect.lua`, a script of reads) on
//! a handle made over the server's connection. When the crate refuses the lock's keys
//! (`Error::WrongType`, `Error::NoExpiry`), the refusal is what is known: nothing else is
//! read.

use redis::aio::MultiplexedConnection;
use redismutex::{Error, LockState, RwMutex, Semaphore};

use crate::args::StatusArgs;

/// The lock `status` looks at, as the command line names it.
#[derive(Debug, Clone)]
pub(super) struct Target {
    /// The mutex or semaphore name.
    name: String,
    /// `--key`: the key after the name, `""` for none (the lock key is the name).
    key: String,
    /// `--hash-tag-keys`: whether the handles tag the lock key.
    hash_tag_keys: bool,
    /// The lock key, as the library forms it: `<name>`, or `<name>:<key>`, tagged with
    /// `--hash-tag-keys`.
    lock_key: String,
    /// `--permits`: the semaphore's permit count, when the key is said to be one.
    pub(super) permits: Option<u32>,
}

impl Target {
    /// The lock the arguments of `status` name, whose lock key is `lock_key`
    /// ([`args::Target::lock_key`](crate::args::Target)).
    pub(super) fn of(args: &StatusArgs, lock_key: String) -> Self {
        Self {
            name: args.target.name.clone(),
            key: args.target.key_arg().to_owned(),
            hash_tag_keys: args.target.hash_tag_keys,
            lock_key,
            permits: args.permits,
        }
    }

    /// The lock key, as the library forms it.
    pub(super) fn lock_key(&self) -> &str {
        &self.lock_key
    }
}

/// The lock's state, as read.
#[derive(Debug)]
pub(super) enum Snapshot {
    /// A read-write lock's key, or no key: what `RwMutex::inspect` read.
    Lock(LockState),
    /// A semaphore's key: what `Semaphore::inspect` read.
    Semaphore(LockState),
    /// Keys the crate refuses, as the refusals said.
    Refused(Refusal),
}

/// What the crate's refusals of the lock's keys say.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Refusal {
    /// The lock key's Redis `TYPE`, when a refusal named it.
    pub(super) lock_type: Option<String>,
    /// What else is wrong: another key of the lock of a type the lock does not use, or
    /// a key with no TTL.
    pub(super) why: Option<String>,
}

impl Refusal {
    /// Adds what `err`, a refusal of a key of the lock at `lock_key`, says (the first
    /// reason is kept; the lock key's type is the last one named).
    fn add(&mut self, err: &Error, lock_key: &str) {
        match err {
            Error::WrongType { key, found, .. } => self.note(key, Some(found), lock_key),
            Error::NoExpiry { key, .. } => self.note(key, None, lock_key),
            _ => {}
        }
    }

    /// Adds a refusal of `key`: it holds a Redis `TYPE` `found`, or (`None`) it has no
    /// TTL.
    fn note(&mut self, key: &str, found: Option<&str>, lock_key: &str) {
        match found {
            Some(found) if key == lock_key => self.lock_type = Some(found.to_owned()),
            Some(found) => {
                self.why
                    .get_or_insert_with(|| format!("{key} holds a {found}"));
            }
            None if key == lock_key => {
                self.why.get_or_insert_with(|| "it has no TTL".to_owned());
            }
            None => {
                self.why.get_or_insert_with(|| format!("{key} has no TTL"));
            }
        }
    }
}

/// How a handle reads the lock key: as a read-write lock's or as a semaphore's.
#[derive(Debug, Clone, Copy)]
enum Form {
    Lock,
    Semaphore,
}

impl Form {
    /// The other form.
    fn other(self) -> Self {
        match self {
            Self::Lock => Self::Semaphore,
            Self::Semaphore => Self::Lock,
        }
    }

    /// Whether a lock key of Redis type `found` is this form's.
    fn reads(self, found: &str) -> bool {
        match self {
            Self::Lock => matches!(found, "string" | "set"),
            Self::Semaphore => found == "zset",
        }
    }
}

/// Reads the lock `target` names on `conn`, in one snapshot: as a semaphore when
/// `--permits` says it is one, else as a read-write lock. When that form refuses the
/// lock key for being the other's (a sorted set is a semaphore's, a string or a set a
/// lock's), or for having no TTL (the other form then names its type: types are checked
/// first), the other form reads it instead. A Redis error, or a name or key no request
/// could use, is an error.
pub(super) async fn take(conn: MultiplexedConnection, target: &Target) -> Result<Snapshot, Error> {
    let lock_key = target.lock_key();
    let first = match target.permits {
        Some(_) => Form::Semaphore,
        None => Form::Lock,
    };
    let refused = match inspect(&conn, target, first).await {
        Err(err) if is_refusal(&err) => err,
        done => return done,
    };
    let mut refusal = Refusal::default();
    refusal.add(&refused, lock_key);
    let other_reads = match &refused {
        Error::WrongType { key, found, .. } => key == lock_key && first.other().reads(found),
        Error::NoExpiry { key, .. } => key == lock_key,
        _ => false,
    };
    if other_reads {
        match inspect(&conn, target, first.other()).await {
            Err(err) if is_refusal(&err) => refusal.add(&err, lock_key),
            done => return done,
        }
    }
    Ok(Snapshot::Refused(refusal))
}

/// One inspection of the lock `target` names, by a handle of `form` over `conn`.
async fn inspect(
    conn: &MultiplexedConnection,
    target: &Target,
    form: Form,
) -> Result<Snapshot, Error> {
    let (name, tagged) = (target.name.clone(), target.hash_tag_keys);
    match form {
        Form::Lock => RwMutex::builder(conn.clone(), name)
            .hash_tag_keys(tagged)
            .build()?
            .inspect(&target.key)
            .await
            .map(Snapshot::Lock),
        Form::Semaphore => {
            // The count is not stored in Redis, and inspecting does not use it.
            let permits = target.permits.unwrap_or(1);
            Semaphore::builder(conn.clone(), name, permits)
                .hash_tag_keys(tagged)
                .build()?
                .inspect(&target.key)
                .await
                .map(Snapshot::Semaphore)
        }
    }
}

/// Whether `err` is the crate refusing a key of the lock (left untouched).
fn is_refusal(err: &Error) -> bool {
    matches!(err, Error::WrongType { .. } | Error::NoExpiry { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    // `Error`'s variants are `#[non_exhaustive]`, so the refusals are made as `note`
    // takes them: a key and its type, or no type for a key with no TTL.
    fn wrong<'a>(key: &'a str, found: &'a str) -> (&'a str, Option<&'a str>) {
        (key, Some(found))
    }

    fn no_expiry(key: &str) -> (&str, Option<&str>) {
        (key, None)
    }

    fn refusal(refusals: &[(&str, Option<&str>)]) -> Refusal {
        let mut refusal = Refusal::default();
        for (key, found) in refusals {
            refusal.note(key, *found, "jobs");
        }
        refusal
    }

    fn expect(lock_type: Option<&str>, why: Option<&str>) -> Refusal {
        Refusal {
            lock_type: lock_type.map(str::to_owned),
            why: why.map(str::to_owned),
        }
    }

    #[test]
    fn refusals_name_the_lock_keys_type_and_the_first_reason() {
        assert_eq!(
            refusal(&[wrong("jobs", "hash")]),
            expect(Some("hash"), None)
        );
        assert_eq!(
            refusal(&[no_expiry("jobs"), wrong("jobs", "string")]),
            expect(Some("string"), Some("it has no TTL")),
            "a lock key with no TTL, typed by the other form"
        );
        assert_eq!(
            refusal(&[wrong("jobs", "zset"), wrong("jobs:fence", "list")]),
            expect(Some("zset"), Some("jobs:fence holds a list"))
        );
        assert_eq!(
            refusal(&[no_expiry("jobs:queue"), no_expiry("jobs")]),
            expect(None, Some("jobs:queue has no TTL")),
            "the first reason is kept"
        );
        assert_eq!(
            refusal(&[wrong("jobs", "zset"), wrong("jobs", "hash")]),
            expect(Some("hash"), None),
            "the last type named is the lock key's"
        );
        let mut other = Refusal::default();
        other.add(&Error::Timeout, "jobs");
        assert_eq!(other, Refusal::default());
    }

    #[test]
    fn each_form_reads_its_own_types() {
        assert!(Form::Lock.reads("string") && Form::Lock.reads("set"));
        assert!(!Form::Lock.reads("zset") && !Form::Lock.reads("hash"));
        assert!(Form::Semaphore.reads("zset") && !Form::Semaphore.reads("string"));
        assert!(matches!(Form::Lock.other(), Form::Semaphore));
        assert!(!is_refusal(&Error::Timeout));
    }
}
