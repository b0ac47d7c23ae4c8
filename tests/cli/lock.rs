//! The `redismutex` command, run as a real process against a throwaway `redis-server`:
//! exclusion between runs, `--no-wait` / `--timeout` / `-E`, exit codes passed through,
//! a lost lock (SIGTERM, then SIGKILL after `--grace`), signals forwarded to the child
//! and during the wait, hold mode, an unreachable server, and `status` (text and JSON),
//! including a lock held by a Go-protocol peer.
#![cfg(feature = "cli")]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common;
use crate::common::cli_run::{self, finish, Run, BIN};
use crate::common::go_peer::GoPeer;
use crate::common::trap_child::{trapping, PID, READY};
use crate::common::{eventually, raw, RedisServer};
use crate::run::{status_json, status_text};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use redis::aio::MultiplexedConnection;
use serde_json::{json, Value};
use tokio::process::{Child, Command};

/// A child that takes 0.4 s and marks its start and end in the file `$1`.
const MARK: &str = r#"echo start $$ >> "$1"; sleep 0.4; echo end $$ >> "$1""#;

/// A throwaway server, its URL, and a connection for raw checks.
async fn setup() -> (RedisServer, String, MultiplexedConnection) {
    let server = RedisServer::start();
    let (url, conn) = (server.url(), server.conn().await);
    (server, url, conn)
}

/// `redismutex --url URL ARGS...`, started, with stdout and stderr piped; killed if
/// dropped.
fn spawn(url: &str, args: &[&str]) -> Child {
    cli_run::spawn(&[url], args)
}

/// Runs `redismutex --url URL ARGS...` to its end, at most [`LIVENESS`].
async fn run(url: &str, args: &[&str]) -> Run {
    finish(spawn(url, args)).await
}

/// Sends `signal` to a spawned command.
fn signal(child: &Child, signal: Signal) {
    let pid = i32::try_from(child.id().expect("still running")).unwrap();
    kill(Pid::from_raw(pid), signal).expect("signal redismutex");
}

/// The lines of `file` (none if it does not exist yet).
fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits (at most [`LIVENESS`]) until `file` has a line equal to `line`.
async fn wait_line(file: &Path, line: &str) {
    assert!(
        eventually(|| async { lines(file).iter().any(|l| l == line) }).await,
        "{file:?} never got the line {line:?}: {:?}",
        lines(file)
    );
}

/// A temporary directory and a file path in it.
fn temp_file(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    (dir, file)
}

fn path(file: &Path) -> &str {
    file.to_str().expect("utf-8 temp path")
}

/// How many clients the server has: a started command shows up here once it has
/// connected, which it does only after it catches SIGINT and SIGTERM.
async fn clients(conn: &MultiplexedConnection) -> usize {
    let list: String = raw::cmd(conn, "CLIENT", &["LIST"]).await;
    list.lines().count()
}

/// Every key on the server, sorted.
async fn keys(conn: &MultiplexedConnection) -> Vec<String> {
    let mut keys: Vec<String> = raw::cmd(conn, "KEYS", &["*"]).await;
    keys.sort();
    keys
}

/// The PTTL in `line`, which must be `<prefix><n> ms)`; checked to be in `1..=max`.
fn pttl_in(line: &str, prefix: &str, max: i64) -> i64 {
    let pttl: i64 = line
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(" ms)"))
        .unwrap_or_else(|| panic!("{line:?} is not {prefix:?}<n> ms)"))
        .parse()
        .unwrap_or_else(|err| panic!("{line:?}: {err}"));
    assert!((1..=max).contains(&pttl), "{line:?}: PTTL out of 1..={max}");
    pttl
}

/// A JSON PTTL, checked to be in `1..=max`.
fn json_pttl(value: &Value, max: i64) {
    let pttl = value
        .as_i64()
        .unwrap_or_else(|| panic!("{value} is no PTTL"));
    assert!((1..=max).contains(&pttl), "PTTL {pttl} out of 1..={max}");
}

// 1. Exclusion between runs, sharing between readers.

