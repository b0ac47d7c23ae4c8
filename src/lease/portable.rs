//! [`Lease`]: a held lock's portable form, which a guard's `detach` gives and another
//! handle (in this process or another) attaches, releases or renews; and its text form.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::mode::Mode;
use crate::protocol::calls::Holder;
use crate::protocol::check::{check_key, MAX_SET_KEYS};
use crate::protocol::id::Id;

/// What every lease's text starts with, before its format version.
const PREFIX: &str = "redismutex-lease:";

/// The format version this release writes and reads.
const VERSION: &str = "1";

/// A held lock (or permit, or set of locks) that no guard keeps: what
/// [`WriteGuard::detach`](crate::WriteGuard::detach),
/// [`ReadGuard::detach`](crate::ReadGuard::detach),
/// [`Permit::detach`](crate::Permit::detach) and
/// [`MultiGuard::detach`](crate::MultiGuard::detach) give, so that another handle, in this
/// process or another, takes the hold over
/// ([`RwMutex::attach_write`](crate::RwMutex::attach_write),
/// [`attach_read`](crate::RwMutex::attach_read),
/// [`attach_all`](crate::RwMutex::attach_all),
/// [`Semaphore::attach`](crate::Semaphore::attach)), releases it
/// ([`RwMutex::release`](crate::RwMutex::release)) or keeps it alive
/// ([`RwMutex::renew`](crate::RwMutex::renew)). See the
/// [leases guide](crate::guide::leases).
///
/// A lease names the hold's id (32 lowercase hex characters) and, for each lock key of the
/// hold (one, or one per key of a set, in the set's order), the full Redis key (as
/// [`Guard::key`](crate::Guard::key) gives it), how the id holds it (writer, reader or
/// semaphore permit) and the fencing token of the acquisition.
///
/// # Text form
///
/// [`Display`](fmt::Display) writes it, and [`FromStr`] reads it back exactly:
///
/// ```text
/// redismutex-lease:1:<id>:<mode>:<token>:<key in hex>[,<mode>:<token>:<key in hex>...]
/// ```
///
/// `1` is the format version; `<mode>` is `w` (writer), `r` (reader) or `p` (permit);
/// `<token>` the fencing token in decimal; the key is the lowercase hex of its bytes. The
/// text is printable ASCII with no spaces, so it passes through a command line, an
/// environment variable or a queue message as it is.
///
/// # What a holder of the text can do
///
/// The text is a bearer capability: anyone who has it (and a connection to the server)
/// can attach the hold, renew it or release it, as long as the hold is still there. It is
/// not a secret beyond what the lock's value already is: the id is what the lock key
/// holds, which anyone who can read the key sees. Hand it over as you would hand over the
/// access to the Redis keys themselves.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(mx: redismutex::RwMutex<redis::aio::MultiplexedConnection>)
/// # -> Result<(), redismutex::Error> {
/// let guard = mx.write().key("job:42").await?;
/// let text = guard.detach().to_string(); // the lock stays held until its TTL
/// // ... in another process, with the text:
/// let lease: redismutex::Lease = text.parse()?;
/// let guard = mx.attach_write(&lease).await?; // refreshed here from now on
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    id: Id,
    parts: Vec<Part>,
}

/// One lock key of a lease: the key, how the id holds it, and its fencing token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Part {
    pub(crate) key: String,
    /// A writer, a reader or a permit (never an upgradable reader).
    pub(crate) holder: Holder,
    pub(crate) fencing_token: u64,
}

impl Lease {
    /// The lease of the hold of `id` on `parts` (not empty, in the hold's order).
    pub(crate) fn new(id: Id, parts: Vec<Part>) -> Self {
        Self { id, parts }
    }

    /// The hold's id: 32 lowercase hex characters, the value (or member) of each lock key.
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// The hold's id, as sent.
    pub(crate) fn raw_id(&self) -> Id {
        self.id
    }

    /// The lock keys of the hold, in its order (one for a single guard's lease).
    pub fn lock_keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.parts.iter().map(|part| part.key.as_str())
    }

    /// The fencing token of the acquisition of `lock_key` (a full key, as
    /// [`lock_keys`](Self::lock_keys) names it); `None` for a key not in the lease. An
    /// attached guard keeps it.
    pub fn fencing_token(&self, lock_key: &str) -> Option<u64> {
        self.parts
            .iter()
            .find(|part| part.key == lock_key)
            .map(|part| part.fencing_token)
    }

    /// How the hold has `lock_key` (a full key, as [`lock_keys`](Self::lock_keys) names
    /// it): [`Mode::Write`] as its writer, [`Mode::Read`] as one of its readers; `None`
    /// for a key not in the lease, and for a permit (see [`is_permit`](Self::is_permit)).
    pub fn mode(&self, lock_key: &str) -> Option<Mode> {
        match self.parts.iter().find(|part| part.key == lock_key)?.holder {
            Holder::Writer => Some(Mode::Write),
            Holder::Reader => Some(Mode::Read),
            _ => None,
        }
    }

    /// Whether the hold is a semaphore's permit (attached with
    /// [`Semaphore::attach`](crate::Semaphore::attach)), not a lock of a mutex.
    pub fn is_permit(&self) -> bool {
        self.parts.iter().any(|part| part.holder == Holder::Permit)
    }

    /// Each lock key of the hold, in its order.
    pub(crate) fn parts(&self) -> &[Part] {
        &self.parts
    }
}

