//! Hostile input and hostile servers: odd and huge names and keys, a server that
//! refuses (OOM, READONLY, NOAUTH, NOPERM), and a server busy in a script or too slow.

mod busy;
mod names;
mod server;
