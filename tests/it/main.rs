//! Integration tests: the real `mcpd` binary, real fixture server processes, real sockets.

mod support;

mod failure;
mod foundation;
mod interop;
mod interop_http;
