//! What [`RwMutex::inspect`](crate::RwMutex::inspect) and
//! [`Semaphore::inspect`](crate::Semaphore::inspect) read: the state of one lock key.

use std::fmt;
use std::time::{Duration, SystemTime};

use crate::mode::Mode;

/// The state of one lock or semaphore key as Redis held it at one instant: who holds it,
/// for how long, who waits, and the last fencing token; and in detail, each key's TTL,
/// each permit's and each waiter's deadline as stored, and the server time they were
/// compared with. Made by
/// [`RwMutex::inspect`](crate::RwMutex::inspect) and
/// [`Semaphore::inspect`](crate::Semaphore::inspect), which read every field in one
/// script, so the fields are one snapshot of the server, never a mix of two moments.
///
/// It is a report, not a lock: by the time it is read the state may have changed. To act
/// on a lock, take it; to stop a stale holder's writes, fence them (see the
/// [inspection guide](crate::guide::inspection)).
///
/// # Examples
///
/// ```no_run
/// # async fn demo(mx: redismutex::RwMutex<redis::aio::MultiplexedConnection>)
/// # -> Result<(), redismutex::Error> {
/// let state = mx.inspect("42").await?;
/// match state.mode() {
///     None => println!("free"),
///     Some(mode) => println!(
///         "{mode:?} held by {:?} for {:?} more",
///         state.holders(),
///         state.ttl()
///     ),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockState {
    pub(crate) mode: Option<Mode>,
    pub(crate) holders: Vec<String>,
    pub(crate) ttl: Option<Duration>,
    pub(crate) last_fencing_token: Option<u64>,
    pub(crate) queue: Vec<QueueEntry>,
    pub(crate) server_time: SystemTime,
    pub(crate) waiting_writer: Option<String>,
    pub(crate) key_ttls: Vec<(String, Duration)>,
    pub(crate) permit_deadlines: Vec<(String, Option<SystemTime>)>,
    pub(crate) queue_tickets: Vec<(QueueEntry, Option<u64>)>,
    pub(crate) queue_deadlines: Vec<(QueueEntry, Option<SystemTime>)>,
    /// The descriptions of the holders that have one, in [`holders`](Self::holders)'
    /// order.
    pub(crate) holder_info: Vec<(String, HolderInfo)>,
}

impl LockState {
    /// How the key is held: `None` when it is free, `Some(Mode::Write)` when a writer
    /// holds it (the lock key is a string), `Some(Mode::Read)` when readers hold it (a
    /// set). A semaphore that at least one unexpired permit holds is `Some(Mode::Read)`:
    /// its holders share it, as readers do; one whose every permit has run out is free.
    pub fn mode(&self) -> Option<Mode> {
        self.mode
    }

    /// The ids that hold the key: the writer's id, the readers' ids in sorted order, or
    /// the ids of the unexpired permits, the first to run out first. Empty when the key
    /// is free. These are the ids [`Guard::id`](crate::Guard::id) gives.
    pub fn holders(&self) -> &[String] {
        &self.holders
    }

    /// How long the lock key lives without a refresh: its PTTL, in whole milliseconds.
    /// `None` when the key is free. A readers' set or a semaphore's sorted set lives as
    /// long as its longest-lived holder: each acquire and refresh raises its PTTL, never
    /// shortens it (a permit's own deadline is its score in the key).
    pub fn ttl(&self) -> Option<Duration> {
        self.ttl
    }

    /// The last fencing token minted for the key, the value stored at
    /// `<lock key>:fence`: the token of the last guard or permit acquired (a holder's
    /// [`Guard::fencing_token`](crate::Guard::fencing_token) is at most this). `None`
    /// when that key is absent: no acquisition within the fence retention.
    pub fn last_fencing_token(&self) -> Option<u64> {
        self.last_fencing_token
    }

    /// How many hold the key: [`holders`](Self::holders)`().len()`. For a semaphore, the
    /// permits in use: the holders whose deadline is after the server's clock (`TIME`);
    /// a permit whose deadline has passed counts for nothing, though its id stays in the
    /// key until the next acquire removes it.
    pub fn permits_in_use(&self) -> usize {
        self.holders.len()
    }

    /// The fair queue (see [`Builder::fair`]), the next to be served first: each waiter
    /// as a [`QueueEntry`], a writer, a reader or a permit with its id. Waiters whose
    /// deadline to attempt again has passed are left out, as the next fair request drops
    /// them. Empty when the lock is not fair or nobody waits.
    ///
    /// [`Builder::fair`]: crate::Builder::fair
    pub fn queue(&self) -> &[QueueEntry] {
        &self.queue
    }

