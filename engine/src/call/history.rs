//! What a call's saved history records of its prompts and listen turns: the typed
//! history lives in [`callsmith_control::communication::history`], read back by the API
//! and the tests with the same types.

pub(super) use callsmith_control::communication::history::{
    CallHistory, HangupLog, PromptLog, TransferLog, TurnLog,
};
