//! callsmith-scenarios: the scenario brick model, validation (SCN1xx codes), `{{placeholder}}`
//! templating, the sans-IO webhook parts and the interpreter that runs a scenario against one
//! call through the [`port::CallPort`] trait. It never touches sockets.
//!
//! Module map:
//! - [`model`]: serde types of the snapshot, lossless ([`opt::Opt`] + `extra` maps).
//! - [`canonical`]: canonical JSON and `content_hash`.
//! - [`validate`] + [`codes`]: validation entries for `data.errors.scenario`.
//! - [`template`]: placeholder syntax and rendering.
//! - [`condition`]: condition_group operators.
//! - [`webhook`]: compile, curl, response mapping, `WebhookOutcome`.

pub mod canonical;
pub mod codes;
pub mod condition;
pub mod history;
pub mod interpreter;
pub mod model;
pub mod opt;
pub mod port;
pub mod template;
pub mod testing;
pub mod validate;
pub mod walk;
pub mod webhook;

pub use canonical::{canonical_json, content_hash};
pub use codes::{Code, ScenarioError};
pub use model::Snapshot;
pub use validate::{AcceptAll, ValidationContext, validate, validate_value};
