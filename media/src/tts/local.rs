//! The local synthesizers: espeak-ng or flite run as a subprocess.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{TtsEngine, TtsError, TtsRequest};
use crate::prompt::Prompt;

/// Which local program speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LocalProgram {
    EspeakNg,
    Flite,
}

/// espeak-ng or flite run as a subprocess writing a WAV file (decoded as a prompt: 8 kHz,
/// and 16 kHz as well from a program writing 16 kHz or more, as espeak-ng's 22.05 kHz).
#[derive(Debug, Clone)]
pub struct LocalTts {
    pub program: LocalProgram,
}

struct TempFile(std::path::PathBuf);
impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[async_trait]
impl TtsEngine for LocalTts {
    async fn synthesize(&self, req: &TtsRequest) -> Result<Prompt, TtsError> {
        if req.text.trim().is_empty() {
            return Err(TtsError::EmptyText);
        }
        let file = TempFile(
            std::env::temp_dir().join(format!("callsmith-tts-{}.wav", rand::random::<u64>())),
        );
        let mut cmd = match self.program {
            LocalProgram::EspeakNg => {
                let mut c = tokio::process::Command::new("espeak-ng");
                let wpm = (175.0 * req.speed()).round() as u32;
                c.arg("-w").arg(&file.0).arg("-s").arg(wpm.to_string());
                let voice = if !req.voice.is_empty() {
                    req.voice.clone()
                } else {
                    language_to_espeak(&req.language)
                };
                if !voice.is_empty() {
                    c.arg("-v").arg(voice);
                }
                // "--" so text starting with '-' is not an option.
                c.arg("--").arg(&req.text);
                c
            }
            LocalProgram::Flite => {
                let mut c = tokio::process::Command::new("flite");
                if !req.voice.is_empty() {
                    c.arg("-voice").arg(&req.voice);
                }
                let stretch = 1.0 / req.speed();
                c.arg("--setf")
                    .arg(format!("duration_stretch={stretch:.3}"));
                c.arg("-t").arg(&req.text).arg("-o").arg(&file.0);
                c
            }
        };
        cmd.kill_on_drop(true).stdin(std::process::Stdio::null());
        let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .map_err(|_| TtsError::Synth("synthesizer timed out".into()))?
            .map_err(|e| TtsError::Synth(e.to_string()))?;
        if !out.status.success() {
            return Err(TtsError::Synth(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        let bytes = tokio::fs::read(&file.0)
            .await
            .map_err(|e| TtsError::Synth(e.to_string()))?;
        Ok(Prompt::decode_off_runtime(bytes, Some("wav".into())).await?)
    }
}

fn language_to_espeak(lang: &str) -> String {
    // espeak-ng voices are language tags: "en-us", "de", "fr"...
    lang.to_ascii_lowercase()
}
