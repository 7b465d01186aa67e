//! callsmith-scenarios: the scenario brick model, validation (SCN1xx codes), `{{placeholder}}`
//! templating, the sans-IO webhook parts and the interpreter that runs a scenario against one
//! call through the [`port::CallPort`] trait. It never touches sockets.
//!
//! Module map (behaviour is documented in `docs/bricks.md`, codes in `docs/scenario-codes.md`):
//! - [`model`]: serde types of the snapshot, lossless ([`opt::Opt`] fields + `extra` maps).
//! - [`canonical`]: canonical JSON and `content_hash`.
//! - [`mod@validate`] + [`codes`]: validation entries for `data.errors.scenario`.
//! - [`template`]: placeholder syntax and rendering.
//! - [`condition`]: condition_group operators.
//! - [`webhook`]: validate, compile, curl, response mapping, [`webhook::WebhookOutcome`].
//! - [`port`]: the call port trait and its value types.
//! - [`interpreter`]: [`interpreter::Program`] runs a snapshot for one call.
//! - [`turn`]: the call's turn logic as sans-IO machines (events and `now`
//!   in, actions and the next deadline out), which the engine drives from the call's I/O.
//! - [`history`]: the call history trace.
//! - [`testing`]: [`testing::ScriptedCall`] and a realistic scenario generator.
//! - [`walk`]: the generic field walk validation uses.

pub mod canonical;
pub mod codes;
pub mod condition;
pub mod entity;
pub mod history;
pub mod interpreter;
pub mod listening;
pub mod model;
pub mod opt;
pub mod port;
pub mod template;
pub mod testing;
pub mod turn;
pub mod validate;
pub mod walk;
pub mod webhook;

pub use canonical::{canonical_json, content_hash};
pub use codes::{Code, ScenarioError};
pub use interpreter::{CallDirection, CallInfo, CallRun, Program};
pub use model::Snapshot;
pub use port::CallPort;
pub use validate::{
    AcceptAll, RefProblem, Validation, ValidationContext, validate, validate_value,
};
pub use webhook::WebhookOutcome;
