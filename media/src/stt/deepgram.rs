//! The Deepgram-style streaming protocol (`/v1/listen`), as Deepgram documents it and the
//! local speech node serves it.
//!
//! The stream's options are query parameters of the websocket URL ([`listen_url`]); audio
//! goes up as binary frames of 16-bit little-endian PCM; the client's text messages are
//! `{"type":"KeepAlive"}` (while no audio flows, so the service does not close an idle
//! stream) and `{"type":"CloseStream"}` (flush and close).
//!
//! The service answers `Results` (a transcript, interim or final), `UtteranceEnd` (no word
//! for `utterance_end_ms`), `SpeechStarted` and `Metadata`; the local speech node also
//! `EndOfTurn` (its end-of-turn decision with the interim transcript it had, ahead of the
//! final: reported as an interim marked `end_of_turn`), and with its eager end of turn on
//! `EagerEndOfTurn` (the transcript so far after a short silence) and `TurnResumed` (the
//! caller went on: the eager one is taken back). A final `Results` closes one
//! *segment* of speech; the caller's turn ends only at a final with `speech_final: true`
//! (the service's endpointing), at an `UtteranceEnd`, at a final answering the client's
//! `Finalize` (`from_finalize`), or when the stream closes after `CloseStream` (what the
//! service finalized by then is the turn). [`TurnAssembler`] joins the segments of one
//! turn: a caller who pauses mid-sentence long enough for the service to finalize a
//! segment is not cut off there.

use super::{Eager, Parsed, SttNodeConfig, SttParams};

/// The stream URL: the node's URL (its own query kept) with the stream's options.
///
/// * `encoding=linear16`, `sample_rate` (8000, or 16000 on a wideband call:
///   [`SttParams::audio_rate`]), `channels=1`: the call's audio;
/// * `language`: the question's language, or `multi` with each candidate as
///   `detect_language` when the question names fallback languages;
/// * `interim_results`: as asked (the turn machine uses interim transcripts);
/// * `model`: the question's model, when it names one;
/// * `endpointing`: the question's `speech_timeout` in ms, or `false` without voice
///   activity detection;
/// * `utterance_end_ms`: the node's setting ([`SttNodeConfig::utterance_end_ms`]), which
///   Deepgram sends only with interim results: it is left out when they are off;
/// * `keyterm` (Nova-3 and the default model) or `keywords` (older models): the hints;
/// * `patience`: how soon the turn may end, to a node that takes it
///   ([`SttNodeConfig::turn_patience`], the local speech node's extension).
pub(super) fn listen_url(node: &SttNodeConfig, params: &SttParams) -> Result<String, String> {
    let mut u = url::Url::parse(&node.url).map_err(|e| e.to_string())?;
    {
        let mut q = u.query_pairs_mut();
        let languages = params.candidate_languages();
        let language = if languages.is_empty() {
            params.language.as_str()
        } else {
            "multi"
        };
        q.append_pair("encoding", "linear16")
            .append_pair("sample_rate", &params.audio_rate.hz().to_string())
            .append_pair("channels", "1")
            .append_pair("language", language)
            .append_pair(
                "interim_results",
                if params.interim_results {
                    "true"
                } else {
                    "false"
                },
            );
        if !params.model.is_empty() {
            q.append_pair("model", &params.model);
        }
        for l in languages {
            q.append_pair("detect_language", l);
        }
        if !params.vad_endpointing {
            q.append_pair("endpointing", "false");
        } else if let Some(ms) = params.endpointing_ms {
            q.append_pair("endpointing", &ms.to_string());
        }
        if let Some(ms) = node.utterance_end_ms.filter(|_| params.interim_results) {
            q.append_pair("utterance_end_ms", &ms.to_string());
        }
        let hint_key = if params.keyterms() {
            "keyterm"
        } else {
            "keywords"
        };
        for h in &params.hints {
            q.append_pair(hint_key, h);
        }
        if let Some(p) = params.patience_for(node) {
            q.append_pair("patience", p);
        }
    }
    Ok(u.to_string())
}

/// The client's message asking the service to flush and close the stream.
pub(super) const CLOSE_STREAM: &str = r#"{"type":"CloseStream"}"#;
/// The client's message keeping an idle stream open.
pub(super) const KEEP_ALIVE: &str = r#"{"type":"KeepAlive"}"#;

