//! The `redismutex` command's spinner: shown on stderr while it waits when stderr is a
//! terminal (here a pseudo-terminal from `script(1)`), and never when it is not.
#![cfg(feature = "cli")]

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common;
use crate::common::RedisServer;

/// Holds the lock `spin` for `secs` seconds in the background; returns the holder.
fn holder(url: &str, secs: &str) -> std::process::Child {
    let child = Command::new(env!("CARGO_BIN_EXE_redismutex"))
        .args(["--url", url, "lock", "spin", "--", "sleep", secs])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Until the holder has the lock.
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let deadline = std::time::Instant::now() + common::LIVENESS;
    while !redis::cmd("EXISTS")
        .arg("spin")
        .query::<bool>(&mut conn)
        .unwrap()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the holder never locked"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

#[test]
fn a_wait_on_a_terminal_shows_a_spinner_and_on_a_pipe_nothing() {
    let server = RedisServer::start();
    let url = server.url();
    let waiter = format!(
        "{} --url {url} lock spin -- true",
        env!("CARGO_BIN_EXE_redismutex")
    );

    let mut held = holder(&url, "1.5");
    // `script -qec CMD /dev/null` runs CMD on a pseudo-terminal and copies what it
    // writes to stdout.
    let on_terminal = Command::new("script")
        .args(["-qec", &waiter, "/dev/null"])
        .output()
        .expect("script(1) runs");
    held.wait().unwrap();
    assert!(on_terminal.status.success(), "{on_terminal:?}");
    let shown = String::from_utf8_lossy(&on_terminal.stdout);
    assert!(
        shown.contains("waiting for the write lock on spin"),
        "no spinner: {shown:?}"
    );

    let mut held = holder(&url, "1");
    let on_pipe = Command::new(env!("CARGO_BIN_EXE_redismutex"))
        .args(["--url", &url, "lock", "spin", "--", "true"])
        .output()
        .unwrap();
    held.wait().unwrap();
    assert!(on_pipe.status.success(), "{on_pipe:?}");
    assert!(
        on_pipe.stderr.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&on_pipe.stderr)
    );
}