#[tokio::test]
async fn two_exclusive_runs_never_overlap() {
    let server = RedisServer::start();
    let (_dir, marks) = temp_file("marks");
    let args = ["lock", "jobs", "--", "sh", "-c", MARK, "sh", path(&marks)];
    let started = Instant::now();
    let url = server.url();
    let (a, b) = tokio::join!(run(&url, &args), run(&url, &args));
    let elapsed = started.elapsed();
    assert_eq!(a.code, Some(0), "{a:?}");
    assert_eq!(b.code, Some(0), "{b:?}");

    let marks = lines(&marks);
    assert_eq!(marks.len(), 4, "{marks:?}");
    let words: Vec<(&str, &str)> = marks
        .iter()
        .map(|line| line.split_once(' ').expect("<mark> <pid>"))
        .collect();
    let kinds: Vec<&str> = words.iter().map(|(kind, _)| *kind).collect();
    assert_eq!(kinds, ["start", "end", "start", "end"], "{marks:?}");
    assert_eq!(
        words[0].1, words[1].1,
        "one child's start and end: {marks:?}"
    );
    assert_eq!(
        words[2].1, words[3].1,
        "one child's start and end: {marks:?}"
    );
    assert_ne!(words[0].1, words[2].1, "two children: {marks:?}");
    assert!(
        elapsed >= Duration::from_millis(800),
        "the runs took turns: {elapsed:?}"
    );
}

#[tokio::test]
async fn two_read_runs_overlap() {
    let server = RedisServer::start();
    let (_dir, marks) = temp_file("marks");
    // Each reader waits (at most 5 s) for the other's start before it ends: both
    // starts precede both ends only if the two held the lock at the same time.
    let child = r#"echo start $$ >> "$1"; i=0
        while [ "$(grep -c start "$1")" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
        echo end $$ >> "$1""#;
    let args = [
        "lock",
        "jobs",
        "--read",
        "--",
        "sh",
        "-c",
        child,
        "sh",
        path(&marks),
    ];
    let url = server.url();
    let (a, b) = tokio::join!(run(&url, &args), run(&url, &args));
    assert_eq!(a.code, Some(0), "{a:?}");
    assert_eq!(b.code, Some(0), "{b:?}");
    let kinds: Vec<String> = lines(&marks)
        .iter()
        .map(|line| line.split(' ').next().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        ["start", "start", "end", "end"],
        "{:?}",
        lines(&marks)
    );
}

// 2. --no-wait, -E, --timeout.

#[tokio::test]
async fn no_wait_conflict_code_and_timeout_on_a_held_lock() {
    let (_server, url, conn) = setup().await;
    let (dir, file) = temp_file("holder");
    let go = dir.path().join("go");
    // The holder notes its id, then holds until the file `go` appears (at most 10 s).
    let holder_child = r#"echo "$REDISMUTEX_ID" >> "$1"; i=0
        while [ ! -e "$2" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
        echo done >> "$1""#;
    let holder = spawn(
        &url,
        &[
            "lock",
            "jobs",
            "--",
            "sh",
            "-c",
            holder_child,
            "sh",
            path(&file),
            path(&go),
        ],
    );
    assert!(eventually(|| async { !lines(&file).is_empty() }).await);
    let holder_id = lines(&file)[0].clone();
    assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(&*holder_id));

    let started = Instant::now();
    let busy = run(&url, &["lock", "jobs", "--no-wait", "--", "true"]).await;
    assert_eq!(busy.code, Some(75), "{busy:?}");
    assert!(started.elapsed() < Duration::from_secs(2), "one attempt");
    let busy = run(&url, &["lock", "jobs", "-n", "-E", "9", "--", "true"]).await;
    assert_eq!(busy.code, Some(9), "{busy:?}");
    let busy = run(&url, &["lock", "jobs", "-s", "-n", "--", "true"]).await;
    assert_eq!(busy.code, Some(75), "a reader is kept out too: {busy:?}");

    let started = Instant::now();
    let timed_out = run(&url, &["lock", "jobs", "--timeout", "300ms", "--", "true"]).await;
    let elapsed = started.elapsed();
    assert_eq!(timed_out.code, Some(124), "{timed_out:?}");
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_millis(2500),
        "gave up after the timeout, not after the holder: {elapsed:?}"
    );

    // The holder never noticed.
    assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(&*holder_id));
    assert_eq!(lines(&file), [&*holder_id], "the holder still runs");
    std::fs::write(&go, "").unwrap();
    let holder = finish(holder).await;
    assert_eq!(holder.code, Some(0), "{holder:?}");
    assert_eq!(lines(&file), [holder_id, "done".to_owned()]);
    assert!(!raw::exists(&conn, "jobs").await, "released");
}

