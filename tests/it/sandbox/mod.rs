//! The Landlock sandbox and a confined server's namespaces.
//!
//! Escapes tried and refused, networks and hosts, caches, paths, cwd and temporary
//! directories.

pub mod caches;
pub mod cwd;
pub mod escapes;
pub mod hosts;
pub mod net;
pub mod ns;
pub mod paths;
pub mod tmp;
