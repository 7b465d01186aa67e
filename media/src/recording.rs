//! Call recording: one stereo 8 kHz 16-bit WAV per session, caller on the
//! left channel, bot (what the engine sent) on the right. The media worker
//! hands frame pairs to a writer thread through a bounded queue (`try_send`;
//! a full queue drops the frame and counts it, never blocks the pacing loop).
//! When the recording stops, the file is uploaded through object_store.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use object_store::ObjectStore;
use thiserror::Error;

use crate::prompt::FRAME_SAMPLES;

#[derive(Debug, Error)]
pub enum RecordingError {
    #[error("recording file: {0}")]
    Io(String),
    #[error("storing recording: {0}")]
    Store(String),
}

/// One 20 ms stereo frame.
pub type FramePair = ([i16; FRAME_SAMPLES], [i16; FRAME_SAMPLES]);

/// Where a finished recording goes.
#[derive(Clone, Debug)]
pub struct RecordingTarget {
    pub store: Arc<dyn ObjectStore>,
    pub path: object_store::path::Path,
}

/// What a finished recording produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingInfo {
    pub path: String,
    pub bytes: u64,
    pub frames: u64,
    /// Frames dropped because the writer fell behind.
    pub dropped_frames: u64,
}

/// The worker-side end: pushes frames without blocking.
pub struct RecorderTap {
    tx: SyncSender<FramePair>,
    dropped: Arc<AtomicU64>,
}

impl RecorderTap {
    pub fn push(&self, caller: &[i16; FRAME_SAMPLES], bot: &[i16; FRAME_SAMPLES]) {
        match self.tx.try_send((*caller, *bot)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The control-side end: owns the writer thread.
pub struct Recorder {
    writer: Option<std::thread::JoinHandle<Result<(PathBuf, u64), RecordingError>>>,
    dropped: Arc<AtomicU64>,
    target: RecordingTarget,
    _dir: tempfile_dir::TempDir,
}

mod tempfile_dir {
    /// A private temp dir removed on drop (std only, no extra crate).
    pub struct TempDir(pub std::path::PathBuf);
    impl TempDir {
        pub fn new() -> std::io::Result<TempDir> {
            let p = std::env::temp_dir().join(format!(
                "callsmith-rec-{}-{}",
                std::process::id(),
                rand::random::<u64>()
            ));
            std::fs::create_dir_all(&p)?;
            Ok(TempDir(p))
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Recorder {
    /// Starts the writer thread; `queue_frames` bounds the hand-off queue.
    pub fn start(
        target: RecordingTarget,
        queue_frames: usize,
    ) -> Result<(Recorder, RecorderTap), RecordingError> {
        let dir = tempfile_dir::TempDir::new().map_err(|e| RecordingError::Io(e.to_string()))?;
        let file = dir.0.join("rec.wav");
        let (tx, rx) = sync_channel::<FramePair>(queue_frames.max(8));
        let dropped = Arc::new(AtomicU64::new(0));
        let writer = std::thread::Builder::new()
            .name("media-rec".into())
            .spawn(move || write_loop(file, rx))
            .map_err(|e| RecordingError::Io(e.to_string()))?;
        Ok((
            Recorder {
                writer: Some(writer),
                dropped: dropped.clone(),
                target,
                _dir: dir,
            },
            RecorderTap { tx, dropped },
        ))
    }

    /// Waits for the writer (the tap must have been dropped) and uploads the file.
    pub async fn finish(mut self) -> Result<RecordingInfo, RecordingError> {
        let writer = self
            .writer
            .take()
            .ok_or_else(|| RecordingError::Io("already finished".into()))?;
        let (file, frames) = tokio::task::spawn_blocking(move || writer.join())
            .await
            .map_err(|e| RecordingError::Io(e.to_string()))?
            .map_err(|_| RecordingError::Io("writer thread panicked".into()))??;
        let bytes = tokio::fs::read(&file)
            .await
            .map_err(|e| RecordingError::Io(e.to_string()))?;
        let len = bytes.len() as u64;
        self.target
            .store
            .put(&self.target.path, bytes.into())
            .await
            .map_err(|e| RecordingError::Store(e.to_string()))?;
        Ok(RecordingInfo {
            path: self.target.path.to_string(),
            bytes: len,
            frames,
            dropped_frames: self.dropped.load(Ordering::Relaxed),
        })
    }
}

fn write_loop(file: PathBuf, rx: Receiver<FramePair>) -> Result<(PathBuf, u64), RecordingError> {
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: 8000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let ioerr = |e: hound::Error| RecordingError::Io(e.to_string());
    let mut w = hound::WavWriter::create(&file, spec).map_err(ioerr)?;
    let mut frames = 0u64;
    // Ends when the tap (sender) is dropped.
    while let Ok((caller, bot)) = rx.recv() {
        for (c, b) in caller.iter().zip(bot.iter()) {
            w.write_sample(*c).map_err(ioerr)?;
            w.write_sample(*b).map_err(ioerr)?;
        }
        frames += 1;
    }
    w.finalize().map_err(ioerr)?;
    Ok((file, frames))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn writes_stereo_and_uploads() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let target = RecordingTarget {
            store: store.clone(),
            path: "calls/c1.wav".into(),
        };
        let (rec, tap) = Recorder::start(target, 16).unwrap();
        for i in 0..10 {
            tap.push(&[i as i16; FRAME_SAMPLES], &[-(i as i16); FRAME_SAMPLES]);
        }
        drop(tap);
        let info = rec.finish().await.unwrap();
        assert_eq!(info.frames, 10);
        let got = store
            .get(&"calls/c1.wav".into())
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let r = hound::WavReader::new(std::io::Cursor::new(got.to_vec())).unwrap();
        assert_eq!(r.spec().channels, 2);
        let s: Vec<i16> = r.into_samples::<i16>().map(|x| x.unwrap()).collect();
        assert_eq!(s.len(), 10 * 160 * 2);
        assert_eq!((s[2 * 160 * 3], s[2 * 160 * 3 + 1]), (3, -3));
    }
}
