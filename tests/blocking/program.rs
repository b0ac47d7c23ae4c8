//! A program of its own, built by `tests/blocking/user.rs` in a package whose only
//! dependencies are `redismutex` (feature `blocking`) and `redis`: it takes the lock
//! `nightly:report` on two plain threads in turn, and a semaphore permit, with no async
//! runtime and no tokio of its own. Usage: `blocking-user <redis url>`. The test crate
//! also compiles it as a module, so that `cargo fmt` and clippy check it.

use std::time::Duration;

use redismutex::blocking::{RwMutex, Semaphore};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1/".to_owned());
    let client = redis::Client::open(url)?;
    let mx = RwMutex::builder(client.clone(), "nightly")
        .ttl(Duration::from_secs(2))
        .build()?;

    let first = mx.write("report")?;
    let second = std::thread::spawn({
        let mx = mx.clone();
        move || -> Result<u64, redismutex::Error> {
            // Waits until the first thread's guard is dropped.
            let guard = mx.write_timeout("report", Duration::from_secs(10))?;
            Ok(guard.fencing_token())
        }
    });
    // Held across two TTLs: the background thread refreshes it.
    std::thread::sleep(Duration::from_secs(4));
    assert!(!first.is_cancelled(), "{:?}", first.cancel_reason());
    println!("held with fencing token {}", first.fencing_token());
    drop(first);
    let token = second.join().expect("the second thread")?;
    println!("held with fencing token {token}");

    let pool = Semaphore::builder(client, "exports", 1).build()?;
    let permit = pool.acquire("")?;
    println!("permit held");
    permit.unlock()?;
    Ok(())
}
