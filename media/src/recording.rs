//! Call recording: one stereo 16-bit WAV per session, caller on the left
//! channel, bot (what the engine sent) on the right, at the session's audio rate
//! when the recording starts (16 kHz for a G.722 call, 8 kHz for G.711; frames of
//! another rate after a codec change are converted to the file's). The media worker
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
use crate::rate::{AudioRate, MAX_FRAME_SAMPLES};

#[derive(Debug, Error)]
pub enum RecordingError {
    #[error("recording file: {0}")]
    Io(String),
    #[error("storing recording: {0}")]
    Store(String),
}

/// 160 stereo samples at a rate: 20 ms at 8 kHz, 10 ms at 16 kHz (a wideband session
/// sends two per tick, so the queue's slots are the same size for every session).
pub type FramePair = (AudioRate, [i16; FRAME_SAMPLES], [i16; FRAME_SAMPLES]);

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
    /// 160-sample stereo frames written (20 ms each at 8 kHz, 10 ms each at 16 kHz).
    pub frames: u64,
    /// The file's sample rate.
    pub sample_rate: u32,
    /// Frames dropped because the writer fell behind.
    pub dropped_frames: u64,
}

/// The worker-side end: pushes frames without blocking.
pub struct RecorderTap {
    tx: SyncSender<FramePair>,
    dropped: Arc<AtomicU64>,
}

impl RecorderTap {
    /// Queues one 20 ms frame of each party at `rate` (`rate.frame_samples()` samples each).
    pub fn push(&self, rate: AudioRate, caller: &[i16], bot: &[i16]) {
        let n = rate.frame_samples();
        for (c, b) in caller[..n]
            .chunks_exact(FRAME_SAMPLES)
            .zip(bot[..n].chunks_exact(FRAME_SAMPLES))
        {
            let mut pair = (rate, [0; FRAME_SAMPLES], [0; FRAME_SAMPLES]);
            pair.1.copy_from_slice(c);
            pair.2.copy_from_slice(b);
            match self.tx.try_send(pair) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// The control-side end: owns the writer thread.
pub struct Recorder {
    writer: Option<std::thread::JoinHandle<Result<Written, RecordingError>>>,
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
    /// Starts the writer thread; `queue_frames` bounds the hand-off queue (in
    /// [`FramePair`]s).
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
        let (file, frames, sample_rate) = tokio::task::spawn_blocking(move || writer.join())
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
            sample_rate,
            dropped_frames: self.dropped.load(Ordering::Relaxed),
        })
    }
}

type Written = (PathBuf, u64, u32);

/// Writes the frames to `file`, at the rate of the first one (8 kHz when none came).
fn write_loop(file: PathBuf, rx: Receiver<FramePair>) -> Result<Written, RecordingError> {
    let first = rx.recv().ok();
    let rate = first.map_or(AudioRate::Narrow, |f| f.0);
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: rate.hz(),
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let ioerr = |e: hound::Error| RecordingError::Io(e.to_string());
    let mut w = hound::WavWriter::create(&file, spec).map_err(ioerr)?;
    let mut frames = 0u64;
    let (mut caller, mut bot) = ([0; MAX_FRAME_SAMPLES], [0; MAX_FRAME_SAMPLES]);
    // Ends when the tap (sender) is dropped.
    for (at, c, b) in first.into_iter().chain(rx.iter()) {
        let n = FRAME_SAMPLES * rate.factor() / at.factor();
        crate::rate::convert(&c, at, &mut caller[..n], rate);
        crate::rate::convert(&b, at, &mut bot[..n], rate);
        for (c, b) in caller[..n].iter().zip(&bot[..n]) {
            w.write_sample(*c).map_err(ioerr)?;
            w.write_sample(*b).map_err(ioerr)?;
        }
        frames += 1;
    }
    w.finalize().map_err(ioerr)?;
    Ok((file, frames, rate.hz()))
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
            tap.push(
                AudioRate::Narrow,
                &[i as i16; FRAME_SAMPLES],
                &[-(i as i16); FRAME_SAMPLES],
            );
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
        assert_eq!((r.spec().sample_rate, info.sample_rate), (8000, 8000));
        let s: Vec<i16> = r.into_samples::<i16>().map(|x| x.unwrap()).collect();
        assert_eq!(s.len(), 10 * 160 * 2);
        assert_eq!((s[2 * 160 * 3], s[2 * 160 * 3 + 1]), (3, -3));
    }
}
