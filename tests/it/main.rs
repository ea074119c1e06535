//! Integration tests: the real `mcpd` binary, real fixture server processes, real sockets.

mod support;

mod http_fixture;

mod adversarial;
mod eras;
mod failure;
mod foundation;
mod http;
mod http_fixture_selftest;
mod http_modern;
mod http_serve;
mod import;
mod interop;
mod interop_eras;
mod interop_http;
mod interop_http_serve;
mod naming;
mod profiles;
mod surface;
mod systemd;
