//! The lock key of the lock a run names (`NAME`, `--key`, `--hash-tag-keys`), formed by
//! the library's own handle (`RwMutex::lock_key`), so that it is the key the programs
//! sharing the lock use. It is known before any server is reached (a message about an
//! unreachable server names it): the handle that forms it is made over [`Offline`], a
//! connection that never connects and on which nothing is sent.

use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
use redismutex::RwMutex;

use crate::args::Target;
use crate::chain::chain;
use crate::exit;

impl Target {
    /// `--key`, `""` for none: what the library's `key` arguments take.
    pub(crate) fn key_arg(&self) -> &str {
        self.key.as_deref().unwrap_or_default()
    }

    /// The lock key, as the library forms it (the same for a mutex and a semaphore); or,
    /// when the library refuses the name (empty, too long, ending like another lock's
    /// key, or one no hash tag can be made for), [`exit::USAGE`] after saying why.
    pub(crate) fn lock_key(&self) -> Result<String, u8> {
        let handle = RwMutex::builder(Offline, self.name.clone())
            .hash_tag_keys(self.hash_tag_keys)
            .build()
            .map_err(|err| {
                eprintln!("redismutex: {}", chain(&err));
                exit::USAGE
            })?;
        Ok(handle.lock_key(self.key_arg()))
    }
}

/// A connection that never connects: every request fails at once. Only the handle that
/// forms the lock key is made over it, and that handle sends nothing.
#[derive(Debug, Clone, Copy)]
struct Offline;

impl Offline {
    fn error() -> RedisError {
        RedisError::from((ErrorKind::Client, "redismutex: no connection to send on"))
    }
}

impl ConnectionLike for Offline {
    fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async { Err(Self::error()) })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _: &'a Pipeline,
        _: usize,
        _: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async { Err(Self::error()) })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::args::{Cli, Command};

    fn key(args: &[&str]) -> Result<String, u8> {
        let cli = Cli::try_parse_from([&["redismutex"][..], args].concat()).unwrap();
        match cli.command {
            Command::Lock(args) => args.target.lock_key(),
            Command::Status(args) => args.target.lock_key(),
            Command::Unlock(args) => args.target().expect("a NAME").lock_key(),
            Command::Renew(_) => panic!("renew names a lease, not a lock"),
        }
    }

    #[test]
    fn the_lock_key_is_the_librarys() {
        assert_eq!(key(&["status", "jobs"]), Ok("jobs".to_owned()));
        assert_eq!(
            key(&["status", "jobs", "--key", "42"]),
            Ok("jobs:42".to_owned())
        );
        assert_eq!(
            key(&["unlock", "jobs", "--key", "42", "--hash-tag-keys"]),
            Ok("jobs:{42}".to_owned())
        );
        assert_eq!(
            key(&["lock", "jobs", "--hash-tag-keys"]),
            Ok("{jobs}".to_owned())
        );
        assert_eq!(
            key(&["status", "{jobs}", "--key", "42", "--hash-tag-keys"]),
            Ok("{jobs}:42".to_owned()),
            "a tag of its own is kept"
        );
        assert_eq!(key(&["status", ""]), Err(crate::exit::USAGE));
        assert_eq!(key(&["status", "x:fence"]), Err(crate::exit::USAGE));
    }
}
