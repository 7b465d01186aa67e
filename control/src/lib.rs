//! callsmith-control: the control plane — v1 HTTP API, authentication and scope, the
//! store (SQLite or PostgreSQL), feature flags, the OpenAPI document and the web console.
//!
//! Entry points: [`store::Store::connect`] + [`store::Store::migrate`],
//! [`bootstrap::ensure_superuser`], [`api::AppState::new`] and [`api::router`].

pub mod adapters;
pub mod agent_settings;
pub mod api;
pub mod audio_ref;
pub mod auth;
pub mod bootstrap;
pub mod browser_calls;
pub mod catalog;
pub mod communication;
pub mod flags;
pub mod hangups;
pub mod ids;
pub mod live;
pub mod metrics;
pub mod objects;
pub mod outbound;
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
#[cfg(feature = "testing")]
pub mod testing;
pub mod text_enum;
pub mod text_field;
pub mod webhook;

pub use api::{AppState, openapi, router};
pub use services::Services;
pub use settings::Settings;
pub use store::Store;