    /// The server's clock when the snapshot was read (its `TIME`, to the whole
    /// millisecond): the one instant every deadline of the snapshot was compared with
    /// (which permits are [`holders`](Self::holders), which waiters are in
    /// [`queue`](Self::queue)). It is Redis's clock, not this machine's: measure a
    /// deadline against it, as in `deadline.duration_since(state.server_time())`.
    pub fn server_time(&self) -> SystemTime {
        self.server_time
    }

    /// The value of `<lock key>:lock-intent`: the id of the writer waiting with its lock
    /// intent set (the [`WriteGuard::id`](crate::WriteGuard::id) it will hold), or `"1"`
    /// when a writer of the Go package set it (which stores no id). `None` when no writer
    /// waits with its intent: `waiting_writer().is_some()` says whether one does, which
    /// keeps new readers out (see [`Builder::lock_intent`]).
    ///
    /// [`Builder::lock_intent`]: crate::Builder::lock_intent
    pub fn waiting_writer(&self) -> Option<&str> {
        self.waiting_writer.as_deref()
    }

    /// Every key of the lock that exists, with its PTTL in whole milliseconds, in this
    /// order, each only when it exists: the lock key, `<lock key>:lock-intent`,
    /// `<lock key>:fence`, `<lock key>:queue` and `<lock key>:queue-deadline` (with
    /// [`Builder::hash_tag_keys`], the tagged names). Unlike [`ttl`](Self::ttl), the lock
    /// key is listed whenever it exists: also a semaphore key whose every permit ran
    /// out, which is free but not yet removed. Empty when none of them exists.
    ///
    /// [`Builder::hash_tag_keys`]: crate::Builder::hash_tag_keys
    pub fn key_ttls(&self) -> &[(String, Duration)] {
        &self.key_ttls
    }

    /// For a semaphore ([`Semaphore::inspect`](crate::Semaphore::inspect)): every permit
    /// id in the semaphore key, expired or not, with its deadline, the first to run out
    /// first. The deadline is the server time at which the permit runs out unless
    /// refreshed, by the server's clock (compare it with
    /// [`server_time`](Self::server_time)): the permits whose deadline is after
    /// `server_time()` are the [`holders`](Self::holders); the others count for nothing
    /// and stay in the key until the next acquire removes them. A deadline is `None`
    /// when the stored score is not a whole number of milliseconds (a key the crate did
    /// not write). Empty for a read-write lock, and for a semaphore key that does not
    /// exist.
    pub fn permit_deadlines(&self) -> &[(String, Option<SystemTime>)] {
        &self.permit_deadlines
    }

    /// Every member of the fair queue `<lock key>:queue` (see [`Builder::fair`]) in queue
    /// order, the next to be served first, with its arrival ticket (its score; `None`
    /// when that is not a whole number from 0 to 2^53 - 1, which the crate does not
    /// write). Unlike [`queue`](Self::queue), it keeps the waiters whose deadline has
    /// passed: they stay stored until the next fair request drops them (their deadlines
    /// are in [`queue_deadlines`](Self::queue_deadlines)). Empty when the queue key does
    /// not exist.
    ///
    /// [`Builder::fair`]: crate::Builder::fair
    pub fn queue_tickets(&self) -> &[(QueueEntry, Option<u64>)] {
        &self.queue_tickets
    }

    /// Every member of `<lock key>:queue-deadline`, the earliest first, with its
    /// deadline: the server time by which that waiter must attempt again or lose its
    /// place, by the server's clock (compare it with [`server_time`](Self::server_time):
    /// a deadline not after it has passed). `None` when the stored score is not a whole
    /// number of milliseconds (a key the crate did not write). Empty when that key does
    /// not exist.
    pub fn queue_deadlines(&self) -> &[(QueueEntry, Option<SystemTime>)] {
        &self.queue_deadlines
    }

    /// Who the holder `id` (one of [`holders`](Self::holders)) is: its host, process,
    /// program, label and when it acquired, as a handle with
    /// [`Builder::describe_holder`](crate::Builder::describe_holder) recorded it in
    /// `<lock key>:holders`. `None` when `id` holds nothing, or holds without a
    /// description (its handle does not describe its holders, a Go client, a description
    /// in a format this release does not read). A reader's or a permit's description is
    /// its own: each holder has one.
    pub fn holder_info(&self, id: &str) -> Option<&HolderInfo> {
        self.holder_info
            .iter()
            .find(|(holder, _)| holder == id)
            .map(|(_, info)| info)
    }
}

/// Who holds a lock, as its holder recorded it when it acquired
/// ([`Builder::describe_holder`](crate::Builder::describe_holder)), read by
/// [`LockState::holder_info`]: the host, the process (its pid, and its start time, which
/// tells a reused pid apart), the program, the handle's label and the acquisition time.
/// It is what the holder said of itself, not a proof: any client that can write the key
/// can write it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderInfo {
    host: String,
    pid: u32,
    process_started_at: Option<SystemTime>,
    program: String,
    label: Option<String>,
    acquired_at: SystemTime,
}

