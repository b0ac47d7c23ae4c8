//! An upgradable reader's state, which its renewals and its release must know: whether
//! its id is still the upgradable reader, a plain reader, or (after an upgrade, or while
//! one is unanswered) the writer.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::protocol::calls::Holder;

/// The id is the upgradable reader (a plain-reader request may be in flight: the
/// upgrader key is then deleted or not, and a release as [`Holder::Upgradable`] removes
/// both forms alike).
const UPGRADABLE: u8 = 0;
/// An upgrade was sent and its reply not read: the id may be a reader's or the writer's.
const IN_FLIGHT: u8 = 1;
/// An upgrade succeeded: the id is the writer's.
const UPGRADED: u8 = 2;
/// The id gave up the right to upgrade: it is a plain reader's.
const PLAIN: u8 = 3;
/// The release has begun: no upgrade may be sent after it.
const RELEASING: u8 = 4;

/// Where an upgradable reader's upgrade stands, and so in which form its id may be at
/// the lock key. The release marks the start of its work here, so an upgrade is either
/// sent before the release looks (which then removes the id in both forms) or not at all.
#[derive(Debug, Default)]
pub(crate) struct UpgradeState(AtomicU8);

impl UpgradeState {
    /// An upgrade is about to be sent. False when the release has begun, or the id is no
    /// longer an upgradable reader.
    pub(crate) fn sending(&self) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                matches!(state, UPGRADABLE | IN_FLIGHT).then_some(IN_FLIGHT)
            })
            .is_ok()
    }

    /// The upgrade was answered: the id is the writer's when `upgraded`, else still the
    /// upgradable reader's. A release that began meanwhile keeps the forms it chose.
    pub(crate) fn answered(&self, upgraded: bool) {
        let to = if upgraded { UPGRADED } else { UPGRADABLE };
        let _ = self
            .0
            .compare_exchange(IN_FLIGHT, to, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The id gave up the right to upgrade and stays a plain reader.
    pub(crate) fn plain(&self) {
        let _ = self
            .0
            .compare_exchange(UPGRADABLE, PLAIN, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Whether an upgrade succeeded: the id holds the lock as its writer.
    pub(crate) fn upgraded(&self) -> bool {
        self.0.load(Ordering::Acquire) & !RELEASING == UPGRADED
    }

    /// Whether renewals renew the upgrader key: while the id is (or may still be) the
    /// upgradable reader.
    pub(crate) fn renews_upgrader(&self) -> bool {
        matches!(
            self.0.load(Ordering::Acquire) & !RELEASING,
            UPGRADABLE | IN_FLIGHT
        )
    }

    /// The release begins: the forms to release the id as, in order, before a downgrade
    /// of the upgraded writer is counted (`None` once upgraded: the writer's downgrade
    /// state says). The release stops at the first that finds the id.
    pub(crate) fn releasing(&self) -> Option<&'static [Holder]> {
        match self.0.fetch_or(RELEASING, Ordering::AcqRel) & !RELEASING {
            UPGRADED => None,
            IN_FLIGHT => Some(&[Holder::Writer, Holder::Upgradable]),
            PLAIN => Some(&[Holder::Reader]),
            _ => Some(&[Holder::Upgradable]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_removes_every_form_the_id_may_have() {
        let never = UpgradeState::default();
        assert!(never.renews_upgrader());
        assert_eq!(never.releasing(), Some(&[Holder::Upgradable][..]));

        let done = UpgradeState::default();
        assert!(done.sending());
        done.answered(true);
        assert!(done.upgraded() && !done.renews_upgrader());
        assert_eq!(done.releasing(), None);

        let unanswered = UpgradeState::default();
        assert!(unanswered.sending());
        assert!(unanswered.renews_upgrader());
        let both = Some(&[Holder::Writer, Holder::Upgradable][..]);
        assert_eq!(unanswered.releasing(), both);
        unanswered.answered(true);
        assert_eq!(
            unanswered.releasing(),
            both,
            "a reply after the release began"
        );

        let blocked = UpgradeState::default();
        assert!(blocked.sending());
        blocked.answered(false);
        assert!(blocked.sending(), "an upgrade may be sent again");

        let plain = UpgradeState::default();
        plain.plain();
        assert!(!plain.renews_upgrader() && !plain.sending());
        assert_eq!(plain.releasing(), Some(&[Holder::Reader][..]));
    }

    #[test]
    fn no_upgrade_is_sent_once_the_release_has_begun() {
        let state = UpgradeState::default();
        assert_eq!(state.releasing(), Some(&[Holder::Upgradable][..]));
        assert!(!state.sending());
    }
}
