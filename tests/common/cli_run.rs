//! Running the `redismutex` command from a test (feature `cli`): started with its output
//! piped and killed if dropped, and waited for at most `LIVENESS`.

use std::process::Stdio;

use tokio::process::{Child, Command};

use super::LIVENESS;

/// The command's binary, built by `cargo test` with the feature `cli`.
pub const BIN: &str = env!("CARGO_BIN_EXE_redismutex");

/// What one run of the command gave.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// `redismutex --url URL... ARGS...` (one `--url` per entry of `urls`), started, with
/// stdout and stderr piped; killed if dropped (so a test that fails leaves nothing
/// running).
pub fn spawn(urls: &[&str], args: &[&str]) -> Child {
    let mut command = Command::new(BIN);
    for url in urls {
        command.arg("--url").arg(url);
    }
    command
        .args(args)
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run redismutex")
}

/// Waits for a spawned command, at most [`LIVENESS`].
pub async fn finish(child: Child) -> Run {
    let output = tokio::time::timeout(LIVENESS, child.wait_with_output())
        .await
        .expect("redismutex must exit within LIVENESS")
        .expect("wait for redismutex");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Starts `redismutex --url URL... lock jobs EXTRA...` without a command and reads its
/// first line, `<key> <id>`: the lock is held from then on. Gives the child, the key
/// and the id.
pub async fn hold(urls: &[&str], extra: &[&str]) -> (Child, String, String) {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let mut args = vec!["lock", "jobs"];
    args.extend_from_slice(extra);
    let mut child = spawn(urls, &args);
    let stdout = child.stdout.take().expect("piped stdout");
    let line = tokio::time::timeout(LIVENESS, BufReader::new(stdout).lines().next_line())
        .await
        .expect("the first line within LIVENESS")
        .expect("read stdout")
        .expect("a first line");
    let (key, id) = line.split_once(' ').expect("<key> <id>");
    (child, key.to_owned(), id.to_owned())
}
