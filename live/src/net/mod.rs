//! The network: how the generator talks to a server and how arrivals are stamped.
//!
//! * `http1`: the shard's own HTTP/1.1 client for plain `http://` targets, read by the
//!   request's own task, each read carrying the kernel's arrival stamp.
//! * [`client`]: the reqwest client (TLS trust, the bearer token) for everything else, and
//!   the questions asked of a server before a run (which model it serves).
//! * [`secret`]: the API key, checked before it is sent and scrubbed from every output.
//! * `receive_stamps`: the kernel's receive stamps (`SO_TIMESTAMPNS`) on a read.
//! * `yielding`: a connection that yields its thread after each write (the mock's, and the
//!   floor's writer), so the reader it woke runs first.
//!
//! Uses [`crate::time`] and [`crate::openai`] (to read a server's error body); knows
//! nothing of the mock, the generator or the audit.

pub mod client;
pub(crate) mod http1;
pub(crate) mod receive_stamps;
pub mod secret;
pub mod server;
pub(crate) mod yielding;
