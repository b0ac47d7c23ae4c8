//! Claims on loopback ports, shared by every test process on the machine. A
//! `RedisServer` holds one on its port from its start until it is dropped, also while it
//! is stopped for a restart, and the harness starts no server on a port another process
//! claims: so no other test binary starts a server on the port of one stopped for a
//! restart (the restarted server would find its port taken, and the harness would talk
//! to the other's), and two processes that drew the same free port do not both start on
//! it. The test cluster's nodes claim their ports too (`cluster.rs`).
//!
//! A claim is an exclusive `flock` on `<temp dir>/redismutex-test-ports/<port>`, which the
//! kernel drops when its process exits, however it exits: a claim is never stale, and no
//! pid is trusted that may have been reused. The file holds the owner's pid, for whoever
//! looks; it is removed when the claim ends.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The folder of the claim files.
pub const DIR: &str = "redismutex-test-ports";

/// A loopback port this process claims; the claim ends when this drops.
#[derive(Debug)]
pub struct PortClaim {
    port: u16,
    path: PathBuf,
    /// Locked as long as the claim lives; unlocked (and closed) after the file is removed.
    _lock: Flock<File>,
}

impl PortClaim {
    /// Claims `port`. The error says so when another process (or another claim of this
    /// one) holds it.
    pub fn take(port: u16) -> Result<Self, String> {
        let dir = std::env::temp_dir().join(DIR);
        std::fs::create_dir_all(&dir).map_err(|err| format!("cannot create {dir:?}: {err}"))?;
        let path = dir.join(port.to_string());
        loop {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|err| format!("cannot open {path:?}: {err}"))?;
            let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(locked) => locked,
                Err((_, Errno::EAGAIN)) => {
                    let owner = std::fs::read_to_string(&path).unwrap_or_default();
                    return Err(format!(
                        "port {port} is claimed by another server of the tests (pid {}, {path:?})",
                        owner.trim()
                    ));
                }
                Err((_, errno)) => return Err(format!("cannot lock {path:?}: {errno}")),
            };
            // Its last owner may have removed the file between the open and the lock:
            // this lock is then on a file no one else can open, and it is taken again.
            if same_file(&file, &path) {
                let pid = std::process::id().to_string();
                file.set_len(0)
                    .and_then(|()| file.write_all(pid.as_bytes()))
                    .map_err(|err| format!("cannot write {path:?}: {err}"))?;
                return Ok(Self {
                    port,
                    path,
                    _lock: file,
                });
            }
        }
    }

    /// The port claimed.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// Whether `file` is the file at `path` now (not one removed from there since it was
/// opened).
fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

impl Drop for PortClaim {
    /// Removes the file while it is still locked (the lock goes with the file after this),
    /// so that whoever opened it meanwhile finds it gone once it gets the lock and claims
    /// a new one: no two claims can both hold the port.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