/// One service message, as the client uses it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Event {
    Results(Results),
    /// No word for `utterance_end_ms`; `last_word_end` in seconds of the stream.
    UtteranceEnd {
        last_word_end: Option<f64>,
    },
    /// The local speech node's end-of-turn decision, ahead of the final: the interim
    /// transcript it had then.
    EndOfTurn {
        text: String,
    },
    /// The local speech node's eager end of turn (after a short silence) with the turn's
    /// transcript so far, and its taking it back when the caller goes on.
    EagerEndOfTurn {
        text: String,
    },
    TurnResumed,
}

/// A `Results` message.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Results {
    pub text: String,
    pub is_final: bool,
    /// `speech_final`; absent from services that do not tell segments from turns (each
    /// final then ends the turn).
    pub speech_final: Option<bool>,
    /// The final answers the client's flush.
    pub from_finalize: bool,
    /// Where the speech ends, in seconds of the stream (`start + duration`).
    pub end_s: Option<f64>,
    /// The language a multilingual stream recognised.
    pub language: Option<String>,
}

/// Parses one service message; `None` for the ones the client does not use (`Metadata`,
/// `SpeechStarted`, anything unknown or malformed).
pub(super) fn parse(text: &str) -> Option<Event> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    match v.get("type").and_then(|t| t.as_str())? {
        "Results" => {
            let text = v
                .pointer("/channel/alternatives/0/transcript")
                .and_then(|t| t.as_str())?
                .to_string();
            let end_s = match (
                v.get("start").and_then(|s| s.as_f64()),
                v.get("duration").and_then(|d| d.as_f64()),
            ) {
                (Some(s), Some(d)) => Some(s + d),
                _ => None,
            };
            Some(Event::Results(Results {
                text,
                is_final: v.get("is_final").and_then(|f| f.as_bool()).unwrap_or(false),
                speech_final: v.get("speech_final").and_then(|f| f.as_bool()),
                from_finalize: v
                    .get("from_finalize")
                    .and_then(|f| f.as_bool())
                    .unwrap_or(false),
                end_s,
                language: v
                    .pointer("/channel/alternatives/0/languages/0")
                    .and_then(|l| l.as_str())
                    .filter(|l| !l.is_empty())
                    .map(str::to_string),
            }))
        }
        "UtteranceEnd" => Some(Event::UtteranceEnd {
            last_word_end: v.get("last_word_end").and_then(|e| e.as_f64()),
        }),
        "EndOfTurn" => Some(Event::EndOfTurn {
            text: v.get("transcript").and_then(|t| t.as_str())?.to_string(),
        }),
        "EagerEndOfTurn" => Some(Event::EagerEndOfTurn {
            text: v.get("transcript").and_then(|t| t.as_str())?.to_string(),
        }),
        "TurnResumed" => Some(Event::TurnResumed),
        _ => None,
    }
}

/// Joins the final segments of one caller turn into the turn's transcript (sans-IO: fed
/// the service's events, returns what the listener is told).
///
/// * an interim result is reported with the turn's finalized segments before it;
/// * a final segment that does not end the turn (`speech_final: false`) is kept and
///   reported as an interim of the turn so far;
/// * the turn's final is reported at a final with `speech_final` true (or absent), one
///   answering `Finalize` (`from_finalize`), an `UtteranceEnd` after finalized segments,
///   or at [`TurnAssembler::flush`] when the stream closes. Messages already on their way
///   when the client sends `CloseStream` keep their meaning: only the close ends the turn.
#[derive(Debug, Default)]
pub(super) struct TurnAssembler {
    segments: Vec<String>,
    end_s: Option<f64>,
    language: Option<String>,
}

impl TurnAssembler {
    pub fn on(&mut self, event: Event) -> Option<Parsed> {
        match event {
            Event::Results(r) if !r.is_final => {
                let text = self.joined_with(&r.text);
                if text.is_empty() {
                    return None;
                }
                Some(Parsed {
                    text,
                    is_final: false,
                    end_s: r.end_s,
                    language: r.language,
                    end_of_turn: false,
                    eager: None,
                })
            }
            Event::Results(r) => {
                let ends_turn = r.speech_final != Some(false) || r.from_finalize;
                self.keep(r.text, r.end_s, r.language);
                if ends_turn {
                    return Some(self.take());
                }
                self.so_far("", false, None)
            }
            Event::EndOfTurn { text } => self.so_far(&text, true, None),
            Event::EagerEndOfTurn { text } => self.so_far(&text, false, Some(Eager::EndOfTurn)),
            Event::TurnResumed => Some(Parsed {
                text: String::new(),
                is_final: false,
                end_s: None,
                language: None,
                end_of_turn: false,
                eager: Some(Eager::Resumed),
            }),
            Event::UtteranceEnd { last_word_end } => {
                if self.segments.is_empty() {
                    return None;
                }
                self.end_s = self.end_s.or(last_word_end);
                Some(self.take())
            }
        }
    }

