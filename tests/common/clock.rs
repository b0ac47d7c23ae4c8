//! Clock faults for a `redis-server`: the shim `tests/support/clock_shim.rs`, built once
//! per test process with `rustc`, preloaded into the server, and the control file through
//! which a test moves that server's wall clock (a jump forward or back, or a clock that
//! runs fast). The server's `TIME`, its key expiry and every script's clock move with it;
//! its monotonic clock does not.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use super::RedisServer;

/// The variable that names the control file, as the shim reads it.
const CONTROL_VAR: &str = "REDISMUTEX_CLOCK_FILE";

/// The shim's path; built first (once per test process) from its source, so that it is
/// never missing nor older than it.
pub fn shim() -> &'static Path {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/clock_shim.rs");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("libredismutex_clock_shim.so");
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let status = Command::new(rustc)
            .args([
                "--edition",
                "2021",
                "--crate-type",
                "cdylib",
                "-O",
                "-C",
                "panic=abort",
            ])
            .arg(&source)
            .arg("-o")
            .arg(&out)
            .status()
            .expect("run rustc to build the clock shim");
        assert!(status.success(), "building {} failed", source.display());
        out
    })
}

/// The wall clock of one `redis-server`, moved through its control file.
#[derive(Debug)]
pub struct ServerClock {
    file: PathBuf,
    _dir: tempfile::TempDir,
}

/// A `redis-server` whose wall clock the test moves, and its clock.
pub fn server_on_a_clock(extra: &[&str]) -> (RedisServer, ServerClock) {
    let clock = ServerClock::new();
    let server =
        RedisServer::try_start_with_env(extra, &clock.env()).unwrap_or_else(|err| panic!("{err}"));
    (server, clock)
}

impl ServerClock {
    /// A clock that reads the real time until it is moved.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temp dir for the clock");
        let clock = Self {
            file: dir.path().join("clock-control"),
            _dir: dir,
        };
        clock.write(0, 0, 0);
        clock
    }

    /// What the server's environment needs to run on this clock.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("LD_PRELOAD".into(), shim().into()),
            (CONTROL_VAR.into(), self.file.clone().into()),
        ]
    }

    /// Moves the clock by `by_ms` milliseconds (back when negative), at once.
    pub fn jump(&self, by_ms: i64) {
        let (offset, rate, since) = self.read();
        self.write(offset + by_ms * 1_000_000, rate, since);
    }

    /// From now on the clock gains `ppm` millionths of each real second (runs fast when
    /// positive, slow when negative); what it gained so far is kept.
    pub fn rate(&self, ppm: i64) {
        let now = real_ns();
        let (offset, rate, since) = self.read();
        let gained = if rate != 0 && now > since {
            ((i128::from(now - since) * i128::from(rate)) / 1_000_000) as i64
        } else {
            0
        };
        self.write(offset + gained, ppm, now);
    }

    /// How far the clock is ahead of the real one now, in milliseconds (behind when
    /// negative).
    pub fn ahead_ms(&self) -> i64 {
        let (offset, rate, since) = self.read();
        let now = real_ns();
        let gained = if rate != 0 && now > since {
            ((i128::from(now - since) * i128::from(rate)) / 1_000_000) as i64
        } else {
            0
        };
        (offset + gained) / 1_000_000
    }

    fn read(&self) -> (i64, i64, i64) {
        let bytes = fs::read(&self.file).expect("the clock's control file");
        let value = |at: usize| i64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        (value(0), value(8), value(16))
    }

    /// Writes the three values in place: the server maps the file, so its size and
    /// inode must stay.
    fn write(&self, offset: i64, rate: i64, since: i64) {
        let mut bytes = Vec::with_capacity(24);
        for value in [offset, rate, since] {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        if self.file.exists() {
            use std::io::Write;
            let mut file = fs::OpenOptions::new().write(true).open(&self.file).unwrap();
            file.write_all(&bytes).unwrap();
        } else {
            fs::write(&self.file, bytes).unwrap();
        }
    }
}

/// This machine's wall clock in nanoseconds since the epoch: the real clock the server's
/// shim shifts.
fn real_ns() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_nanos()).unwrap()
}
