//! callsmith-control: the HTTP front of the control plane — the v1 and legacy APIs,
//! request authentication and scope (extractors), the OpenAPI document and the web
//! console. What the APIs do lives beneath, in callsmith-domain (the store, the services,
//! the use cases); the handlers decode a request, call the domain and answer.
//!
//! Entry points: [`api::AppState::new`], [`api::router`] and [`api::serve`].

// The domain's modules under the names the handlers use (`crate::store::…`); they are
// callsmith-domain's, not re-exported: other crates name `callsmith_domain` themselves.
pub(crate) use callsmith_domain::{
    adapters, agent_settings, audio_ref, auth, catalog, communication, flags, guarded_http, ids,
    live_feed, metrics, objects, readiness, scenario_check, services, settings, sms_template,
    store, test_calls, text_enum, text_field, usecases,
};

pub mod api;
pub mod live_relay;
#[cfg(feature = "testing")]
pub mod testing;

pub use api::{AppState, openapi, router};