    /// The segments the service finalized but no event ended (the stream closed): the
    /// turn's final, so no finalized word is lost.
    pub fn flush(&mut self) -> Option<Parsed> {
        (!self.segments.is_empty()).then(|| self.take())
    }

    fn keep(&mut self, text: String, end_s: Option<f64>, language: Option<String>) {
        let text = text.trim();
        if !text.is_empty() {
            self.segments.push(text.to_string());
        }
        if end_s.is_some() {
            self.end_s = end_s;
        }
        if language.is_some() {
            self.language = language;
        }
    }

    /// The turn so far (its finalized segments, then `interim`) as an interim result with
    /// the segments' end and language; `None` without a word.
    fn so_far(&self, interim: &str, end_of_turn: bool, eager: Option<Eager>) -> Option<Parsed> {
        let text = self.joined_with(interim);
        (!text.is_empty()).then(|| Parsed {
            text,
            is_final: false,
            end_s: self.end_s,
            language: self.language.clone(),
            end_of_turn,
            eager,
        })
    }

    fn joined_with(&self, interim: &str) -> String {
        let interim = interim.trim();
        let mut parts: Vec<&str> = self.segments.iter().map(String::as_str).collect();
        if !interim.is_empty() {
            parts.push(interim);
        }
        parts.join(" ")
    }

