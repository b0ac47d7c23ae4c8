//! Holder identity: the description a describing handle records beside each lock it
//! takes (`lua/describe.lua`, in `<lock key>:holders`), the text made once per handle,
//! and the call that writes it, on its own or pipelined after an acquire attempt.
//!
//! The text, format version 1, tab-separated:
//! `1\t<host>\t<pid>\t<process start, unix ms, or empty>\t<program>\t<label or empty>\t`
//! and the script appends the acquisition time (the server's clock, unix ms). It is read
//! back by [`HolderInfo::parse`](crate::lock_state::HolderInfo).

use std::sync::{Arc, OnceLock};

use redis::aio::ConnectionLike;
use redis::Cmd;

use super::id::Id;
use super::keys::Keys;
use super::lua::{Fill, Then, SCRIPTS};
use crate::error::{Error, Preview};

/// The longest label accepted, in bytes.
pub(crate) const MAX_LABEL_BYTES: usize = 256;

/// Checks a holder label ([`Builder::holder_label`](crate::Builder::holder_label)): at
/// most [`MAX_LABEL_BYTES`] bytes, no control character (a tab would break the text).
pub(crate) fn check_label(label: &str) -> Result<(), Error> {
    let reason = if label.len() > MAX_LABEL_BYTES {
        format!("it is {} bytes, more than {MAX_LABEL_BYTES}", label.len())
    } else if label.chars().any(char::is_control) {
        "it holds a control character".to_owned()
    } else {
        return Ok(());
    };
    Err(Error::InvalidOptions(format!(
        "holder label {} is refused: {reason}",
        Preview(label)
    )))
}

/// The description of this process with `label`, all but the acquisition time: what
/// `describe.lua` takes as ARGV[3]. The process's part is read once per process.
pub(crate) fn text(label: Option<&str>) -> Arc<String> {
    static PROCESS: OnceLock<String> = OnceLock::new();
    let process = PROCESS.get_or_init(process_text);
    Arc::new(format!("{process}{}\t", label.unwrap_or("")))
}

/// `1\t<host>\t<pid>\t<start>\t<program>\t`.
fn process_text() -> String {
    let start = process_start_ms().map_or_else(String::new, |ms| ms.to_string());
    format!(
        "1\t{}\t{}\t{start}\t{}\t",
        printable(&host()),
        std::process::id(),
        printable(&program())
    )
}

/// `text` with every control character (a tab, a newline) as `?`.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The host name: `/proc/sys/kernel/hostname` on Linux, else `HOSTNAME` or
/// `COMPUTERNAME`, else empty.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim_end().to_owned())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_default()
}

/// The file name of this process's executable (or of its first argument).
fn program() -> String {
    let path = std::env::current_exe()
        .ok()
        .or_else(|| std::env::args_os().next().map(Into::into));
    path.as_deref()
        .and_then(std::path::Path::file_name)
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// When this process started, unix ms: on Linux, the boot time of `/proc/stat`
/// (`btime`, seconds) plus the start of `/proc/self/stat` (field 22, in clock ticks of
/// 1/100 s: the kernel's `USER_HZ`, 100 on every architecture Linux runs on); `None`
/// elsewhere, or when either cannot be read.
fn process_start_ms() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: u64 = boot
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(btime * 1000 + ticks * 10)
}

/// One `describe.lua` call: the lock keys `keys` (each with its holders key), the id,
/// the TTL in milliseconds and the text.
pub(crate) struct Describe<'a> {
    pub(crate) keys: &'a [&'a Keys],
    pub(crate) id: Id,
    pub(crate) ttl_ms: u64,
    pub(crate) text: &'a str,
}

impl Fill for Describe<'_> {
    /// Adds the keys and the arguments of the call.
    fn fill(&self, cmd: &mut Cmd) {
        for keys in self.keys {
            cmd.arg(keys.lock());
        }
        for keys in self.keys {
            cmd.arg(keys.holders());
        }
        cmd.arg(self.id).arg(self.ttl_ms).arg(self.text);
    }
}

impl Describe<'_> {
    /// The call as a [`Then`], to be pipelined after an acquire attempt; `None` without
    /// keys.
    pub(crate) fn then(&self) -> Option<Then<'_>> {
        Some(Then {
            lua: &SCRIPTS.describe,
            keys: self.keys.first()?,
            numkeys: 2 * self.keys.len(),
            fill: self,
        })
    }
}

/// Runs `describe.lua` on its own: describes `id` as the holder of each of `keys` it
/// holds now (with `text`, [`text`]), keeping each holders key's PTTL at least the lock
/// key's (`ttl_ms` for one without). How many keys were described. (An attach describes the hold it took over
/// so.)
#[allow(
    dead_code,
    reason = "sent on its own after an attach, which the leases add; the tests send it"
)]
pub(crate) async fn describe<C: ConnectionLike>(
    conn: &mut C,
    keys: &[&Keys],
    id: Id,
    ttl_ms: u64,
    text: &str,
) -> Result<u64, Error> {
    let Some(first) = keys.first() else {
        return Ok(0);
    };
    let call = Describe {
        keys,
        id,
        ttl_ms,
        text,
    };
    SCRIPTS
        .describe
        .run(conn, first, 2 * keys.len(), |cmd| call.fill(cmd))
        .await
        .map_err(|err| Error::redis(first.lock(), err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_version_1_with_six_tabs_and_no_other_control_character() {
        let text = text(Some("billing"));
        assert!(text.starts_with("1\t"), "{text:?}");
        assert!(text.ends_with("\tbilling\t"), "{text:?}");
        assert_eq!(text.matches('\t').count(), 6, "{text:?}");
        assert!(!text.chars().any(|c| c.is_control() && c != '\t'));
        let fields: Vec<&str> = text.split('\t').collect();
        assert_eq!(fields[2], std::process::id().to_string());
        if cfg!(target_os = "linux") {
            assert!(!fields[1].is_empty(), "a host name");
            let started: u64 = fields[3].parse().expect("a start time on Linux");
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64;
            assert!(started <= now + 1000 && started > now - 86_400_000 * 365);
        }
        assert!(!fields[4].is_empty(), "a program name");
        let process = &text[..text.len() - "billing\t".len()];
        assert_eq!(*super::text(None), format!("{process}\t"));
        assert_eq!(printable("a\tb\nc"), "a?b?c");
    }

    #[test]
    fn a_label_is_short_and_printable() {
        assert!(check_label("billing").is_ok());
        assert!(check_label(&"é".repeat(MAX_LABEL_BYTES / 2)).is_ok());
        for bad in ["a\tb", "a\nb", "\u{7f}", &"x".repeat(MAX_LABEL_BYTES + 1)] {
            let err = check_label(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidOptions(_)), "{bad:?}: {err}");
        }
    }
}