impl fmt::Display for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{VERSION}:{}", self.id)?;
        for (at, part) in self.parts.iter().enumerate() {
            let sep = if at == 0 { ':' } else { ',' };
            let mode = letter(part.holder);
            let hex = hex::encode(part.key.as_bytes());
            write!(f, "{sep}{mode}:{}:{hex}", part.fencing_token)?;
        }
        Ok(())
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("id", &self.id)
            .field("parts", &self.parts)
            .finish()
    }
}

impl FromStr for Lease {
    type Err = Error;

    /// Reads a lease's text form back.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidLease`] when `text` is not the text of a lease this release reads:
    /// another prefix or format version (an unknown version is refused, never guessed),
    /// an id that is not 32 lowercase hex characters, a mode other than `w`, `r` or `p`,
    /// a token that is not a decimal `u64`, a key that is not lowercase hex of UTF-8 text
    /// or that no lock may have ([`Error::InvalidKey`]'s checks), no key, more than
    /// [`MAX_SET_KEYS`](crate::MAX_SET_KEYS) keys, or a key twice. It names the key when
    /// the fault is in one.
    fn from_str(text: &str) -> Result<Self, Error> {
        let invalid = |reason: String| Error::InvalidLease { key: None, reason };
        if text.is_empty() {
            return Err(invalid("the text is empty".into()));
        }
        let Some(rest) = text.strip_prefix(PREFIX) else {
            return Err(invalid(format!(
                "it does not start with {PREFIX:?}, so it is not a lease's text"
            )));
        };
        let mut fields = rest.splitn(3, ':');
        let (version, id, parts) = (fields.next(), fields.next(), fields.next());
        let version = version.unwrap_or_default();
        if version != VERSION {
            return Err(invalid(format!(
                "format version {version:?} is not known to this release; it reads version \
                 {VERSION}"
            )));
        }
        let id = id.unwrap_or_default();
        let id = Id::parse(id)
            .ok_or_else(|| invalid(format!("its id {id:?} is not 32 lowercase hex characters")))?;
        let parts = parts.ok_or_else(|| invalid("it names no lock key".into()))?;
        let count = parts.split(',').count();
        if count > MAX_SET_KEYS {
            return Err(invalid(format!(
                "it names {count} lock keys; a lease holds at most {MAX_SET_KEYS}"
            )));
        }
        let parts = parts
            .split(',')
            .map(parse_part)
            .collect::<Result<Vec<Part>, Error>>()?;
        let mut seen = HashSet::with_capacity(parts.len());
        if let Some(twice) = parts.iter().find(|part| !seen.insert(part.key.as_str())) {
            return Err(Error::InvalidLease {
                key: Some(twice.key.clone()),
                reason: "it names this lock key twice".into(),
            });
        }
        Ok(Self { id, parts })
    }
}

/// One `<mode>:<token>:<key in hex>` of a lease's text.
fn parse_part(text: &str) -> Result<Part, Error> {
    let invalid = |reason: String| Error::InvalidLease { key: None, reason };
    let mut fields = text.splitn(3, ':');
    let (mode, token, hex) = (fields.next(), fields.next(), fields.next());
    let (Some(mode), Some(token), Some(hex)) = (mode, token, hex) else {
        return Err(invalid(format!(
            "{text:?} is not <mode>:<token>:<key in hex>"
        )));
    };
    let holder = match mode {
        "w" => Holder::Writer,
        "r" => Holder::Reader,
        "p" => Holder::Permit,
        other => {
            return Err(invalid(format!(
                "mode {other:?} is none of \"w\", \"r\" and \"p\""
            )))
        }
    };
    let digits = !token.is_empty() && token.bytes().all(|byte| byte.is_ascii_digit());
    let fencing_token = token
        .parse::<u64>()
        .ok()
        .filter(|_| digits)
        .ok_or_else(|| invalid(format!("fencing token {token:?} is not a decimal u64")))?;
    let key = decode_key(hex)?;
    if let Err(err) = check_key(&key) {
        let reason = match err {
            Error::InvalidKey { reason, .. } => reason,
            other => other.to_string(),
        };
        return Err(Error::InvalidLease {
            key: Some(key),
            reason,
        });
    }
    Ok(Part {
        key,
        holder,
        fencing_token,
    })
}

