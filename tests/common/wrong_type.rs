//! The check that a result is the typed refusal of a key holding something else.

use std::fmt::Debug;

use redismutex::Error;

/// Checks that `result` is `Err(Error::WrongType)` naming `key` and saying it holds
/// `found` (a Redis type, or what is wrong with the string there).
#[track_caller]
pub fn assert_wrong_type<T: Debug>(result: Result<T, Error>, key: &str, found: &str) {
    match result {
        Err(Error::WrongType {
            key: named,
            found: said,
            ..
        }) => {
            assert_eq!((named.as_str(), said.as_str()), (key, found));
        }
        other => panic!("expected WrongType on {key:?} holding {found}, got {other:?}"),
    }
}
