//! Where the harness finds its server: `REDIS_SERVER` (a path to a `redis-server`, or a
//! Valkey server installed under that name), with `redis-cli` from the same directory;
//! without it, both from `PATH`. Every test, example and bench starts its servers through
//! [`redis_server`] and [`redis_cli`], so the same suite runs on any version (`.ci/matrix`
//! runs its core against each server in `../shared/servers/`).
//!
//! [`server_version`] says which server that is, so a test of something an older version
//! lacks can skip with a printed reason ([`skip_unless`]) rather than pass silently.
//!
//! Included by `server.rs` (`#[path]`), so whatever includes that file has it too.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The variable naming the server binary the tests start.
pub const REDIS_SERVER: &str = "REDIS_SERVER";

/// The variable naming a file to which each skip is appended, one line each.
pub const SKIP_LOG: &str = "REDIS_SKIP_LOG";

/// The `redis-server` to run: `$REDIS_SERVER` when set (and not empty), else
/// `redis-server` from `PATH`.
pub fn redis_server() -> OsString {
    match std::env::var_os(REDIS_SERVER) {
        Some(path) if !path.is_empty() => path,
        _ => "redis-server".into(),
    }
}

/// The `redis-cli` to run: the one beside `$REDIS_SERVER` when that is set, else
/// `redis-cli` from `PATH`.
pub fn redis_cli() -> OsString {
    match std::env::var_os(REDIS_SERVER) {
        Some(path) if !path.is_empty() => PathBuf::from(path)
            .parent()
            .map_or_else(|| PathBuf::from("redis-cli"), |dir| dir.join("redis-cli"))
            .into_os_string(),
        _ => "redis-cli".into(),
    }
}

/// What `redis-server --version` says: `Redis server v=7.2.6 sha=...` or
/// `Valkey server v=8.0.1 sha=...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
    /// A Valkey server (its version numbers are Valkey's own: Valkey 8.0 speaks what
    /// Redis 7.2 does, and more).
    pub valkey: bool,
}

impl ServerVersion {
    /// Parses the line `redis-server --version` prints.
    pub fn parse(line: &str) -> Option<Self> {
        let valkey = line.trim_start().starts_with("Valkey");
        let number = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("v="))?;
        let mut parts = number.split('.').map(str::parse::<u32>);
        let major = parts.next()?.ok()?;
        let minor = parts.next()?.ok()?;
        let patch = parts.next().unwrap_or(Ok(0)).ok()?;
        Some(Self {
            major,
            minor,
            patch,
            valkey,
        })
    }

    /// `(major, minor, patch)`, to compare: `version.triple() >= (7, 0, 0)`.
    pub fn triple(&self) -> (u32, u32, u32) {
        (self.major, self.minor, self.patch)
    }

    /// Whether the server speaks at least what Redis `major.minor` does. Valkey forked
    /// from Redis 7.2.4: it has everything of 7.2, and nothing Redis added after.
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        if self.valkey {
            (major, minor) <= (7, 2)
        } else {
            (self.major, self.minor) >= (major, minor)
        }
    }
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = if self.valkey { "Valkey" } else { "Redis" };
        write!(f, "{name} {}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The version of [`redis_server`], asked once per process; panics (with the binary's
/// name) when it cannot be run or its answer not parsed.
pub fn server_version() -> ServerVersion {
    static VERSION: OnceLock<ServerVersion> = OnceLock::new();
    *VERSION.get_or_init(|| {
        let binary = redis_server();
        let out = Command::new(&binary)
            .arg("--version")
            .output()
            .unwrap_or_else(|err| panic!("cannot run {binary:?} --version: {err}"));
        let line = String::from_utf8_lossy(&out.stdout);
        ServerVersion::parse(&line)
            .unwrap_or_else(|| panic!("{binary:?} --version: no version in {line:?}"))
    })
}

/// Whether the server has `feature`, which came in Redis `major.minor`. When it has not,
/// prints that the calling test is skipped and why (to stdout, so that it shows in the
/// test's output, and in `$REDIS_SKIP_LOG`) rather than let it pass silently:
/// `if !skip_unless(7, 0, "sharded Pub/Sub") { return; }` first thing in the test.
pub fn skip_unless(major: u32, minor: u32, feature: &str) -> bool {
    has(major, minor, feature, None)
}

/// [`skip_unless`] for the rest of a test whose first part ran: `rest` says what is
/// skipped.
pub fn skip_rest_unless(major: u32, minor: u32, feature: &str, rest: &str) -> bool {
    has(major, minor, feature, Some(rest))
}

fn has(major: u32, minor: u32, feature: &str, rest: Option<&str>) -> bool {
    let version = server_version();
    if version.at_least(major, minor) {
        return true;
    }
    // The test harness names each test's thread after the test.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("this test");
    let what = match rest {
        Some(rest) => format!("{rest} of {test}"),
        None => test.to_owned(),
    };
    let line = format!(
        "SKIPPED {what}: {feature} needs Redis {major}.{minor} or newer; \
         {REDIS_SERVER}={:?} is {version}",
        redis_server()
    );
    println!("{line}");
    note_skip(&line);
    false
}

/// Appends `line` to the file `$REDIS_SKIP_LOG` names, when set, so that a run whose
/// output is captured (nextest shows a passing test's output only on request) can still
/// list what it skipped: `.ci/matrix` prints that file per version.
pub fn note_skip(line: &str) {
    use std::io::Write;
    let Some(path) = std::env::var_os(SKIP_LOG) else {
        return;
    };
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut file| file.write_all(format!("{line}\n").as_bytes()));
    if let Err(err) = appended {
        eprintln!("cannot append to {SKIP_LOG}={path:?}: {err}");
    }
}