/// A lock key from the lowercase hex of its bytes, which must be UTF-8 text.
fn decode_key(hex: &str) -> Result<String, Error> {
    let invalid = |reason: String| Error::InvalidLease { key: None, reason };
    if hex.is_empty() {
        return Err(invalid("a lock key is empty".into()));
    }
    let lowercase = hex
        .bytes()
        .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
    let bytes = hex::decode(hex)
        .ok()
        .filter(|_| lowercase)
        .ok_or_else(|| invalid(format!("lock key {hex:?} is not lowercase hex")))?;
    String::from_utf8(bytes)
        .map_err(|_| invalid(format!("lock key {hex:?} is not the hex of UTF-8 text")))
}

/// A part's mode in the text: `w`, `r` or `p`.
fn letter(holder: Holder) -> char {
    match holder {
        Holder::Writer => 'w',
        Holder::Reader | Holder::Upgradable => 'r',
        Holder::Permit => 'p',
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(parts: &[(&str, Holder, u64)]) -> Lease {
        Lease::new(
            Id::new(),
            parts
                .iter()
                .map(|(key, holder, fencing_token)| Part {
                    key: (*key).to_owned(),
                    holder: *holder,
                    fencing_token: *fencing_token,
                })
                .collect(),
        )
    }

    #[test]
    fn the_text_round_trips_and_reads_as_documented() {
        let one = lease(&[("jobs:42", Holder::Writer, 7)]);
        let text = one.to_string();
        assert_eq!(
            text,
            format!("redismutex-lease:1:{}:w:7:6a6f62733a3432", one.id())
        );
        assert_eq!(text.parse::<Lease>().unwrap(), one);
        let set = lease(&[
            ("{a}:1", Holder::Writer, u64::MAX),
            ("{a}:é", Holder::Reader, 0),
        ]);
        assert_eq!(set.to_string().parse::<Lease>().unwrap(), set);
        let permit = lease(&[("sem", Holder::Permit, 3)]);
        assert!(permit.to_string().contains(":p:3:73656d"));
        assert_eq!(set.fencing_token("{a}:1"), Some(u64::MAX));
        assert_eq!(set.lock_keys().collect::<Vec<_>>(), ["{a}:1", "{a}:é"]);
    }

    #[test]
    fn every_fault_is_an_invalid_lease_naming_the_key_when_known() {
        let id = Id::new();
        let key = hex::encode("k");
        let cases = [
            (String::new(), None, "empty"),
            (format!("lease:1:{id}:w:1:{key}"), None, "not a lease"),
            (
                format!("redismutex-lease:2:{id}:w:1:{key}"),
                None,
                "version \"2\"",
            ),
            (
                format!("redismutex-lease:1:{}:w:1:{key}", "A".repeat(32)),
                None,
                "id",
            ),
            (format!("redismutex-lease:1:{id}"), None, "no lock key"),
            (format!("redismutex-lease:1:{id}:x:1:{key}"), None, "mode"),
            (format!("redismutex-lease:1:{id}:w:+1:{key}"), None, "token"),
            (format!("redismutex-lease:1:{id}:w:1:6B"), None, "hex"),
            (format!("redismutex-lease:1:{id}:w:1:"), None, "empty"),
            (format!("redismutex-lease:1:{id}:w:1:ff"), None, "UTF-8"),
            (
                format!("redismutex-lease:1:{id}:w:1:{}", hex::encode("a:fence")),
                Some("a:fence"),
                "fence",
            ),
            (
                format!("redismutex-lease:1:{id}:w:1:{key},r:2:{key}"),
                Some("k"),
                "twice",
            ),
        ];
        for (text, named, says) in cases {
            match text.parse::<Lease>() {
                Err(Error::InvalidLease { key, reason }) => {
                    assert_eq!(key.as_deref(), named, "{text}");
                    assert!(reason.contains(says), "{text}: {reason}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        let many: Vec<String> = (0..=MAX_SET_KEYS)
            .map(|n| format!("w:1:{}", hex::encode(format!("k{n}"))))
            .collect();
        let text = format!("redismutex-lease:1:{id}:{}", many.join(","));
        assert!(matches!(
            text.parse::<Lease>(),
            Err(Error::InvalidLease { key: None, ref reason }) if reason.contains("at most")
        ));
    }
}
