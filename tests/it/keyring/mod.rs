//! The desktop keyring through the real daemon: secrets and OAuth logins kept there.
//!
//! The keyring is a throwaway gnome-keyring (`tests/keyring/with-keyring.sh`).

pub mod oauth;
pub mod secrets;