    fn take(&mut self) -> Parsed {
        Parsed {
            text: std::mem::take(&mut self.segments).join(" "),
            is_final: true,
            end_s: self.end_s.take(),
            language: self.language.take(),
            end_of_turn: false,
            eager: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results(text: &str, is_final: bool, speech_final: Option<bool>) -> Event {
        Event::Results(Results {
            text: text.into(),
            is_final,
            speech_final,
            from_finalize: false,
            end_s: None,
            language: None,
        })
    }

    fn said(p: Option<Parsed>) -> Option<(String, bool)> {
        p.map(|p| (p.text, p.is_final))
    }

    #[test]
    fn parses_the_messages_the_client_uses() {
        let r = r#"{"type":"Results","channel_index":[0,1],"duration":0.5,"start":1.0,"is_final":true,"speech_final":false,"channel":{"alternatives":[{"transcript":"yes","confidence":0.9,"languages":["fr"]}]}}"#;
        assert_eq!(
            parse(r),
            Some(Event::Results(Results {
                text: "yes".into(),
                is_final: true,
                speech_final: Some(false),
                from_finalize: false,
                end_s: Some(1.5),
                language: Some("fr".into()),
            }))
        );
        assert_eq!(
            parse(r#"{"type":"UtteranceEnd","channel":[0,1],"last_word_end":2.395}"#),
            Some(Event::UtteranceEnd {
                last_word_end: Some(2.395)
            })
        );
        for ignored in [
            r#"{"type":"Metadata","request_id":"x"}"#,
            r#"{"type":"SpeechStarted","channel":[0,1],"timestamp":0.2}"#,
            r#"{"type":"Results"}"#,
            "not json",
        ] {
            assert_eq!(parse(ignored), None, "{ignored}");
        }
    }

    /// A caller who pauses mid-sentence: the service finalizes the first segment
    /// (`speech_final: false`), the turn ends at the second's `speech_final`.
    #[test]
    fn segments_of_one_turn_are_joined_until_speech_final() {
        let mut t = TurnAssembler::default();
        assert_eq!(
            said(t.on(results("I'd like to", false, Some(false)))),
            Some(("I'd like to".into(), false))
        );
        assert_eq!(
            said(t.on(results("I'd like to", true, Some(false)))),
            Some(("I'd like to".into(), false)),
            "a finalized segment is not the end of the turn"
        );
        assert_eq!(
            said(t.on(results("maybe next", false, Some(false)))),
            Some(("I'd like to maybe next".into(), false))
        );
        assert_eq!(
            said(t.on(results("maybe next week", true, Some(true)))),
            Some(("I'd like to maybe next week".into(), true))
        );
        // The next turn starts empty.
        assert_eq!(
            said(t.on(results("yes", true, Some(true)))),
            Some(("yes".into(), true))
        );
    }

    /// The node's end-of-turn event is an interim of the turn so far, marked; the final
    /// still ends the turn.
    #[test]
    fn the_end_of_turn_event_is_a_marked_interim_of_the_turn() {
        let mut t = TurnAssembler::default();
        assert_eq!(
            parse(r#"{"type":"EndOfTurn","transcript":"yes please","uncovered_ms":120}"#),
            Some(Event::EndOfTurn {
                text: "yes please".into()
            })
        );
        t.on(results("I'd like", true, Some(false)));
        let p = t
            .on(Event::EndOfTurn {
                text: "maybe next week".into(),
            })
            .unwrap();
        assert!(p.end_of_turn && !p.is_final);
        assert_eq!(p.text, "I'd like maybe next week");
        assert_eq!(
            t.on(Event::EndOfTurn { text: " ".into() }).map(|p| p.text),
            Some("I'd like".into())
        );
        let f = t.on(results("maybe next week", true, Some(true))).unwrap();
        assert!(f.is_final && !f.end_of_turn);
        assert!(
            TurnAssembler::default()
                .on(Event::EndOfTurn { text: "".into() })
                .is_none()
        );
    }

    /// The node's eager end of turn is the turn so far, marked eager; its taking back is
    /// a marked empty result; neither ends the turn.
    #[test]
    fn the_eager_end_of_turn_and_its_taking_back_are_marked() {
        assert_eq!(
            parse(r#"{"type":"EagerEndOfTurn","transcript":"yes"}"#),
            Some(Event::EagerEndOfTurn { text: "yes".into() })
        );
        assert_eq!(parse(r#"{"type":"TurnResumed"}"#), Some(Event::TurnResumed));
        let mut t = TurnAssembler::default();
        t.on(results("I'd like", true, Some(false)));
        let p = t
            .on(Event::EagerEndOfTurn {
                text: "to pay".into(),
            })
            .unwrap();
        assert_eq!(p.eager, Some(Eager::EndOfTurn));
        assert!(!p.is_final && !p.end_of_turn);
        assert_eq!(p.text, "I'd like to pay");
        let r = t.on(Event::TurnResumed).unwrap();
        assert_eq!(r.eager, Some(Eager::Resumed));
        let f = t.on(results("to pay my bill", true, Some(true))).unwrap();
        assert!(f.is_final && f.eager.is_none());
        assert_eq!(f.text, "I'd like to pay my bill");
    }

    #[test]
    fn utterance_end_ends_a_turn_of_finalized_segments() {
        let mut t = TurnAssembler::default();
        assert_eq!(
            t.on(Event::UtteranceEnd {
                last_word_end: None
            }),
            None
        );
        t.on(results("five five five", true, Some(false)));
        let end = t.on(Event::UtteranceEnd {
            last_word_end: Some(3.2),
        });
        assert_eq!(
            end.map(|p| (p.text, p.is_final, p.end_s)),
            Some(("five five five".into(), true, Some(3.2)))
        );
        assert_eq!(
            t.on(Event::UtteranceEnd {
                last_word_end: None
            }),
            None
        );
    }

    #[test]
    fn a_final_without_speech_final_ends_the_turn() {
        let mut t = TurnAssembler::default();
        assert_eq!(
            said(t.on(results("yes", true, None))),
            Some(("yes".into(), true))
        );
        // An empty final still ends the turn (nothing was said).
        assert_eq!(
            said(t.on(results("", true, None))),
            Some((String::new(), true))
        );
    }

    #[test]
    fn the_finalize_answer_and_the_close_end_the_turn() {
        let mut t = TurnAssembler::default();
        t.on(results("my number is", true, Some(false)));
        let flushed = t.on(Event::Results(Results {
            text: "five".into(),
            is_final: true,
            speech_final: Some(false),
            from_finalize: true,
            end_s: Some(4.0),
            language: None,
        }));
        assert_eq!(said(flushed), Some(("my number is five".into(), true)));
        // Segments finalized before the stream closed that no later final ended.
        assert_eq!(
            said(t.on(results("and", true, Some(false)))),
            Some(("and".into(), false))
        );
        t.on(results("then", true, Some(false)));
        assert_eq!(said(t.flush()), Some(("and then".into(), true)));
        assert_eq!(said(t.flush()), None);
    }
}
