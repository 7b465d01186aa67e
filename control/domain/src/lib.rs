//! callsmith-domain: what the control plane does, beneath every front end. The store
//! (SQLite or PostgreSQL), the shared [`Services`], authentication primitives (principals,
//! capabilities, tokens, password hashing), settings, and the use cases themselves
//! ([`usecases`]: dispatch, test calls, the browser-call and inbound rows…). The HTTP
//! APIs (callsmith-control), the call runtime (callsmith-engine) and the load generator
//! call the same operations; none of them is known here: this crate has no HTTP server,
//! router or OpenAPI dependency. The optional `openapi` feature, turned on only by the
//! HTTP crate, derives the OpenAPI schemas of the domain types that API serves as they are.
//!
//! Entry points: [`store::Store::connect`] + [`store::Store::migrate`],
//! [`bootstrap::ensure_superuser`] and [`Services::new`].

pub mod adapters;
pub mod agent_settings;
pub mod audio_ref;
pub mod auth;
pub mod bootstrap;
pub mod browser_calls;
pub mod catalog;
pub mod communication;
pub mod flags;
pub mod guarded_http;
pub mod hangups;
pub mod ids;
pub mod live_feed;
pub mod metrics;
pub mod objects;
pub mod reach;
pub mod readiness;
pub mod recipient_zones;
pub mod scenario_check;
pub mod schedule;
pub mod services;
pub mod settings;
pub mod sms;
pub mod sms_template;
pub mod store;
pub mod strategy;
pub mod test_calls;
pub mod text_enum;
pub mod text_field;
pub mod usecases;
pub mod webhook;

pub use services::Services;
pub use settings::Settings;
pub use store::Store;
