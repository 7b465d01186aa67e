//! A synthesis URL: GET returning WAV, streamed into a growing source as it downloads.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;

use super::wav::{WavHeader, WavStreamDecoder, parse_wav_header};
use super::{TtsEngine, TtsError, TtsRequest};
use crate::prompt::{Prompt, StreamingAudio};

/// GETs a synthesis URL returning WAV. `url_template` placeholders
/// `{text}`, `{voice}`, `{language}`, `{model}`, `{speed}` are replaced URL-encoded.
#[derive(Debug, Clone)]
pub struct HttpTts {
    pub url_template: String,
    client: reqwest::Client,
}

impl HttpTts {
    pub fn new(url_template: impl Into<String>) -> HttpTts {
        HttpTts {
            url_template: url_template.into(),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap_or_default(),
        }
    }

    /// The request URL for `req`.
    pub fn url_for(&self, req: &TtsRequest) -> String {
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        self.url_template
            .replace("{text}", &enc(&req.text))
            .replace("{voice}", &enc(&req.voice))
            .replace("{language}", &enc(&req.language))
            .replace("{model}", &enc(&req.model))
            .replace("{speed}", &format!("{:.3}", req.speed()))
    }

    async fn get(&self, req: &TtsRequest) -> Result<reqwest::Response, TtsError> {
        if req.text.trim().is_empty() {
            return Err(TtsError::EmptyText);
        }
        let resp = self
            .client
            .get(self.url_for(req))
            .send()
            .await
            .map_err(|e| TtsError::Http(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(TtsError::Http(format!("status {}", resp.status())));
        }
        Ok(resp)
    }
}

#[async_trait]
impl TtsEngine for HttpTts {
    async fn synthesize(&self, req: &TtsRequest) -> Result<Prompt, TtsError> {
        let bytes = self
            .get(req)
            .await?
            .bytes()
            .await
            .map_err(|e| TtsError::Http(e.to_string()))?;
        Ok(Prompt::decode_off_runtime(bytes, Some("wav".into())).await?)
    }

    /// Streams 16-bit PCM WAV bodies into `out` as they download (resampled to its rate);
    /// other encodings are decoded once complete.
    async fn synthesize_into(
        &self,
        req: &TtsRequest,
        out: &StreamingAudio,
    ) -> Result<(), TtsError> {
        let resp = self.get(req).await?;
        let mut body = resp.bytes_stream();
        let mut head: Vec<u8> = Vec::new();
        let mut wav: Option<(WavStreamDecoder, usize)> = None;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| TtsError::Http(e.to_string()))?;
            match wav.as_mut() {
                Some((dec, _)) => out.push(&dec.feed(&chunk)?),
                None => {
                    head.extend_from_slice(&chunk);
                    match parse_wav_header(&head) {
                        WavHeader::Pcm16 {
                            rate,
                            channels,
                            data_offset,
                        } => {
                            let mut dec = WavStreamDecoder::new(rate, channels, out.rate())?;
                            out.push(&dec.feed(&head[data_offset..])?);
                            wav = Some((dec, data_offset));
                        }
                        WavHeader::NeedMore if head.len() < 64 * 1024 => {}
                        _ => {
                            // Not streamable: collect the rest and decode once.
                            while let Some(c) = body.next().await {
                                head.extend_from_slice(
                                    &c.map_err(|e| TtsError::Http(e.to_string()))?,
                                );
                            }
                            let p = Prompt::decode_off_runtime(head, None).await?;
                            out.push_prompt(&p);
                            return Ok(());
                        }
                    }
                }
            }
        }
        match wav.as_mut() {
            Some((dec, _)) => out.push(&dec.flush()?),
            None => {
                let p = Prompt::decode(&head, None)?;
                out.push_prompt(&p);
            }
        }
        Ok(())
    }
}
