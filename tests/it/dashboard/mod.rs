//! The dashboard against the real daemon, most of it in a real Chromium.
//!
//! The browser harness and its own tests, logins, the live pages, its port, projects and
//! the sandbox shown.

pub mod browser;
pub mod browser_smoke;
pub mod launch;
pub mod live;
pub mod login;
pub mod port;
pub mod projects;
pub mod sandbox;
