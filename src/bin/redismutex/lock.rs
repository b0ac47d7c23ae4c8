//! `redismutex lock`: take the lock, run the command under it, release it; or, with
//! `--detach`, print its lease and leave it held.

pub(crate) mod link;
mod mutex;
mod wanted;

pub(crate) use mutex::{settle, tasks};

use std::io::{IsTerminal, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use redismutex::{Error, Guard, ReadGuard, RwMutex, WriteGuard};
use tokio::process::{Child, Command};
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

use crate::args::LockArgs;
use crate::exit;
use crate::nodes::Nodes;
use mutex::Mutex;
use wanted::Wanted;

/// SIGINT and SIGTERM, caught from the start so that they end a wait cleanly and are
/// forwarded to the child once it runs.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// The next SIGINT or SIGTERM.
    async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.interrupt.recv() => Signal::SIGINT,
            _ = self.terminate.recv() => Signal::SIGTERM,
        }
    }
}

/// Runs `lock`; gives the exit code (`exit.rs`, or the command's own).
pub(crate) async fn run(urls: &[String], args: LockArgs) -> u8 {
    let key = match args.target.lock_key() {
        Ok(key) => key,
        Err(code) => return code,
    };
    let mut signals = match Signals::new() {
        Ok(signals) => signals,
        Err(err) => {
            eprintln!("redismutex: cannot catch signals: {err}");
            return exit::OS;
        }
    };
    let nodes = match Nodes::open(urls, &key) {
        Ok(nodes) => nodes,
        Err(code) => return code,
    };
    // Kept until the end of the run, as the guard's mutex.
    let mx = match mutex::build(&nodes, &args, &key).await {
        Ok(mx) => mx,
        Err(code) => return code,
    };
    let servers = match &mx {
        Mutex::Server(_) => nodes.list()[0].server(),
        Mutex::Quorum(_) => nodes.name(),
    };
    let at = At {
        servers: &servers,
        key: &key,
    };
    match (&mx, args.read) {
        (Mutex::Server(mx), false) => under::<_, WriteGuard>(mx, &args, at, &mut signals).await,
        (Mutex::Server(mx), true) => under::<_, ReadGuard>(mx, &args, at, &mut signals).await,
        (Mutex::Quorum(mx), false) => under::<_, WriteGuard>(mx, &args, at, &mut signals).await,
        (Mutex::Quorum(mx), true) => under::<_, ReadGuard>(mx, &args, at, &mut signals).await,
    }
}

/// Where a run locks: the server or the nodes (for a Redis error) and the lock key.
#[derive(Clone, Copy)]
struct At<'a> {
    servers: &'a str,
    key: &'a str,
}

/// Takes a `G` of `mx`, then holds it or runs the command under it; the exit code.
async fn under<C: Send + Sync + 'static, G: Wanted>(
    mx: &RwMutex<C>,
    args: &LockArgs,
    at: At<'_>,
    signals: &mut Signals,
) -> u8 {
    let guard = match acquire::<C, G>(mx, args, at, signals).await {
        Ok(guard) => guard,
        Err(code) => return code,
    };
    if args.detach {
        detached(guard)
    } else if args.command.is_empty() {
        hold(guard, signals).await
    } else {
        run_child(guard, args, signals).await
    }
}

/// Waits for the lock (or makes one attempt with `--no-wait`), with a spinner on a
/// terminal; the exit code when it ends without one.
async fn acquire<C: Send + Sync + 'static, G: Wanted>(
    mx: &RwMutex<C>,
    args: &LockArgs,
    at: At<'_>,
    signals: &mut Signals,
) -> Result<G, u8> {
    let key_arg = args.target.key_arg().to_owned();
    let stop = CancellationToken::new();
    let spinner = spinner(args, at.key);
    let attempt = async {
        if args.no_wait {
            let attempt = G::attempt(mx).key(key_arg).parent(stop.clone()).await;
            match attempt {
                Ok(Some(guard)) => Ok(guard),
                Ok(None) => Err(Err(args.conflict_exit_code)),
                // Also a try that got no reply in time: a Redis error, not a busy lock.
                Err(err) => Err(Ok(err)),
            }
        } else {
            let mut request = G::wait(mx).key(key_arg).parent(stop.clone());
            if let Some(timeout) = args.timeout {
                request = request.timeout(timeout);
            }
            request.await.map_err(|err| match err {
                Error::Timeout => Err(exit::TIMEOUT),
                err => Ok(err),
            })
        }
    };
    tokio::pin!(attempt);
    let outcome = tokio::select! {
        outcome = &mut attempt => outcome,
        signal = signals.next() => {
            // Give up the wait; the request clears what it set before it returns.
            stop.cancel();
            let _ = attempt.await;
            spinner.finish_and_clear();
            return Err(exit::signalled(signal as i32));
        }
    };
    spinner.finish_and_clear();
    match outcome {
        Ok(guard) => Ok(guard),
        Err(Err(code)) => Err(code),
        Err(Ok(err)) => Err(exit::redis_error_at(at.servers, at.key, &err)),
    }
}