// 3. Exit codes of the child.

#[tokio::test]
async fn the_childs_exit_code_passes_through() {
    let (_server, url, conn) = setup().await;
    for code in [3, 0, 42] {
        let out = run(
            &url,
            &["lock", "jobs", "--", "sh", "-c", &format!("exit {code}")],
        )
        .await;
        assert_eq!(out.code, Some(code), "{out:?}");
        assert!(
            !raw::exists(&conn, "jobs").await,
            "released after exit {code}"
        );
    }
    let killed = run(&url, &["lock", "jobs", "--", "sh", "-c", "kill -KILL $$"]).await;
    assert_eq!(killed.code, Some(128 + 9), "{killed:?}");
    let killed = run(&url, &["lock", "jobs", "--", "sh", "-c", "kill -USR1 $$"]).await;
    assert_eq!(killed.code, Some(128 + 10), "{killed:?}");
    assert!(!raw::exists(&conn, "jobs").await, "released after a signal");
}

#[tokio::test]
async fn a_command_that_cannot_run_gives_127_or_126_and_releases() {
    let (_server, url, conn) = setup().await;
    let missing = run(&url, &["lock", "jobs", "--", "no-such-command-redismutex"]).await;
    assert_eq!(missing.code, Some(127), "{missing:?}");
    assert!(
        missing.stderr.contains("no-such-command-redismutex"),
        "{missing:?}"
    );
    assert!(!raw::exists(&conn, "jobs").await, "released");

    let (_dir, file) = temp_file("not-executable");
    std::fs::write(&file, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let not_runnable = run(&url, &["lock", "jobs", "--", path(&file)]).await;
    assert_eq!(not_runnable.code, Some(126), "{not_runnable:?}");
    assert!(!raw::exists(&conn, "jobs").await, "released");
}

// 4. A lost lock.

/// ttl 1 s: refreshed every 500 ms, so a deleted key is noticed within 500 ms plus this.
const DETECTION_MARGIN: Duration = Duration::from_millis(1000);

#[tokio::test]
async fn a_deleted_lock_sends_sigterm_to_the_child_and_exits_70() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (_dir, file) = temp_file("marks");
    let child = trapping("TERM", r#"echo term >> "$1"; exit 0"#, READY);
    let cmd = spawn(
        &server.url(),
        &[
            "lock",
            "jobs",
            "--ttl",
            "1s",
            "--",
            "sh",
            "-c",
            &child,
            "sh",
            path(&file),
        ],
    );
    wait_line(&file, "ready").await;
    let deleted = Instant::now();
    let _: i64 = raw::cmd(&conn, "DEL", &["jobs"]).await;
    wait_line(&file, "term").await;
    let noticed = deleted.elapsed();
    assert!(
        noticed < Duration::from_millis(500) + DETECTION_MARGIN,
        "SIGTERM {noticed:?} after the DEL"
    );
    let out = finish(cmd).await;
    assert_eq!(out.code, Some(70), "{out:?}");
    assert!(out.stderr.contains("lost"), "{out:?}");
    assert!(!raw::exists(&conn, "jobs").await, "nothing taken again");
}

#[tokio::test]
async fn a_child_that_ignores_sigterm_is_killed_after_the_grace() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (_dir, file) = temp_file("pid");
    let child = trapping("TERM", "", PID);
    let cmd = spawn(
        &server.url(),
        &[
            "lock",
            "jobs",
            "--ttl",
            "1s",
            "--grace",
            "500ms",
            "--",
            "sh",
            "-c",
            &child,
            "sh",
            path(&file),
        ],
    );
    assert!(eventually(|| async { !lines(&file).is_empty() }).await);
    let pid: i32 = lines(&file)[0].parse().unwrap();
    let deleted = Instant::now();
    let _: i64 = raw::cmd(&conn, "DEL", &["jobs"]).await;
    let out = finish(cmd).await;
    let elapsed = deleted.elapsed();
    assert_eq!(out.code, Some(70), "{out:?}");
    assert!(out.stderr.contains("SIGKILL"), "{out:?}");
    assert!(
        elapsed >= Duration::from_millis(500)
            && elapsed < Duration::from_millis(500 + 500) + DETECTION_MARGIN,
        "SIGKILL after the 500 ms grace: {elapsed:?} after the DEL"
    );
    assert_eq!(
        kill(Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH),
        "the child {pid} is gone"
    );
}

