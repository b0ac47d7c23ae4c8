//! The members of a semaphore's sorted set, checked: the crate's holder ids. Anything
//! else is someone else's, shown quoted (a fair queue's members come typed from the
//! library: `redismutex::QueueEntry`).

/// The length of an id: 32 lowercase hex characters (the crate's `Id`).
const ID_CHARS: usize = 32;

/// How many characters of a member that is not the crate's are shown.
const PREVIEW_CHARS: usize = 40;

/// Whether `id` is an id as the crate makes them: 32 lowercase hex characters.
pub(super) fn is_id(id: &str) -> bool {
    id.len() == ID_CHARS && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `text` quoted and escaped, cut to its first [`PREVIEW_CHARS`] characters: for members
/// that may be long or hold control characters.
pub(super) fn preview(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(PREVIEW_CHARS).collect();
    let more = if chars.next().is_some() { "..." } else { "" };
    format!("{head:?}{more}")
}

/// `text` as it is when it is short printable ASCII with no space (an id, Go's `1`), else
/// its [`preview`]: a value written by someone else must not break a line or a table, nor
/// reach the terminal as an escape sequence.
pub(super) fn shown(text: &str) -> String {
    if text.len() <= PREVIEW_CHARS && !text.is_empty() && text.chars().all(|c| c.is_ascii_graphic())
    {
        text.to_owned()
    } else {
        preview(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn ids_are_32_lowercase_hex_characters() {
        assert!(is_id(ID));
        for bad in [
            "",
            "0123",
            &ID.to_uppercase(),
            &format!("{ID}0"),
            &ID.replace('a', "g"),
        ] {
            assert!(!is_id(bad), "{bad}");
        }
        assert!(!is_id(&"é".repeat(16)), "32 bytes, not hex");
    }

    #[test]
    fn odd_values_are_shown_quoted_and_ids_as_they_are() {
        assert_eq!(shown(ID), ID);
        assert_eq!(shown("1"), "1");
        assert_eq!(shown("a\nb"), "\"a\\nb\"");
        assert_eq!(shown("\u{1b}[2J"), "\"\\u{1b}[2J\"");
        assert_eq!(shown(""), "\"\"");
    }

    #[test]
    fn previews_are_quoted_and_short() {
        assert_eq!(preview("a\nb"), r#""a\nb""#);
        assert_eq!(preview(&"x".repeat(50)), format!("{:?}...", "x".repeat(40)));
    }
}