/// A spinner on stderr saying what we wait for and for how long, only on a terminal.
fn spinner(args: &LockArgs, key: &str) -> ProgressBar {
    if args.no_wait || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let mode = if args.read { "read" } else { "write" };
    let spinner = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} waiting for the {msg} ({elapsed})") {
        spinner.set_style(style);
    }
    spinner.set_message(format!("{mode} lock on {key}"));
    spinner.enable_steady_tick(Duration::from_millis(100));
    spinner
}

/// `--detach`: print the lease and leave the lock held (for `--ttl`, unless renewed or
/// released by lease); the exit code 0.
fn detached<G: Wanted>(guard: G) -> u8 {
    println!("{}", guard.detach());
    let _ = std::io::stdout().flush();
    0
}

/// No command: print the key and id, hold the lock until SIGINT or SIGTERM, release it.
async fn hold(guard: impl Guard, signals: &mut Signals) -> u8 {
    println!("{} {}", guard.key(), guard.id());
    let _ = std::io::stdout().flush();
    tokio::select! {
        _ = signals.next() => release(guard, 0).await,
        () = guard.cancelled() => lost(&guard),
    }
}

/// Runs the command with the lock held; its exit code, or [`exit::LOST`].
async fn run_child(guard: impl Guard, args: &LockArgs, signals: &mut Signals) -> u8 {
    let (program, rest) = args.command.split_first().expect("a command was given");
    let spawned = Command::new(program)
        .args(rest)
        .env("REDISMUTEX_KEY", guard.key())
        .env("REDISMUTEX_ID", guard.id())
        .env("REDISMUTEX_TOKEN", guard.fencing_token().to_string())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(err) => {
            eprintln!(
                "redismutex: cannot run {}: {err}",
                program.to_string_lossy()
            );
            let code = match err.kind() {
                std::io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::NOT_RUNNABLE,
            };
            return release(guard, code).await;
        }
    };
    let mut kill_at: Option<tokio::time::Instant> = None;
    let mut lock_lost = false;
    let status = loop {
        let lost_lock = async {
            if !lock_lost {
                guard.cancelled().await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        let grace_over = async {
            match kill_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            status = child.wait() => break status,
            signal = signals.next() => send(&child, signal),
            () = lost_lock => {
                lost(&guard);
                eprintln!("redismutex: sending SIGTERM to the command");
                send(&child, Signal::SIGTERM);
                lock_lost = true;
                kill_at = Some(tokio::time::Instant::now() + args.grace);
            }
            () = grace_over => {
                eprintln!("redismutex: the command outlived --grace; sending SIGKILL");
                send(&child, Signal::SIGKILL);
                kill_at = None;
            }
        }
    };
    if lock_lost {
        return exit::LOST;
    }
    release(guard, code_of(status)).await
}

/// The exit code of a child that ended with `status` (128 + N for signal N).
fn code_of(status: std::io::Result<ExitStatus>) -> u8 {
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(u8::MAX),
            (None, Some(signal)) => exit::signalled(signal),
            (None, None) => exit::NOT_RUNNABLE,
        },
        Err(err) => {
            eprintln!("redismutex: lost track of the command: {err}");
            exit::NOT_RUNNABLE
        }
    }
}

/// Sends `signal` to the child, if it still runs.
fn send(child: &Child, signal: Signal) {
    if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// Releases the lock, then gives `code`; a failed release is reported (the lock then
/// expires by its TTL) and does not change the code.
async fn release(guard: impl Guard, code: u8) -> u8 {
    let key = guard.key().to_owned();
    if let Err(err) = guard.unlock().await {
        eprintln!("redismutex: releasing {key} failed ({err}); it expires by its TTL");
    }
    code
}

fn lost(guard: &impl Guard) -> u8 {
    eprintln!(
        "redismutex: lock {} lost ({:?})",
        guard.key(),
        guard.cancel_reason()
    );
    exit::LOST
}
