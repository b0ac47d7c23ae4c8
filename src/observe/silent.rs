//! [`Meters`] without the feature `metrics`: nothing, and every call does nothing.

use super::{Exec, Outcome, Refreshed};
use crate::mode::Kind;
use crate::reason::CancelReason;

/// A handle's meters: empty without the feature `metrics`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Meters {}

impl Meters {
    pub(crate) fn new(_name: Option<&str>) -> Self {
        Meters {}
    }

    pub(crate) fn request(&self, _kind: Kind, _waits: bool) -> Timed {
        Timed {}
    }

    pub(crate) fn request_set(&self, _waits: bool) -> Timed {
        Timed {}
    }

    pub(crate) fn held(&self, _kind: Kind) -> HeldMetric {
        HeldMetric {}
    }

    pub(crate) fn renewed(&self, _renewed: Refreshed) {}

    pub(crate) fn exec(&self, _exec: Exec) {}

    pub(crate) fn clock_jump(&self, _forward: bool) {}

    pub(crate) fn node_error(&self, _node: usize) {}
}

/// A request in progress: nothing to time.
#[derive(Debug)]
pub(crate) struct Timed {}

impl Timed {
    pub(crate) fn finish(self, _outcome: Outcome) {}
}

/// A held lock: nothing to count.
#[derive(Debug, Default)]
pub(crate) struct HeldMetric {}

impl HeldMetric {
    pub(crate) fn end(&self) {}

    pub(crate) fn lost(&self, _reason: CancelReason) {}
}
