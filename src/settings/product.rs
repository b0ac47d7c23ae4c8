//! What a handle is: a read-write mutex, with the options only a mutex has, or a counting
//! semaphore with its permit count.

/// What a handle's settings make: a read-write mutex (an election's too) or a counting
/// semaphore. The mutex's own options live in its variant, so a semaphore with a lock
/// intent, or a mutex with a permit count, cannot be said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Product {
    /// A read-write mutex.
    Mutex {
        /// A waiting writer keeps new readers out
        /// ([`Builder::lock_intent`](crate::Builder::lock_intent)).
        lock_intent: bool,
        /// The task holding a lock may take it again
        /// ([`Builder::reentrant`](crate::Builder::reentrant)).
        reentrant: bool,
    },
    /// A counting semaphore: at most `permits` holders of a key at once (0 is refused by
    /// `Settings::check`).
    Semaphore {
        /// How many holders a key allows at once.
        permits: u32,
    },
}

impl Default for Product {
    /// A mutex with the lock intent and reentrancy off.
    fn default() -> Self {
        Self::Mutex {
            lock_intent: false,
            reentrant: false,
        }
    }
}

impl Product {
    /// A semaphore's permit count; `None` for a mutex.
    pub(crate) fn permits(self) -> Option<u32> {
        match self {
            Self::Semaphore { permits } => Some(permits),
            Self::Mutex { .. } => None,
        }
    }

    /// Whether waiting writers set the lock intent: never for a semaphore, which has no
    /// writers.
    pub(crate) fn lock_intent(self) -> bool {
        matches!(
            self,
            Self::Mutex {
                lock_intent: true,
                ..
            }
        )
    }

    /// Whether the task holding a lock may take it again: never for a semaphore.
    pub(crate) fn reentrant(self) -> bool {
        matches!(
            self,
            Self::Mutex {
                reentrant: true,
                ..
            }
        )
    }

    /// What the handle is, as messages name it: `"mutex"` or `"semaphore"`.
    pub(crate) fn noun(self) -> &'static str {
        match self {
            Self::Mutex { .. } => "mutex",
            Self::Semaphore { .. } => "semaphore",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_mutex_has_its_options_and_only_a_semaphore_a_count() {
        let mutex = Product::Mutex {
            lock_intent: true,
            reentrant: false,
        };
        assert!(mutex.lock_intent() && !mutex.reentrant());
        assert_eq!((mutex.permits(), mutex.noun()), (None, "mutex"));
        let reentrant = Product::Mutex {
            lock_intent: false,
            reentrant: true,
        };
        assert!(!reentrant.lock_intent() && reentrant.reentrant());
        let semaphore = Product::Semaphore { permits: 3 };
        assert!(!semaphore.lock_intent() && !semaphore.reentrant());
        assert_eq!(
            (semaphore.permits(), semaphore.noun()),
            (Some(3), "semaphore")
        );
        assert!(!Product::default().lock_intent() && !Product::default().reentrant());
        assert_eq!(Product::default().permits(), None);
    }
}
