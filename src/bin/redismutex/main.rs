//! `redismutex`: run a program under a distributed lock on Redis, hand a held lock from
//! one shell step to the next, see who holds one, or release one by force.
//!
//! Speaks the crate's lock protocol (and so the Go package's): see the
//! [command line guide](redismutex::guide::command_line) for the commands, their options
//! and their exit codes.

mod args;
// The library's own error chain (`src/error/chain.rs`), compiled here too: the command
// writes an error as the library logs it, and the library need not make it public.
#[path = "../../error/chain.rs"]
mod chain;
mod exit;
mod lease;
mod lock;
mod nodes;
mod status;
mod target;
mod unlock;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

fn main() -> ExitCode {
    // clap exits on bad arguments, with 2.
    let cli = Cli::parse();
    let urls = cli.urls();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("redismutex: cannot start the async runtime: {err}");
            return ExitCode::from(exit::OS);
        }
    };
    let code = runtime.block_on(async {
        match cli.command {
            Command::Lock(lock) => {
                let code = lock::run(&urls, lock).await;
                lock::settle().await;
                code
            }
            Command::Status(status) => status::run(&urls, status).await,
            Command::Unlock(unlock) => {
                let code = unlock::run(&urls, unlock).await;
                lock::settle().await;
                code
            }
            Command::Renew(renew) => {
                let code = lease::run(&urls, &renew.lease, lease::Act::Renew(renew.ttl)).await;
                lock::settle().await;
                code
            }
        }
    });
    // A child that ignored our signals may still be running: do not wait for the
    // runtime's blocking tasks.
    runtime.shutdown_background();
    ExitCode::from(code)
}
