//! callsmith-engine: the call runtime. SIP and browser call legs through one call
//! lifecycle ([`call`]), the dialer, inbound calls, result delivery, the call journal,
//! the local speech node, the configuration of a node and `callsmith load`. It works on
//! the domain (callsmith-domain: the store, the services, the use cases) and knows no
//! HTTP: the `callsmith` binary (engine/cli, package callsmith-cli) wires it to the HTTP
//! control API (callsmith-control) through [`process::ControlApi`].

pub mod browser;
pub mod call;
pub mod cluster;
pub mod config;
pub mod delivery;
pub mod dialer;
pub mod inbound;
pub mod journal;
pub mod load;
pub mod logging;
pub mod node;
pub mod pacing;
pub mod persist;
pub mod process;
pub mod runtime;
pub mod speech;

pub use process::{ControlApi, ControlApiFactory, Node, open_store, serve, start};