impl HolderInfo {
    /// The host name of the holder's machine (control characters shown as `?`).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The holder's process id on [`host`](Self::host).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The file name of the holder's executable (control characters shown as `?`).
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The label of the holder's handle
    /// ([`Builder::holder_label`](crate::Builder::holder_label)); `None` when it has none.
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// When the holder's process started, by its machine's clock, to the millisecond:
    /// with [`pid`](Self::pid) it names one process, even when the pid is reused later.
    /// `None` where the holder could not read it (it is read on Linux only).
    pub fn process_started_at(&self) -> Option<SystemTime> {
        self.process_started_at
    }

    /// When the holder acquired the lock, by the Redis server's clock (`TIME`, to the
    /// millisecond; compare it with [`LockState::server_time`]).
    pub fn acquired_at(&self) -> SystemTime {
        self.acquired_at
    }

    /// The description stored in `<lock key>:holders`, format version 1:
    /// `1\t<host>\t<pid>\t<process start, unix ms, or empty>\t<program>\t<label or
    /// empty>\t<acquired, server unix ms>`; `None` for any other text (another version).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let [version, host, pid, started, program, label, acquired] =
            <[&str; 7]>::try_from(text.split('\t').collect::<Vec<_>>()).ok()?;
        if version != "1" {
            return None;
        }
        let unix_ms = |ms: &str| {
            ms.parse::<u64>()
                .ok()
                .and_then(|ms| SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(ms)))
        };
        Some(Self {
            host: host.to_owned(),
            pid: pid.parse().ok()?,
            process_started_at: if started.is_empty() {
                None
            } else {
                Some(unix_ms(started)?)
            },
            program: program.to_owned(),
            label: (!label.is_empty()).then(|| label.to_owned()),
            acquired_at: unix_ms(acquired)?,
        })
    }
}

/// One member of a fair queue (see [`Builder::fair`]), as [`LockState::queue`],
/// [`LockState::queue_tickets`] and [`LockState::queue_deadlines`] give it: who waits,
/// for what, under which id. The id is the one the guard or permit it waits for will
/// have ([`Guard::id`](crate::Guard::id)). It displays as it is stored in Redis:
/// `w:<id>`, `r:<id>`, `p:<id>`, or an [`Unknown`](Self::Unknown) member as it is.
///
/// [`Builder::fair`]: crate::Builder::fair
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueueEntry {
    /// A writer waiting for the write lock (stored as `w:<id>`), with its id.
    Writer(String),
    /// A reader waiting for a read lock (`r:<id>`), with its id.
    Reader(String),
    /// A request waiting for a semaphore's permit (`p:<id>`), with its id.
    Permit(String),
    /// A member the crate does not write (another prefix, or an id that is not 32
    /// lowercase hex characters), as stored.
    Unknown(String),
}

impl QueueEntry {
    /// The id of the waiter: the id its guard or permit will have; `None` for an
    /// [`Unknown`](Self::Unknown) member.
    pub fn id(&self) -> Option<&str> {
        match self {
            Self::Writer(id) | Self::Reader(id) | Self::Permit(id) => Some(id),
            Self::Unknown(_) => None,
        }
    }
}

impl fmt::Display for QueueEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Writer(id) => write!(f, "w:{id}"),
            Self::Reader(id) => write!(f, "r:{id}"),
            Self::Permit(id) => write!(f, "p:{id}"),
            Self::Unknown(member) => f.write_str(member),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_of_version_1_reads_and_no_other() {
        let ms = |ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
        let info =
            HolderInfo::parse("1\thost-a\t4242\t1700000000123\tworker\tbilling\t1800000000456")
                .unwrap();
        assert_eq!(info.host(), "host-a");
        assert_eq!(info.pid(), 4242);
        assert_eq!(info.process_started_at(), Some(ms(1_700_000_000_123)));
        assert_eq!(info.program(), "worker");
        assert_eq!(info.label(), Some("billing"));
        assert_eq!(info.acquired_at(), ms(1_800_000_000_456));
        let bare = HolderInfo::parse("1\th\t1\t\tp\t\t5").unwrap();
        assert_eq!((bare.process_started_at(), bare.label()), (None, None));
        for other in [
            "2\th\t1\t\tp\t\t5",
            "1\th\t1\t\tp\t\t5\textra",
            "1\th\tpid\t\tp\t\t5",
            "1\th\t1\tx\tp\t\t5",
            "1\th\t1\t\tp\t\t",
            "",
        ] {
            assert_eq!(HolderInfo::parse(other), None, "{other:?}");
        }
    }
}
