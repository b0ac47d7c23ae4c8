//! Redis Cluster's key distribution (redis.io, "Redis cluster specification", "Key
//! distribution model"): the hash tag of a key, and the slot it hashes to. One scan finds
//! the tag, for a lock key ([`hash_tag`], text) and for any key a pipeline sends
//! ([`slot`], bytes).

use std::ops::Range;

/// Where the hash tag of `key` is, as Redis Cluster reads it (Redis Cluster
/// specification, "Hash tags"): the bytes between the first `{` and the first `}` after
/// it, when there are any. Both braces are ASCII, so on a `str` the span falls on
/// character boundaries.
fn tag_span(key: &[u8]) -> Option<Range<usize>> {
    let open = key.iter().position(|&byte| byte == b'{')? + 1;
    let close = open + key.get(open..)?.iter().position(|&byte| byte == b'}')?;
    (close > open).then_some(open..close)
}

/// The hash tag of `key` as Redis Cluster reads it (Redis Cluster specification, "Hash
/// tags"): the text between the first `{` and the first `}` after it, when that text is
/// not empty. Every key that carries the same tag hashes to the same slot, so a lock key
/// with a tag shares its slot with its intent and fence keys and its release channel,
/// which only append to it.
pub(crate) fn hash_tag(key: &str) -> Option<&str> {
    tag_span(key.as_bytes()).and_then(|span| key.get(span))
}

/// The Redis Cluster slot of `key`, a lock key or any key a pipeline sends (bytes, not
/// always UTF-8): CRC16 (XMODEM) of its hash tag ([`hash_tag`]'s, found by the same
/// scan), or of the whole key when it has none, modulo 16384 (the CRC16 of redis-rs's
/// cluster client).
pub(crate) fn slot(key: &[u8]) -> u16 {
    let hashed = tag_span(key).and_then(|span| key.get(span)).unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(hashed) % 16_384
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_those_cluster_keyslot_gives() {
        // CLUSTER KEYSLOT on Redis 7.0.15, with the examples of the Redis Cluster
        // specification: a tag decides alone; an empty or unclosed one does not count.
        for (key, expected) in [
            ("foo", 12182),
            ("somekey", 11058),
            ("{foo}:bar", 12182),
            ("{user1000}.following", 3443),
            ("{user1000}.followers", 3443),
            ("user1000", 3443),
            ("foo{}{bar}", 8363),
            ("foo{{bar}}zap", 4015),
            ("{bar", 4015),
            ("foo{bar}{zap}", 5061),
            ("bar", 5061),
            ("{}x", 10595),
            ("x", 16287),
            ("a{}b", 13694),
        ] {
            assert_eq!(slot(key.as_bytes()), expected, "{key}");
        }
        // A key that is not UTF-8 hashes by its tag too.
        assert_eq!(slot(b"\xff{foo}\xfe"), 12182);
        let whole = crc16::State::<crc16::XMODEM>::calculate(b"\xff{}\xfe") % 16_384;
        assert_eq!(slot(b"\xff{}\xfe"), whole, "an empty tag: the whole key");
    }

    #[test]
    fn a_slot_hashes_what_hash_tag_reads() {
        for key in [
            "{orders}:42",
            "orders:{42}",
            "a{b}c{d}",
            "}{x}",
            "a{}b",
            "{}{x}",
            "{",
            "orders:42",
            "a{b{c}",
            "日本{語}🔒",
            "{🔒}",
        ] {
            let hashed = hash_tag(key).unwrap_or(key);
            assert_eq!(slot(key.as_bytes()), slot(hashed.as_bytes()), "{key}");
        }
    }

    #[test]
    fn hash_tags_are_read_as_redis_cluster_reads_them() {
        for (key, tag) in [
            ("{orders}:42", Some("orders")),
            ("orders:{42}", Some("42")),
            ("a{b}c{d}", Some("b")),
            ("}{x}", Some("x")),
            ("a{}b", None),
            ("{}{x}", None),
            ("{", None),
            ("orders:42", None),
            ("a{b{c}", Some("b{c")),
            ("日本{語}🔒", Some("語")),
            ("{🔒}", Some("🔒")),
        ] {
            assert_eq!(hash_tag(key), tag, "{key}");
        }
    }
}
