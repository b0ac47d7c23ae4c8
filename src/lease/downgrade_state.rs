//! A lease's downgrade state, which its release must know: in which form (a writer's or
//! a reader's) its id may be at the lock key.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::mode::Mode;

/// Nothing was sent: the id is at the lock key in the lease's own mode.
const AS_ACQUIRED: u8 = 0;
/// A downgrade was sent and its reply not read: the id may be a writer's or a reader's.
const IN_FLIGHT: u8 = 1;
/// A downgrade succeeded: the id is a reader's.
const DOWNGRADED: u8 = 2;
/// The release has begun: no downgrade may be sent after it.
const RELEASING: u8 = 4;

/// Where a lease's downgrade stands, and so in which form its id may be at the lock key,
/// as its release must know: in the lease's mode until a downgrade is sent, in either
/// while one is unanswered, a reader's once one succeeded.
///
/// The release marks the start of its work here, so a downgrade is either sent before
/// the release looks (which then removes the id in both forms) or not at all.
#[derive(Debug, Default)]
pub(crate) struct DowngradeState(AtomicU8);

impl DowngradeState {
    /// A downgrade is about to be sent. False when the release has begun: then nothing
    /// must be sent, since the release may already have looked for a writer's id.
    pub(crate) fn sending(&self) -> bool {
        self.0
            .compare_exchange(AS_ACQUIRED, IN_FLIGHT, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The mode a lease taken in `mode` holds the lock in now: [`Mode::Read`] once a
    /// downgrade succeeded (or may have).
    pub(crate) fn mode(&self, mode: Mode) -> Mode {
        match self.0.load(Ordering::Acquire) & !RELEASING {
            AS_ACQUIRED => mode,
            _ => Mode::Read,
        }
    }

    /// The mode the id holds the lock in, `mode` as acquired: `None` while a downgrade is
    /// in flight, when it may be either.
    pub(crate) fn settled(&self, mode: Mode) -> Option<Mode> {
        match self.0.load(Ordering::Acquire) & !RELEASING {
            AS_ACQUIRED => Some(mode),
            IN_FLIGHT => None,
            _ => Some(Mode::Read),
        }
    }

    /// The downgrade was answered: the id is now a reader's when `downgraded`, else it
    /// was at the lock key in neither form. A release that began meanwhile keeps the
    /// forms it chose.
    pub(crate) fn answered(&self, downgraded: bool) {
        let to = if downgraded { DOWNGRADED } else { AS_ACQUIRED };
        let _ = self
            .0
            .compare_exchange(IN_FLIGHT, to, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The release begins: the modes to release the id as, in order, for a lease taken in
    /// `mode`. The release stops at the first that finds the id.
    pub(crate) fn releasing(&self, mode: Mode) -> &'static [Mode] {
        match (
            self.0.fetch_or(RELEASING, Ordering::AcqRel) & !RELEASING,
            mode,
        ) {
            (DOWNGRADED, _) | (_, Mode::Read) => &[Mode::Read],
            (IN_FLIGHT, Mode::Write) => &[Mode::Write, Mode::Read],
            (_, Mode::Write) => &[Mode::Write],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_removes_every_form_the_id_may_have() {
        let never = DowngradeState::default();
        assert_eq!(never.releasing(Mode::Write), [Mode::Write]);
        assert_eq!(
            DowngradeState::default().releasing(Mode::Read),
            [Mode::Read]
        );

        let done = DowngradeState::default();
        assert!(done.sending());
        done.answered(true);
        assert_eq!(done.releasing(Mode::Write), [Mode::Read]);

        let unanswered = DowngradeState::default();
        assert!(unanswered.sending());
        assert_eq!(unanswered.releasing(Mode::Write), [Mode::Write, Mode::Read]);
        unanswered.answered(true);
        assert_eq!(
            unanswered.releasing(Mode::Write),
            [Mode::Write, Mode::Read],
            "a reply after the release began changes nothing"
        );

        let refused = DowngradeState::default();
        assert!(refused.sending());
        refused.answered(false);
        assert_eq!(refused.releasing(Mode::Write), [Mode::Write]);
    }

    #[test]
    fn no_downgrade_is_sent_once_the_release_has_begun() {
        let state = DowngradeState::default();
        assert_eq!(state.releasing(Mode::Write), [Mode::Write]);
        assert!(!state.sending());
    }
}
