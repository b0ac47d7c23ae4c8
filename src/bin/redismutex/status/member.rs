//! The members of the crate's sorted sets, checked: a semaphore's holder ids and a fair
//! queue's `<kind>:<id>` entries (`lua/shared.lua`). Anything else is someone else's.

/// The length of an id: 32 lowercase hex characters (the crate's `Id`).
const ID_CHARS: usize = 32;

/// How many characters of a member that is not the crate's are shown.
const PREVIEW_CHARS: usize = 40;

/// Whether `id` is an id as the crate makes them: 32 lowercase hex characters.
pub(super) fn is_id(id: &str) -> bool {
    id.len() == ID_CHARS && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What a fair queue's member `<kind>:<id>` names: `writer`, `reader` or `permit` and the
/// id, or `unknown` and no id when it is not such a member.
pub(super) fn waiter(member: &str) -> (&'static str, Option<&str>) {
    let kind = match member.get(..2) {
        Some("w:") => "writer",
        Some("r:") => "reader",
        Some("p:") => "permit",
        _ => return ("unknown", None),
    };
    match &member[2..] {
        id if is_id(id) => (kind, Some(id)),
        _ => ("unknown", None),
    }
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
    fn queue_members_name_their_kind_and_id() {
        assert_eq!(waiter(&format!("w:{ID}")), ("writer", Some(ID)));
        assert_eq!(waiter(&format!("r:{ID}")), ("reader", Some(ID)));
        assert_eq!(waiter(&format!("p:{ID}")), ("permit", Some(ID)));
        for bad in [
            "",
            "w",
            "w:",
            "x:0123",
            &format!("x:{ID}"),
            &format!("w:{ID}0"),
            "é:",
        ] {
            assert_eq!(waiter(bad), ("unknown", None), "{bad}");
        }
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
