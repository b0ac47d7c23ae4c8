//! The line that opens the table: the machine, the Redis version, the date and the load.

/// nproc, CPU model, `redis-server --version` (the one the runs start: `$REDIS_SERVER`,
/// else from `PATH`), the date and the load average, on one line.
pub(crate) fn header() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let output = |program: &std::ffi::OsStr, args: &[&str]| {
        std::process::Command::new(program)
            .args(args)
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
            .unwrap_or_else(|| format!("({program:?} not found)"))
    };
    let redis = output(&crate::server::binaries::redis_server(), &["--version"]);
    let date = output("date".as_ref(), &["-u", "+%Y-%m-%d %H:%M:%S UTC"]);
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|load| {
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    format!(
        "redismutex perf: nproc {nproc}; CPU {cpu}; {redis}; {date}; load average at start {load}"
    )
}
