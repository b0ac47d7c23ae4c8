//! Fencing tokens: the counter that never goes back, the fence keys, and the order in
//! which tokens are handed out.

mod counter;
mod keys;
mod order;