// 5. Signals to the command.

#[tokio::test]
async fn sigint_is_forwarded_to_the_child_and_the_lock_released() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (_dir, file) = temp_file("marks");
    let child = trapping("INT", r#"echo int >> "$1"; exit 5"#, READY);
    let cmd = spawn(
        &server.url(),
        &["lock", "jobs", "--", "sh", "-c", &child, "sh", path(&file)],
    );
    wait_line(&file, "ready").await;
    assert!(raw::exists(&conn, "jobs").await);
    signal(&cmd, Signal::SIGINT);
    let out = finish(cmd).await;
    assert_eq!(out.code, Some(5), "the child's code: {out:?}");
    assert_eq!(lines(&file), ["ready", "int"], "the child got SIGINT");
    assert_eq!(keys(&conn).await, ["jobs:fence"], "the lock key is gone");
}

#[tokio::test]
async fn sigterm_is_forwarded_to_the_child_and_the_lock_released() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (_dir, file) = temp_file("pid");
    // `exec`: the pid written is sleep's, which SIGTERM kills.
    let child = r#"echo $$ > "$1"; exec sleep 30"#;
    let cmd = spawn(
        &server.url(),
        &["lock", "jobs", "--", "sh", "-c", child, "sh", path(&file)],
    );
    assert!(eventually(|| async { !lines(&file).is_empty() }).await);
    let pid: i32 = lines(&file)[0].parse().unwrap();
    // The pid is written before `exec`: wait until it is sleep's.
    let comm = format!("/proc/{pid}/comm");
    assert!(
        eventually(|| async {
            std::fs::read_to_string(&comm).is_ok_and(|name| name.trim() == "sleep")
        })
        .await
    );
    signal(&cmd, Signal::SIGTERM);
    let out = finish(cmd).await;
    assert_eq!(out.code, Some(128 + 15), "killed by SIGTERM: {out:?}");
    assert_eq!(
        kill(Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    );
    assert_eq!(keys(&conn).await, ["jobs:fence"], "the lock key is gone");
}

#[tokio::test]
async fn a_signal_during_the_wait_gives_128_plus_n_and_leaves_nothing() {
    let (_server, url, conn) = setup().await;
    let mx = common::mutex(&conn, "jobs", Duration::from_secs(30));
    let holder = mx.write().await.unwrap();

    // A writer (`--write` is no option: an explicit default stands in) and a reader.
    for (sig, mode) in [
        (Signal::SIGINT, "--ttl=4s"),
        (Signal::SIGTERM, "--ttl=4s"),
        (Signal::SIGINT, "--read"),
    ] {
        let before = clients(&conn).await;
        let waiter = spawn(&url, &["lock", "jobs", mode, "--", "true"]);
        // Connected means it catches signals and is about to wait (or waits).
        assert!(eventually(|| async { clients(&conn).await > before }).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
        signal(&waiter, sig);
        let out = finish(waiter).await;
        assert_eq!(out.code, Some(128 + sig as i32), "{sig} {mode}: {out:?}");
        assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(holder.id()));
        assert_eq!(keys(&conn).await, ["jobs", "jobs:fence"], "{sig} {mode}");
        // Its connections are gone too before the next round counts them.
        assert!(eventually(|| async { clients(&conn).await <= before }).await);
    }
    assert!(holder.unlock().await.unwrap(), "the holder is unaffected");
}

