//! The desktop keyring through the real daemon, against a throwaway gnome-keyring (`tests/keyring/with-keyring.sh`): secrets and OAuth logins kept there.

pub mod oauth;
pub mod secrets;
