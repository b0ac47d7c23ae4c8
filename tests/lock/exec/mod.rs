//! `WriteGuard::exec`, `ReadGuard::exec` (reads only) and `Permit::exec`: a pipeline that
//! runs only while the lock is still the guard's, in one step with that check.

mod holders;
mod input;
mod lost_update;
mod read;
