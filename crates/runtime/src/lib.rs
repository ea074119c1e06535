//! The runtime floor: how mcpd's actors run, talk and stay within their bounds.
//!
//! `tracker` spawns every task on one tracker so shutdown can wait for all of them;
//! `ask` is the request-and-reply between an actor and its handles; `budget` charges
//! bytes in flight against caps; `framing` reads bounded JSON-RPC lines; `outbox` writes
//! them in order behind a bounded queue; `trim` gives freed memory back to the system;
//! `private_file` writes files only their owner can read. It sits on `mcpd-wire` and
//! knows nothing of servers, agents or the daemon.

pub mod ask;
pub mod budget;
pub mod framing;
pub mod outbox;
pub mod private_file;
pub mod tracker;
pub mod trim;
