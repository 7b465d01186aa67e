//! Browser test calls: the HTTP layer checks the request and builds the communication
//! (`POST /v1/communication/-/browser-call`), the engine answers the browser's WebRTC offer
//! and runs the call on this node through the same lifecycle as SIP calls. The engine
//! installs its [`BrowserCallRunner`] at start; a process without one (the control API
//! alone) answers 503.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;

use crate::store::{CommunicationRecord, NewCommunication};

/// A browser call that started: its row (claimed by this node, `in_progress`) and the SDP
/// answer for the browser.
#[derive(Debug, Clone)]
pub struct BrowserCallStarted {
    pub communication: CommunicationRecord,
    pub sdp: String,
}

/// Why a browser call did not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BrowserCallError {
    /// The offer cannot be answered (not SDP, neither Opus nor PCMU audio, no usable
    /// candidate).
    #[error("{0}")]
    InvalidOffer(String),
    /// The node cannot take the call now (draining, at capacity, no media resources, the
    /// database not answering).
    #[error("{0}")]
    Unavailable(String),
}

/// Starts browser calls; implemented by the engine.
#[async_trait]
pub trait BrowserCallRunner: Send + Sync + 'static {
    /// Answers `offer` and starts the call `new` on this node; `record` records it as an
    /// agent with `call_recording` would.
    async fn start(
        &self,
        new: NewCommunication,
        offer: &str,
        record: bool,
    ) -> Result<BrowserCallStarted, BrowserCallError>;
}

/// Where the engine's runner is installed.
#[derive(Default)]
pub struct BrowserCalls {
    runner: OnceLock<Arc<dyn BrowserCallRunner>>,
}

impl std::fmt::Debug for BrowserCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserCalls")
            .field("installed", &self.runner.get().is_some())
            .finish()
    }
}

impl BrowserCalls {
    /// Installs the runner (the first one installed stays).
    pub fn install(&self, runner: Arc<dyn BrowserCallRunner>) {
        let _ = self.runner.set(runner);
    }

    /// The runner, when this process runs calls.
    pub fn runner(&self) -> Option<Arc<dyn BrowserCallRunner>> {
        self.runner.get().cloned()
    }
}
