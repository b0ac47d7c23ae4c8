//! Lock ids.

/// Length in bytes of the random part of a lock id, as in the Go package.
const ID_BYTES: usize = 16;

/// A new lock id: 16 bytes from `rand`'s thread-local CSPRNG (ChaCha seeded from the
/// operating system), as 32 lowercase hex characters.
pub(crate) fn new_id() -> String {
    hex::encode(rand::random::<[u8; ID_BYTES]>())
}

#[cfg(test)]
mod tests {
    use super::new_id;

    #[test]
    fn ids_are_32_lowercase_hex_chars_and_differ() {
        let a = new_id();
        let b = new_id();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
        assert_ne!(a, b);
    }
}
