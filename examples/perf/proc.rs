//! What `/proc` tells of a process (this one, or a `redis-server` it started): its
//! resident memory and the CPU time it has used.

use std::sync::LazyLock;
use std::time::Duration;

use crate::Result;

/// The process to read about.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Process {
    /// This process.
    Me,
    /// Another process, by id.
    Pid(u32),
}

impl Process {
    /// `/proc/self/<file>` or `/proc/<pid>/<file>`.
    fn read(self, file: &str) -> Result<String> {
        let path = match self {
            Self::Me => format!("/proc/self/{file}"),
            Self::Pid(pid) => format!("/proc/{pid}/{file}"),
        };
        std::fs::read_to_string(&path).map_err(|err| format!("{path}: {err}").into())
    }

    /// Resident memory in bytes, from `statm`.
    pub(crate) fn rss_bytes(self) -> Result<u64> {
        static PAGE: LazyLock<u64> = LazyLock::new(|| getconf("PAGESIZE", 4096));
        let statm = self.read("statm")?;
        let resident: u64 = statm
            .split_whitespace()
            .nth(1)
            .ok_or("no resident field in statm")?
            .parse()?;
        Ok(resident * *PAGE)
    }

    /// CPU time used (user + system), from `stat`.
    pub(crate) fn cpu_time(self) -> Result<Duration> {
        static TICK: LazyLock<u64> = LazyLock::new(|| getconf("CLK_TCK", 100));
        let stat = self.read("stat")?;
        // The fields after the command name: state is field 3, utime 14, stime 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .ok_or("no command name in stat")?
            .1
            .split_whitespace()
            .collect();
        let ticks = |field: usize| -> Result<u64> {
            Ok(fields.get(field - 3).ok_or("short stat")?.parse()?)
        };
        let ticks = ticks(14)? + ticks(15)?;
        Ok(Duration::from_secs_f64(ticks as f64 / *TICK as f64))
    }
}

/// A value of `getconf`, or `default`.
fn getconf(name: &str, default: u64) -> u64 {
    std::process::Command::new("getconf")
        .arg(name)
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .unwrap_or(default)
}
