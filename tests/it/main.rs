//! Integration tests placeholder.
