//! OAuth 2.1 for remote servers (MCP authorization, 2025-06-18 … 2026-07-28), the client side: challenges, discovery, registration, the authorization code grant, the credential store, and the actor that owns each server's login.

pub mod authorize;
pub mod challenge;
pub mod credential;
pub mod discovery;
pub mod flow;
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "the DPoP and private_key_jwt clients built on it come next; only its tests call it yet"
    )
)]
pub mod jose;
pub mod registration;
pub mod store;
pub mod wellknown;
