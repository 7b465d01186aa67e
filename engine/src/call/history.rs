//! What a call's saved history records of its prompts and listen turns: the typed
//! history lives in [`callsmith_domain::communication::history`], read back by the API
//! and the tests with the same types.

pub(super) use callsmith_domain::communication::history::{
    BridgeSide, CallHistory, Direction, HangupLog, Heard, PromptLog, PromptOutcome, TransferLog,
    TransferMode, TransferResult, TurnLog,
};
