//! The sans-IO core of the chat streams (see `adapters::llm`): [`SseDecoder`] turns bytes
//! of server-sent events into their `data:` payloads, [`Accumulator`] turns chat chunks
//! into assistant content and assembled [`ToolCall`]s.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A function call: its name and its arguments as a JSON-encoded string.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
}

/// A tool call of the assistant.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCall {
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

pub(super) fn function_type() -> String {
    "function".into()
}

/// Splits a byte stream of server-sent events into the payloads of its `data:` lines
/// (one payload per event; multi-line data joined with `\n`).
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    data: Vec<String>,
}

impl SseDecoder {
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    out.push(self.data.join("\n"));
                    self.data.clear();
                }
            } else if let Some(rest) = line.strip_prefix("data:") {
                self.data
                    .push(rest.strip_prefix(' ').unwrap_or(rest).to_string());
            }
            // Comments (":"), event:, id: and retry: lines carry nothing we use.
        }
        out
    }

    /// The pending event when the stream ends without a blank line.
    pub fn finish(&mut self) -> Option<String> {
        let rest = String::from_utf8_lossy(&std::mem::take(&mut self.buf)).to_string();
        if let Some(d) = rest.trim_end().strip_prefix("data:") {
            self.data.push(d.trim_start().to_string());
        }
        (!self.data.is_empty()).then(|| std::mem::take(&mut self.data).join("\n"))
    }
}

/// What a chunk did to the stream.
#[derive(Debug, Clone, PartialEq)]
pub enum ChunkEffect {
    Continue,
    /// `[DONE]`.
    Done,
    /// An `{"error": …}` payload: message and integer code (0 when unset).
    Error(String, i64),
}

/// Accumulates chat-completion chunks.
#[derive(Debug, Default, Clone)]
pub struct Accumulator {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
}

impl Accumulator {
    /// Applies one `data:` payload. Unparseable payloads are an error of the upstream.
    pub fn apply(&mut self, payload: &str) -> ChunkEffect {
        let payload = payload.trim();
        if payload == "[DONE]" {
            return ChunkEffect::Done;
        }
        let v: Value = match serde_json::from_str(payload) {
            Ok(v) => v,
            Err(e) => return ChunkEffect::Error(format!("unparseable stream chunk: {e}"), 0),
        };
        if let Some(err) = v.get("error") {
            let msg = err["message"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| err.to_string());
            return ChunkEffect::Error(msg, err["code"].as_i64().unwrap_or(0));
        }
        for choice in v["choices"].as_array().into_iter().flatten() {
            if choice["index"].as_u64().unwrap_or(0) != 0 {
                continue;
            }
            let delta = &choice["delta"];
            if let Some(c) = delta["content"].as_str() {
                self.content.push_str(c);
            }
            for tc in delta["tool_calls"].as_array().into_iter().flatten() {
                let i = tc["index"].as_u64().unwrap_or(self.tool_calls.len() as u64) as usize;
                if i > 64 {
                    continue;
                }
                while self.tool_calls.len() <= i {
                    self.tool_calls.push(ToolCall {
                        kind: function_type(),
                        ..Default::default()
                    });
                }
                let slot = &mut self.tool_calls[i];
                if let Some(id) = tc["id"].as_str() {
                    slot.id = id.to_string();
                }
                if let Some(n) = tc["function"]["name"].as_str() {
                    slot.function.name.push_str(n);
                }
                if let Some(a) = tc["function"]["arguments"].as_str() {
                    slot.function.arguments.push_str(a);
                }
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                self.finish_reason = Some(f.to_string());
            }
        }
        ChunkEffect::Continue
    }
}

impl Accumulator {
    /// Takes a whole (non-streamed) chat completion: `choices[0].message` (content, tool
    /// calls) and its finish reason, or its `error`.
    pub fn apply_completion(&mut self, body: &[u8]) -> Result<(), (String, i64)> {
        let v: Value =
            serde_json::from_slice(body).map_err(|e| (format!("unparseable answer: {e}"), 0))?;
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let msg = err["message"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| err.to_string());
            return Err((msg, err["code"].as_i64().unwrap_or(0)));
        }
        let choice = v["choices"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["index"].as_u64().unwrap_or(0) == 0))
            .ok_or_else(|| ("the answer has no choices".to_string(), 0))?;
        let message = &choice["message"];
        if let Some(c) = message["content"].as_str() {
            self.content.push_str(c);
        }
        if let Some(calls) = message.get("tool_calls").filter(|c| c.is_array()) {
            self.tool_calls = serde_json::from_value(calls.clone())
                .map_err(|e| (format!("unparseable tool calls: {e}"), 0))?;
        }
        self.finish_reason = choice["finish_reason"].as_str().map(String::from);
        Ok(())
    }
}