#[tokio::test]
async fn sigint_during_a_wait_with_intent_clears_the_intent() {
    let (_server, url, conn) = setup().await;
    let mx = common::mutex(&conn, "jobs", Duration::from_secs(30));
    let reader = mx.read().await.unwrap();

    let waiter = spawn(&url, &["lock", "jobs", "--intent", "--", "true"]);
    assert!(
        eventually(|| raw::exists(&conn, "jobs:lock-intent")).await,
        "the waiter sets its intent"
    );
    signal(&waiter, Signal::SIGINT);
    let out = finish(waiter).await;
    assert_eq!(out.code, Some(130), "{out:?}");

    assert!(!raw::exists(&conn, "jobs:lock-intent").await, "intent gone");
    assert_eq!(raw::members(&conn, "jobs").await, [reader.id().to_owned()]);
    assert_eq!(keys(&conn).await, ["jobs", "jobs:fence"]);

    // Same when --timeout ends the wait.
    let out = run(
        &url,
        &["lock", "jobs", "--intent", "-w", "300ms", "--", "true"],
    )
    .await;
    assert_eq!(out.code, Some(124), "{out:?}");
    assert_eq!(keys(&conn).await, ["jobs", "jobs:fence"], "intent gone");
    assert!(reader.unlock().await.unwrap(), "the reader is unaffected");
}

// 6. Hold mode.

/// Starts `lock NAME` without a command and reads its first line, `<key> <id>`.
async fn hold(url: &str, extra: &[&str]) -> (Child, String, String) {
    cli_run::hold(&[url], extra).await
}

#[tokio::test]
async fn hold_mode_prints_key_and_id_and_releases_on_sigterm() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (cmd, key, id) = hold(&server.url(), &[]).await;
    assert_eq!(key, "jobs");
    assert_eq!(id.len(), 32, "{id:?}");
    assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(&*id));
    signal(&cmd, Signal::SIGTERM);
    let out = finish(cmd).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!raw::exists(&conn, "jobs").await, "released");

    // SIGINT too.
    let (cmd, _, id) = hold(&server.url(), &[]).await;
    assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(&*id));
    signal(&cmd, Signal::SIGINT);
    let out = finish(cmd).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(keys(&conn).await, ["jobs:fence"], "released");
}

#[tokio::test]
async fn hold_mode_exits_70_when_the_lock_is_deleted() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (cmd, key, id) = hold(&server.url(), &["--ttl", "1s", "--key", "k"]).await;
    assert_eq!(key, "jobs:k");
    assert_eq!(raw::get(&conn, "jobs:k").await.as_deref(), Some(&*id));
    let deleted = Instant::now();
    let _: i64 = raw::cmd(&conn, "DEL", &["jobs:k"]).await;
    let out = finish(cmd).await;
    assert_eq!(out.code, Some(70), "{out:?}");
    assert!(
        deleted.elapsed() < Duration::from_millis(500) + DETECTION_MARGIN,
        "noticed {:?} after the DEL",
        deleted.elapsed()
    );
}

#[tokio::test]
async fn hold_mode_for_a_reader_exits_70_when_the_lock_is_deleted() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (cmd, key, id) = hold(&server.url(), &["--read", "--ttl", "1s"]).await;
    assert_eq!(key, "jobs");
    assert_eq!(raw::members(&conn, "jobs").await, [id]);
    let _: i64 = raw::cmd(&conn, "DEL", &["jobs"]).await;
    let out = finish(cmd).await;
    assert_eq!(out.code, Some(70), "{out:?}");
}

// 7. Redis unreachable.

