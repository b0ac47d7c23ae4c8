//! Lock ids.

use std::fmt;

/// Length in bytes of the random part of a lock id, as in the Go package.
const ID_BYTES: usize = 16;

/// Length of a lock id as sent: two lowercase hex characters per random byte.
const ID_CHARS: usize = 2 * ID_BYTES;

/// A lock id: 16 bytes from `rand`'s thread-local CSPRNG (ChaCha seeded from the
/// operating system), as 32 lowercase hex characters, kept inline. It goes on the wire
/// as those characters, like the Go package's ids.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Id([u8; ID_CHARS]);

impl Id {
    /// A new random id.
    pub(crate) fn new() -> Self {
        let random = rand::random::<[u8; ID_BYTES]>();
        let mut hex = [0; ID_CHARS];
        for (pair, byte) in hex.chunks_exact_mut(2).zip(random) {
            pair.copy_from_slice(&[HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]]);
        }
        Self(hex)
    }

    /// The id written as `text`, when it is one: exactly 32 lowercase hex characters (a
    /// lease's id, read back).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let bytes: [u8; ID_CHARS] = text.as_bytes().try_into().ok()?;
        bytes
            .iter()
            .all(|byte| HEX.contains(byte))
            .then_some(Self(bytes))
    }

    /// The id as text: 32 lowercase hex characters.
    #[expect(
        clippy::expect_used,
        reason = "an id is made only by `Id::new`, of ASCII hex digits"
    )]
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("an id is ASCII hex")
    }

    /// The id's characters, as sent and as published on a release channel.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The lowercase hex digits, by value.
const HEX: [u8; 16] = *b"0123456789abcdef";

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl redis::ToRedisArgs for Id {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + redis::RedisWrite,
    {
        out.write_arg(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use redis::ToRedisArgs;

    use super::Id;

    #[test]
    fn an_id_parses_back_and_nothing_else_does() {
        let id = Id::new();
        assert_eq!(Id::parse(id.as_str()), Some(id));
        let upper = id.as_str().to_uppercase();
        for bad in ["", "0", &upper, &format!("{id}0"), &"g".repeat(32)] {
            assert_eq!(Id::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn ids_are_32_lowercase_hex_chars_and_differ() {
        let a = Id::new();
        let b = Id::new();
        assert_eq!(a.as_str().len(), 32);
        assert!(a
            .as_str()
            .bytes()
            .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
        assert_ne!(a, b);
        assert_ne!(a.as_str(), b.as_str());
        assert_eq!(a.as_bytes(), a.as_str().as_bytes());
        assert_eq!(a.to_string(), a.as_str());
        assert_eq!(format!("{a:?}"), format!("{:?}", a.as_str()));
        // Every digit turns up: the nibbles are spread over the whole alphabet.
        let digits: std::collections::HashSet<u8> = (0..64)
            .flat_map(|_| Id::new().as_bytes().to_vec())
            .collect();
        assert_eq!(digits.len(), 16);
    }

    #[test]
    fn an_id_is_sent_as_its_characters() {
        let id = Id::new();
        assert_eq!(id.to_redis_args(), vec![id.as_str().as_bytes().to_vec()]);
        assert_eq!(id.to_redis_args(), id.as_str().to_redis_args());
        let mut cmd = redis::cmd("SET");
        cmd.arg("k").arg(id);
        let mut by_str = redis::cmd("SET");
        by_str.arg("k").arg(id.as_str());
        assert_eq!(cmd.get_packed_command(), by_str.get_packed_command());
    }
}
