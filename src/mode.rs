//! Read or write.

/// Whether a [`Guard`](crate::Guard) holds the lock shared (read) or exclusive (write).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Shared: any number of readers together, no writer. The reader's id is a member of
    /// the Redis set at the lock key.
    Read,
    /// Exclusive: one writer, no readers. The lock key is a Redis string holding the
    /// writer's id.
    Write,
}