#[tokio::test]
async fn an_unreachable_server_gives_69_and_one_line_naming_it() {
    for args in [
        &["lock", "jobs", "--key", "k", "--", "true"][..],
        &["lock", "jobs", "--key", "k"][..],
        &["status", "jobs", "--key", "k"][..],
    ] {
        let out = run("redis://127.0.0.1:1/", args).await;
        assert_eq!(out.code, Some(69), "{args:?}: {out:?}");
        assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {out:?}");
        assert!(
            out.stderr.starts_with("redismutex: redis://127.0.0.1:1 ")
                && out.stderr.contains(r#""jobs:k""#),
            "{args:?}: {out:?}"
        );
        assert_eq!(out.stdout, "", "{args:?}");
    }
}

// 8. status.

#[tokio::test]
async fn status_of_a_free_lock() {
    let server = RedisServer::start();
    let url = server.url();
    assert_eq!(
        status_text(&[&url], "jobs", &[]).await,
        [
            "jobs: free",
            "queue: none",
            "intent: none",
            "last fencing token: none"
        ]
    );
    let mut status = status_json(&[&url], "jobs", &[]).await;
    let time = status
        .as_object_mut()
        .unwrap()
        .remove("server_time_ms")
        .unwrap();
    assert!(time.as_i64().is_some_and(|ms| ms > 0), "{time}");
    assert_eq!(
        status,
        json!({
            "key": "jobs", "state": "free", "type": "none", "writer": null, "readers": [],
            "reader_count": 0, "pttl_ms": null, "intent": null, "fence": null,
            "last_fencing_token": null, "holder_info": [], "semaphore": null, "queue": null,
            "note": null,
        })
    );
}

#[tokio::test]
async fn status_of_a_write_lock() {
    let (_server, url, conn) = setup().await;
    let mx = common::mutex(&conn, "jobs", Duration::from_secs(30));
    let guard = mx.write().await.unwrap();
    let id = guard.id().to_owned();
    let token = guard.fencing_token().to_string();

    let text = status_text(&[&url], "jobs", &[]).await;
    assert_eq!(text.len(), 4, "{text:?}");
    pttl_in(
        &text[0],
        &format!("jobs: write-locked by {id} (PTTL "),
        30_000,
    );
    assert_eq!(text[1], "queue: none");
    assert_eq!(text[2], "intent: none");
    pttl_in(
        &text[3],
        &format!("last fencing token: {token} (PTTL "),
        i64::MAX,
    );

    let status = status_json(&[&url], "jobs", &[]).await;
    assert_eq!(status["key"], "jobs");
    assert_eq!(status["state"], "write");
    assert_eq!(status["type"], "string");
    assert_eq!(status["writer"], json!(id));
    assert_eq!(status["readers"], json!([]));
    assert_eq!(status["reader_count"], 0);
    json_pttl(&status["pttl_ms"], 30_000);
    assert_eq!(status["intent"], Value::Null);
    assert_eq!(status["fence"]["key"], "jobs:fence");
    assert_eq!(status["fence"]["type"], "string");
    assert_eq!(status["fence"]["value"], json!(token));
    assert_eq!(status["last_fencing_token"], guard.fencing_token());
    json_pttl(&status["fence"]["pttl_ms"], i64::MAX);
    assert!(guard.unlock().await.unwrap(), "status changed nothing");
}

#[tokio::test]
async fn status_of_a_read_lock_with_two_readers() {
    let (_server, url, conn) = setup().await;
    let mx = common::mutex(&conn, "jobs", Duration::from_secs(30));
    let a = mx.read().await.unwrap();
    let b = mx.read().await.unwrap();
    let mut ids = [a.id().to_owned(), b.id().to_owned()];
    ids.sort();

    let text = status_text(&[&url], "jobs", &[]).await;
    assert_eq!(text.len(), 6, "{text:?}");
    pttl_in(&text[0], "jobs: read-locked by 2 reader(s) (PTTL ", 30_000);
    assert_eq!(text[1], format!("  reader {}", ids[0]));
    assert_eq!(text[2], format!("  reader {}", ids[1]));
    assert_eq!(text[3], "queue: none");
    assert_eq!(text[4], "intent: none");
    assert!(
        text[5].starts_with(&format!("last fencing token: {} ", b.fencing_token())),
        "{text:?}"
    );

    let status = status_json(&[&url], "jobs", &[]).await;
    assert_eq!(status["state"], "read");
    assert_eq!(status["type"], "set");
    assert_eq!(status["writer"], Value::Null);
    assert_eq!(status["readers"], json!(ids));
    assert_eq!(status["reader_count"], 2);
    json_pttl(&status["pttl_ms"], 30_000);
    assert_eq!(status["intent"], Value::Null);
    assert!(a.unlock().await.unwrap() && b.unlock().await.unwrap());
}

#[tokio::test]
async fn status_shows_a_waiting_writers_intent() {
    let (_server, url, conn) = setup().await;
    let mx = common::mutex(&conn, "jobs", Duration::from_secs(30));
    let a = mx.read().await.unwrap();
    let b = mx.read().await.unwrap();
    let (_dir, file) = temp_file("id");
    let waiter = spawn(
        &url,
        &[
            "lock",
            "jobs",
            "--intent",
            "--",
            "sh",
            "-c",
            r#"echo "$REDISMUTEX_ID" > "$1""#,
            "sh",
            path(&file),
        ],
    );
    assert!(eventually(|| raw::exists(&conn, "jobs:lock-intent")).await);
    let intent = raw::get(&conn, "jobs:lock-intent").await.unwrap();

    let text = status_text(&[&url], "jobs", &[]).await;
    assert_eq!(text.len(), 6, "{text:?}");
    assert!(
        text[0].starts_with("jobs: read-locked by 2 reader(s)"),
        "{text:?}"
    );
    // The waiter's ttl is the default 4 s.
    pttl_in(&text[4], &format!("intent: {intent} (string, PTTL "), 4_000);

    let status = status_json(&[&url], "jobs", &[]).await;
    assert_eq!(status["state"], "read");
    assert_eq!(status["reader_count"], 2);
    assert_eq!(status["intent"]["key"], "jobs:lock-intent");
    assert_eq!(status["intent"]["type"], "string");
    assert_eq!(status["intent"]["value"], json!(intent));
    json_pttl(&status["intent"]["pttl_ms"], 4_000);

    let reader = run(&url, &["lock", "jobs", "--read", "--no-wait", "--", "true"]).await;
    assert_eq!(reader.code, Some(75), "new readers stay out: {reader:?}");

    assert!(a.unlock().await.unwrap() && b.unlock().await.unwrap());
    let out = finish(waiter).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(lines(&file), [intent], "the intent held the waiter's id");
    assert!(!raw::exists(&conn, "jobs:lock-intent").await);
    assert_eq!(status_json(&[&url], "jobs", &[]).await["state"], "free");
}

#[tokio::test]
async fn status_of_a_foreign_key_reports_it_and_leaves_it_untouched() {
    let (server, url, conn) = setup().await;
    let _: i64 = raw::cmd(&conn, "HSET", &["jobs", "a", "1"]).await;

    // The crate refuses the key, so the snapshot reads nothing past it: no PTTL, queue,
    // intent or fence.
    assert_eq!(
        status_text(&[&url], "jobs", &[]).await,
        ["jobs: holds a hash, not a lock (left untouched)"]
    );
    let status = status_json(&[&url], "jobs", &[]).await;
    assert_eq!(status["state"], "foreign");
    assert_eq!(status["type"], "hash");
    assert_eq!(status["writer"], Value::Null);
    assert_eq!(status["reader_count"], 0);
    assert_eq!(status["pttl_ms"], Value::Null);
    assert_eq!(status["note"], Value::Null, "its type says it");

    let lock = run(&url, &["lock", "jobs", "--no-wait", "--", "true"]).await;
    assert_eq!(lock.code, Some(69), "not a lock: {lock:?}");
    assert_eq!(lock.stderr.lines().count(), 1, "{lock:?}");
    let server_part = format!(
        "redismutex: redis://127.0.0.1:{} lock key \"jobs\": ",
        server.port()
    );
    assert!(
        lock.stderr.starts_with(&server_part) && lock.stderr.contains("hash"),
        "{lock:?}"
    );

    let hash: Vec<String> = raw::cmd(&conn, "HGETALL", &["jobs"]).await;
    assert_eq!(hash, ["a", "1"], "unchanged");
    assert_eq!(raw::pttl(&conn, "jobs").await, -1, "still no TTL");
    assert_eq!(keys(&conn).await, ["jobs"]);
}

// 9. A Go-protocol holder.

#[tokio::test]
async fn a_go_holder_is_seen_by_status_and_keeps_lock_out() {
    let (_server, url, conn) = setup().await;
    let go = GoPeer::new(conn.clone(), 30_000);
    let go_id = GoPeer::new_id();
    assert_eq!(go.write("jobs", &go_id, false).await, None, "go holds it");

    let status = status_json(&[&url], "jobs", &[]).await;
    assert_eq!(status["state"], "write");
    assert_eq!(status["writer"], json!(go_id));
    assert_eq!(status["fence"], Value::Null, "Go mints no token");
    assert_eq!(status["last_fencing_token"], Value::Null);
    let text = status_text(&[&url], "jobs", &[]).await;
    pttl_in(
        &text[0],
        &format!("jobs: write-locked by {go_id} (PTTL "),
        30_000,
    );

    for args in [
        &["lock", "jobs", "--no-wait", "--", "true"][..],
        &["lock", "jobs", "--read", "--no-wait", "--", "true"][..],
    ] {
        let out = run(&url, args).await;
        assert_eq!(out.code, Some(75), "{args:?}: {out:?}");
    }
    assert_eq!(raw::get(&conn, "jobs").await, Some(go_id.clone()));

    go.unlock("jobs", &go_id).await;
    let out = run(&url, &["lock", "jobs", "--no-wait", "--", "true"]).await;
    assert_eq!(out.code, Some(0), "free once Go unlocks: {out:?}");
}

// 10. The child's environment.

#[tokio::test]
async fn a_reader_child_sees_key_id_and_token() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let out = run(
        &server.url(),
        &[
            "lock",
            "jobs",
            "--key",
            "k",
            "--read",
            "--",
            "sh",
            "-c",
            r#"echo "$REDISMUTEX_KEY $REDISMUTEX_ID $REDISMUTEX_TOKEN""#,
        ],
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let words: Vec<&str> = out.stdout.split_whitespace().collect();
    assert_eq!(words.len(), 3, "{out:?}");
    assert_eq!(words[0], "jobs:k");
    assert!(
        words[1].len() == 32 && words[1].bytes().all(|b| b.is_ascii_hexdigit()),
        "{out:?}"
    );
    assert_eq!(
        words[2].parse::<u64>().unwrap(),
        raw::stored_token(&conn, "jobs:k:fence").await,
        "the token is the one minted"
    );
}

/// Bad arguments exit 2, before anything is sent: an unknown option (clap), a duration
/// that is not one, and a TTL the mutex refuses.
#[tokio::test]
async fn bad_arguments_exit_2_and_send_nothing() {
    let (_server, url, conn) = setup().await;
    for args in [
        &["lock", "jobs", "--no-such-option", "--", "true"][..],
        &["lock", "jobs", "--ttl", "soon", "--", "true"],
        &["lock", "jobs", "--ttl", "1ms", "--", "true"],
        &["status"],
    ] {
        let out = run(&url, args).await;
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert!(!out.stderr.is_empty(), "{args:?}: no message");
    }
    assert!(keys(&conn).await.is_empty());
}

/// Without `--url`, the server comes from `REDIS_URL`.
#[tokio::test]
async fn the_server_comes_from_redis_url() {
    let server = RedisServer::start();
    let out = Command::new(BIN)
        .args(["lock", "jobs", "--", "sh", "-c", "echo $REDISMUTEX_KEY"])
        .env("REDIS_URL", server.url())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "jobs");
    let fence = raw::get(&server.conn().await, "jobs:fence").await;
    assert!(fence.is_some(), "the lock was taken on that server");
}
