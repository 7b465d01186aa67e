//! Prompts: audio decoded once to 8 kHz mono, pre-encoded to both G.711 laws,
//! and shared across calls through `Arc`, so playing a prompt on the hot path
//! is a slice copy. A source of 16 kHz or more is also kept at 16 kHz, for
//! wideband (G.722) sessions ([`AudioRate`]). Also the growing source
//! (`StreamingAudio`) used for streamed synthesis and for bridging two sessions.
//!
//! Decoding: WAV through hound (falling back to symphonia for formats hound
//! does not read, e.g. µ-law WAV), MP3/OGG-Vorbis/FLAC through symphonia;
//! any rate and channel count is mixed to mono and resampled with rubato.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use thiserror::Error;

use crate::g711::Codec;
use crate::rate::AudioRate;

/// Telephony sample rate.
pub const SAMPLE_RATE: u32 = 8000;
/// Samples in one 20 ms frame at 8 kHz.
pub const FRAME_SAMPLES: usize = 160;

/// Why audio could not be loaded.
#[derive(Debug, Error)]
pub enum PromptError {
    #[error("cannot decode audio: {0}")]
    Decode(String),
    #[error("cannot resample audio: {0}")]
    Resample(String),
    #[error("cannot fetch audio from {source_ref}: {message}")]
    Fetch { source_ref: String, message: String },
    #[error("audio source is empty")]
    Empty,
}

/// A decoded prompt: 8 kHz mono samples plus both G.711 encodings, and 16 kHz samples
/// when its source had them.
#[derive(Debug)]
pub struct Prompt {
    pcm: Vec<i16>,
    ulaw: Vec<u8>,
    alaw: Vec<u8>,
    /// The 16 kHz samples, twice as many as `pcm`, when the source was 16 kHz or more.
    wide: Option<Vec<i16>>,
}

impl Prompt {
    /// Builds a prompt from 8 kHz mono samples; the length is padded to whole 20 ms frames with silence.
    pub fn from_pcm(mut pcm: Vec<i16>) -> Prompt {
        let rem = pcm.len() % FRAME_SAMPLES;
        if rem != 0 {
            pcm.resize(pcm.len() + FRAME_SAMPLES - rem, 0);
        }
        let ulaw = pcm.iter().map(|s| Codec::Pcmu.encode(*s)).collect();
        let alaw = pcm.iter().map(|s| Codec::Pcma.encode(*s)).collect();
        Prompt {
            pcm,
            ulaw,
            alaw,
            wide: None,
        }
    }

    /// Builds a prompt from the same audio at 8 kHz (`pcm`) and at 16 kHz (`wide`), for
    /// narrowband and wideband sessions; the 16 kHz samples are padded or cut to twice the
    /// (padded) 8 kHz length.
    pub fn from_pcm_wide(pcm: Vec<i16>, mut wide: Vec<i16>) -> Prompt {
        let mut p = Prompt::from_pcm(pcm);
        wide.resize(p.pcm.len() * 2, 0);
        p.wide = Some(wide);
        p
    }

    /// Builds a prompt from samples at `rate`: 16 kHz samples are also decimated to 8 kHz
    /// (the proper resampler, [`resample`], is for whole decoded files).
    pub fn from_pcm_at(pcm: Vec<i16>, rate: AudioRate) -> Prompt {
        match rate {
            AudioRate::Narrow => Prompt::from_pcm(pcm),
            AudioRate::Wide => {
                let narrow = crate::rate::samples_at(&pcm, rate, AudioRate::Narrow).collect();
                Prompt::from_pcm_wide(narrow, pcm)
            }
        }
    }

    /// [`Prompt::decode`] on tokio's blocking pool: decoding and resampling a whole file
    /// takes milliseconds of CPU that would hold up the runtime's other tasks.
    pub async fn decode_off_runtime<B>(
        bytes: B,
        extension_hint: Option<String>,
    ) -> Result<Prompt, PromptError>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        tokio::task::spawn_blocking(move || {
            Prompt::decode(bytes.as_ref(), extension_hint.as_deref())
        })
        .await
        .map_err(|e| PromptError::Decode(e.to_string()))?
    }

    /// Decodes any supported container at any rate/channel count; a source of 16 kHz or
    /// more is kept at 16 kHz as well.
    pub fn decode(bytes: &[u8], extension_hint: Option<&str>) -> Result<Prompt, PromptError> {
        let (samples, rate) = decode_mono(bytes, extension_hint)?;
        let pcm = resample_to_8k(&samples, rate)?;
        if pcm.is_empty() {
            return Err(PromptError::Empty);
        }
        match AudioRate::for_source(rate) {
            AudioRate::Wide => {
                let wide = resample(&samples, rate, AudioRate::Wide.hz())?;
                Ok(Prompt::from_pcm_wide(pcm, wide))
            }
            AudioRate::Narrow => Ok(Prompt::from_pcm(pcm)),
        }
    }

    /// The 8 kHz samples.
    pub fn pcm(&self) -> &[i16] {
        &self.pcm
    }

    /// The 16 kHz samples, when the source had them.
    pub fn wide(&self) -> Option<&[i16]> {
        self.wide.as_deref()
    }

    /// The frame starting at 8 kHz sample `from`, at `rate`, into `out` (one frame at that
    /// rate): 16 kHz from the prompt's own samples when it has them, else doubled.
    pub fn frame_into(&self, from: usize, rate: AudioRate, out: &mut [i16]) {
        let narrow = &self.pcm[from..from + FRAME_SAMPLES];
        match (rate, &self.wide) {
            (AudioRate::Narrow, _) => out[..FRAME_SAMPLES].copy_from_slice(narrow),
            (AudioRate::Wide, Some(w)) => {
                out[..2 * FRAME_SAMPLES].copy_from_slice(&w[2 * from..2 * (from + FRAME_SAMPLES)])
            }
            (AudioRate::Wide, None) => crate::rate::upsample_2x(narrow, out),
        }
    }

    /// The pre-encoded bytes for `codec`.
    pub fn encoded(&self, codec: Codec) -> &[u8] {
        match codec {
            Codec::Pcmu => &self.ulaw,
            Codec::Pcma => &self.alaw,
        }
    }

    /// Number of 20 ms frames.
    pub fn frames(&self) -> usize {
        self.pcm.len() / FRAME_SAMPLES
    }

    /// Duration in milliseconds.
    pub fn duration_ms(&self) -> u64 {
        self.pcm.len() as u64 * 1000 / SAMPLE_RATE as u64
    }
}

/// A growing source at 8 or 16 kHz ([`AudioRate`]): a producer pushes samples while the
/// player drains them one frame per tick, at the player's rate (converted when the two
/// differ). Used for streamed synthesis and session bridges. The player only `try_lock`s,
/// so a busy producer costs a silent frame, never a stall.
#[derive(Debug)]
pub struct StreamingAudio {
    inner: Mutex<StreamState>,
    /// Oldest samples are dropped beyond this many (bridges keep latency bounded).
    max_buffered: usize,
    rate: AudioRate,
}

#[derive(Debug)]
struct StreamState {
    samples: VecDeque<i16>,
    finished: bool,
    /// Everything pushed, when the source keeps a copy (to cache a streamed synthesis).
    history: Option<Vec<i16>>,
    /// Sources that play the same audio from its start ([`StreamingAudio::follow`]):
    /// everything pushed here is pushed to them, and they finish with this one.
    followers: Vec<Arc<StreamingAudio>>,
    /// When the first samples were pushed ([`crate::clock::now_ns`]).
    first_audio_ns: Option<u64>,
    /// Sources that get everything pushed here but are not finished with it
    /// ([`StreamingAudio::pass_to`]).
    passed_to: Vec<Arc<StreamingAudio>>,
    /// Samples are dropped until the first audible one ([`StreamingAudio::trim_leading_silence`]).
    trim_leading: bool,
}

/// What a player got from a growing source this tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFrame {
    /// A full frame was copied out.
    Frame,
    /// No full frame available yet (the player sends silence).
    Starved,
    /// The producer finished and everything was played.
    Finished,
}

/// A sample whose magnitude is at most this (about −60 dBFS) is silence at the start of
/// synthesised speech ([`StreamingAudio::trim_leading_silence`]).
pub const LEADING_SILENCE_LEVEL: i16 = 32;

/// The index of the first sample above [`LEADING_SILENCE_LEVEL`] (`pcm.len()` when there
/// is none).
pub fn audible_from(pcm: &[i16]) -> usize {
    pcm.iter()
        .position(|s| s.unsigned_abs() > LEADING_SILENCE_LEVEL as u16)
        .unwrap_or(pcm.len())
}

/// Samples a [`StreamingAudio`] reserves up front: 0.1 s at 8 kHz.
const INITIAL_CAPACITY: usize = 800;

impl StreamingAudio {
    /// An 8 kHz source that buffers at most `max_buffered` samples (oldest dropped first).
    pub fn new(max_buffered: usize) -> Arc<StreamingAudio> {
        Self::build(AudioRate::Narrow, max_buffered, None)
    }

    /// A source of samples at `rate` that buffers at most `max_buffered` of them.
    pub fn new_at(rate: AudioRate, max_buffered: usize) -> Arc<StreamingAudio> {
        Self::build(rate, max_buffered, None)
    }

    /// Like `new`, and keeps a copy of everything pushed (see `take_history`).
    pub fn new_with_history(max_buffered: usize) -> Arc<StreamingAudio> {
        Self::build(AudioRate::Narrow, max_buffered, Some(Vec::new()))
    }

    /// Like `new_at`, and keeps a copy of everything pushed (see `take_history`).
    pub fn new_with_history_at(rate: AudioRate, max_buffered: usize) -> Arc<StreamingAudio> {
        Self::build(rate, max_buffered, Some(Vec::new()))
    }

    /// The rate of the samples pushed and kept.
    pub fn rate(&self) -> AudioRate {
        self.rate
    }

    fn build(
        rate: AudioRate,
        max_buffered: usize,
        history: Option<Vec<i16>>,
    ) -> Arc<StreamingAudio> {
        Arc::new(StreamingAudio {
            rate,
            inner: Mutex::new(StreamState {
                // Grows with the producer; a streamed synthesis may be bounded only by
                // `usize::MAX / 2`, and reserving its worst case up front cost 128 KiB.
                samples: VecDeque::with_capacity(max_buffered.min(INITIAL_CAPACITY)),
                finished: false,
                history,
                followers: Vec::new(),
                first_audio_ns: None,
                passed_to: Vec::new(),
                trim_leading: false,
            }),
            max_buffered: max_buffered.max(rate.frame_samples()),
        })
    }

    /// Drops what is pushed until its first audible sample (above
    /// [`LEADING_SILENCE_LEVEL`]), from then on nothing: a synthesis starts with its
    /// speech, not with the tens of milliseconds of silence synthesisers put before it
    /// (Piper: 40–60 ms), which a caller waiting for a reply would hear as latency. Its
    /// history, followers and first audio time start there too.
    pub fn trim_leading_silence(&self) {
        self.inner.lock().trim_leading = true;
    }

    /// Everything pushed so far (empty unless built with `new_with_history`).
    pub fn take_history(&self) -> Vec<i16> {
        self.inner.lock().history.take().unwrap_or_default()
    }

    /// Samples pushed so far, when the source keeps its history.
    pub fn history_len(&self) -> usize {
        self.inner.lock().history.as_ref().map_or(0, Vec::len)
    }

    /// A copy of the history from sample `from` on (empty without history).
    pub fn history_since(&self, from: usize) -> Vec<i16> {
        let s = self.inner.lock();
        s.history
            .as_ref()
            .and_then(|h| h.get(from..))
            .map(<[i16]>::to_vec)
            .unwrap_or_default()
    }

    /// When the first samples were pushed ([`crate::clock::now_ns`]): for a synthesis, its
    /// first audio. A follower's first audio is its start when it follows a source that
    /// has audio already.
    pub fn first_audio_ns(&self) -> Option<u64> {
        self.inner.lock().first_audio_ns
    }

    /// Another source of the same audio from its start, for another player, buffering at
    /// most `max_buffered` samples: it gets what was pushed so far (this source must keep
    /// its history, see `new_with_history`), then everything pushed here, and finishes
    /// with this source.
    pub fn follow(&self, max_buffered: usize) -> Arc<StreamingAudio> {
        let mut s = self.inner.lock();
        let f = StreamingAudio::new_at(self.rate, max_buffered);
        if let Some(h) = &s.history {
            f.push(h);
        }
        if s.finished {
            f.finish();
        } else {
            s.followers.push(f.clone());
        }
        f
    }

    /// Passes everything pushed here from now on to `target` as well (its history is not
    /// replayed, and finishing this source does not finish `target`): a part of a longer
    /// source that keeps its own copy.
    pub fn pass_to(&self, target: Arc<StreamingAudio>) {
        self.inner.lock().passed_to.push(target);
    }

    /// Appends samples at `rate`, converted to the source's own rate.
    pub fn push_from(&self, pcm: &[i16], rate: AudioRate) {
        if rate == self.rate {
            return self.push(pcm);
        }
        let mut buf = [0i16; crate::rate::MAX_FRAME_SAMPLES];
        let step = (crate::rate::MAX_FRAME_SAMPLES / 2).max(1);
        for chunk in pcm.chunks(step) {
            let n = chunk.len() * self.rate.factor() / rate.factor();
            crate::rate::convert(chunk, rate, &mut buf[..n], self.rate);
            self.push(&buf[..n]);
        }
    }

    /// Appends a prompt's audio at the source's rate: its 16 kHz samples to a wideband
    /// source when it has them.
    pub fn push_prompt(&self, p: &Prompt) {
        match (self.rate, p.wide()) {
            (AudioRate::Wide, Some(w)) => self.push(w),
            _ => self.push_from(p.pcm(), AudioRate::Narrow),
        }
    }

    /// Appends samples at the source's rate ([`Self::rate`]).
    pub fn push(&self, pcm: &[i16]) {
        let mut s = self.inner.lock();
        if s.finished {
            return;
        }
        let pcm = if s.trim_leading {
            let from = audible_from(pcm);
            if from == pcm.len() {
                return;
            }
            s.trim_leading = false;
            &pcm[from..]
        } else {
            pcm
        };
        if s.first_audio_ns.is_none() && !pcm.is_empty() {
            s.first_audio_ns = Some(crate::clock::now_ns());
        }
        for f in s.followers.iter().chain(&s.passed_to) {
            f.push(pcm);
        }
        if let Some(h) = s.history.as_mut() {
            h.extend_from_slice(pcm);
        }
        s.samples.extend(pcm.iter().copied());
        let excess = s.samples.len().saturating_sub(self.max_buffered);
        if excess > 0 {
            s.samples.drain(..excess);
        }
    }

    /// Marks the end of the source; the player completes once it has drained.
    pub fn finish(&self) {
        let mut s = self.inner.lock();
        s.finished = true;
        for f in s.followers.drain(..) {
            f.finish();
        }
    }

    /// True once `finish` was called.
    pub fn is_finished(&self) -> bool {
        self.inner.lock().finished
    }

    /// Samples waiting to be played.
    pub fn buffered(&self) -> usize {
        self.inner.lock().samples.len()
    }

    /// Takes one 8 kHz frame (player side, non-blocking).
    pub fn take_frame(&self, out: &mut [i16; FRAME_SAMPLES]) -> StreamFrame {
        self.take_frame_as(AudioRate::Narrow, out)
    }

    /// Takes one 20 ms frame at `rate` into `out[..rate.frame_samples()]` (player side,
    /// non-blocking), converted when the source's rate is another.
    pub fn take_frame_as(&self, rate: AudioRate, out: &mut [i16]) -> StreamFrame {
        let Some(mut s) = self.inner.try_lock() else {
            return StreamFrame::Starved;
        };
        let n = self.rate.frame_samples();
        let mut own = [0i16; crate::rate::MAX_FRAME_SAMPLES];
        if s.samples.len() >= n {
            for (o, v) in own.iter_mut().zip(s.samples.drain(..n)) {
                *o = v;
            }
        } else if s.finished {
            if s.samples.is_empty() {
                return StreamFrame::Finished;
            }
            for (o, v) in own.iter_mut().zip(s.samples.drain(..)) {
                *o = v;
            }
        } else {
            return StreamFrame::Starved;
        }
        crate::rate::convert(&own[..n], self.rate, out, rate);
        StreamFrame::Frame
    }
}

/// Something a session can play.
#[derive(Debug, Clone)]
pub enum Playable {
    Prompt(Arc<Prompt>),
    Stream(Arc<StreamingAudio>),
}

impl From<Arc<Prompt>> for Playable {
    fn from(p: Arc<Prompt>) -> Self {
        Playable::Prompt(p)
    }
}

impl From<Arc<StreamingAudio>> for Playable {
    fn from(s: Arc<StreamingAudio>) -> Self {
        Playable::Stream(s)
    }
}

/// Decodes to mono f32 at the source rate.
pub fn decode_mono(
    bytes: &[u8],
    extension_hint: Option<&str>,
) -> Result<(Vec<f32>, u32), PromptError> {
    if bytes.len() >= 12
        && &bytes[..4] == b"RIFF"
        && &bytes[8..12] == b"WAVE"
        && let Ok(r) = decode_wav_hound(bytes)
    {
        return Ok(r);
    }
    // symphonia parses untrusted uploads and panics on some malformed input (a
    // WAVE_FORMAT_EXTENSIBLE header with 32 or more channels overflows a shift in its channel
    // mask code). Everything it touches is local to this call, so a panic is a decode error.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        decode_symphonia(bytes, extension_hint)
    }))
    .unwrap_or_else(|_| {
        Err(PromptError::Decode(
            "malformed audio: the decoder panicked".into(),
        ))
    })
}

fn decode_wav_hound(bytes: &[u8]) -> Result<(Vec<f32>, u32), PromptError> {
    let reader = hound::WavReader::new(std::io::Cursor::new(bytes))
        .map_err(|e| PromptError::Decode(e.to_string()))?;
    let spec = reader.spec();
    let channels = spec.channels.max(1) as usize;
    let interleaved: Vec<f32> = match spec.sample_format {
        hound::SampleFormat::Float => reader
            .into_samples::<f32>()
            .collect::<Result<_, _>>()
            .map_err(|e| PromptError::Decode(e.to_string()))?,
        hound::SampleFormat::Int => {
            let scale = 1.0 / (1u64 << (spec.bits_per_sample.clamp(1, 32) - 1)) as f32;
            reader
                .into_samples::<i32>()
                .map(|s| s.map(|v| v as f32 * scale))
                .collect::<Result<_, _>>()
                .map_err(|e| PromptError::Decode(e.to_string()))?
        }
    };
    Ok((mix_down(&interleaved, channels), spec.sample_rate))
}

fn mix_down(interleaved: &[f32], channels: usize) -> Vec<f32> {
    if channels <= 1 {
        return interleaved.to_vec();
    }
    interleaved
        .chunks_exact(channels)
        .map(|c| c.iter().sum::<f32>() / channels as f32)
        .collect()
}

fn decode_symphonia(
    bytes: &[u8],
    extension_hint: Option<&str>,
) -> Result<(Vec<f32>, u32), PromptError> {
    use symphonia::core::audio::SampleBuffer;
    use symphonia::core::codecs::DecoderOptions;
    use symphonia::core::errors::Error as SymErr;
    use symphonia::core::formats::FormatOptions;
    use symphonia::core::io::MediaSourceStream;
    use symphonia::core::meta::MetadataOptions;
    use symphonia::core::probe::Hint;

    let derr = |e: SymErr| PromptError::Decode(e.to_string());
    let mss = MediaSourceStream::new(
        Box::new(std::io::Cursor::new(bytes.to_vec())),
        Default::default(),
    );
    let mut hint = Hint::new();
    if let Some(ext) = extension_hint {
        hint.with_extension(ext);
    }
    let probed = symphonia::default::get_probe()
        .format(
            &hint,
            mss,
            &FormatOptions::default(),
            &MetadataOptions::default(),
        )
        .map_err(derr)?;
    let mut format = probed.format;
    let track = format
        .default_track()
        .ok_or_else(|| PromptError::Decode("no audio track".into()))?
        .clone();
    let mut decoder = symphonia::default::get_codecs()
        .make(&track.codec_params, &DecoderOptions::default())
        .map_err(derr)?;
    let mut rate = track.codec_params.sample_rate.unwrap_or(0);
    let mut out = Vec::new();
    loop {
        let packet = match format.next_packet() {
            Ok(p) => p,
            Err(SymErr::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(SymErr::ResetRequired) => break,
            Err(e) => return Err(derr(e)),
        };
        if packet.track_id() != track.id {
            continue;
        }
        let decoded = match decoder.decode(&packet) {
            Ok(d) => d,
            Err(SymErr::DecodeError(_)) => continue, // skip a corrupt packet, as players do
            Err(e) => return Err(derr(e)),
        };
        let spec = *decoded.spec();
        rate = spec.rate;
        let channels = spec.channels.count().max(1);
        let mut buf = SampleBuffer::<f32>::new(decoded.capacity() as u64, spec);
        buf.copy_interleaved_ref(decoded);
        out.extend(mix_down(buf.samples(), channels));
    }
    if rate == 0 {
        return Err(PromptError::Decode("unknown sample rate".into()));
    }
    Ok((out, rate))
}

/// Source sample rates [`resample_to_8k`] accepts. The rate comes from the file's header: the
/// FFT resampler's plan is sized by `rate / gcd(rate, 8000)` (a header claiming ~1 GHz plans
/// for ever), and a tiny rate multiplies the output length by `8000 / rate`.
pub const SOURCE_RATES: std::ops::RangeInclusive<u32> = 1_000..=384_000;

/// Resamples mono f32 to 8 kHz i16.
pub fn resample_to_8k(samples: &[f32], rate: u32) -> Result<Vec<i16>, PromptError> {
    resample(samples, rate, SAMPLE_RATE)
}

/// Resamples mono f32 at `rate` to i16 at `target` (8000 or 16000).
pub fn resample(samples: &[f32], rate: u32, target: u32) -> Result<Vec<i16>, PromptError> {
    use rubato::{FftFixedInOut, Resampler};
    let to_i16 = |v: f32| (v * 32768.0).round().clamp(-32768.0, 32767.0) as i16;
    if rate == target {
        return Ok(samples.iter().map(|v| to_i16(*v)).collect());
    }
    if !SOURCE_RATES.contains(&rate) {
        return Err(PromptError::Resample(format!(
            "sample rate {rate} Hz outside {}..={} Hz",
            SOURCE_RATES.start(),
            SOURCE_RATES.end()
        )));
    }
    // A float WAV may carry any bit pattern: rubato's FFT panics on a spectrum holding NaN or
    // infinity (huge finite samples overflow to infinity there). Out-of-range samples are
    // clipped to full scale, as the i16 conversion does anyway; NaN and infinity become 0.
    let clipped: Vec<f32>;
    let samples = if samples.iter().all(|v| v.abs() <= 1.0) {
        samples
    } else {
        clipped = samples
            .iter()
            .map(|v| {
                if v.is_finite() {
                    v.clamp(-1.0, 1.0)
                } else {
                    0.0
                }
            })
            .collect();
        &clipped
    };
    let rerr = |e: &dyn std::fmt::Display| PromptError::Resample(e.to_string());
    let mut rs =
        FftFixedInOut::<f32>::new(rate as usize, target as usize, 1024, 1).map_err(|e| rerr(&e))?;
    let expected = (samples.len() as u64 * target as u64 / rate as u64) as usize;
    let delay = rs.output_delay();
    let mut out: Vec<f32> = Vec::with_capacity(expected + delay + 2048);
    let mut pos = 0;
    while samples.len() - pos >= rs.input_frames_next() {
        let n = rs.input_frames_next();
        let r = rs
            .process(&[&samples[pos..pos + n]], None)
            .map_err(|e| rerr(&e))?;
        out.extend_from_slice(&r[0]);
        pos += n;
    }
    if pos < samples.len() {
        let r = rs
            .process_partial(Some(&[&samples[pos..]]), None)
            .map_err(|e| rerr(&e))?;
        out.extend_from_slice(&r[0]);
    }
    let mut guard = 0;
    while out.len() < expected + delay && guard < 16 {
        let r = rs
            .process_partial::<&[f32]>(None, None)
            .map_err(|e| rerr(&e))?;
        out.extend_from_slice(&r[0]);
        guard += 1;
    }
    Ok(out
        .iter()
        .skip(delay)
        .take(expected)
        .map(|v| to_i16(*v))
        .collect())
}

fn extension_of(source: &str) -> Option<&str> {
    let path = source.split(['?', '#']).next().unwrap_or(source);
    let name = path.rsplit('/').next().unwrap_or(path);
    name.rsplit_once('.').map(|(_, e)| e)
}

/// Decoded prompts shared across calls: a recorded prompt is fetched, decoded and
/// resampled once, and every call that plays it holds the same [`Arc<Prompt>`].
///
/// Keyed by the caller's identity of the audio (for stored audio, its path and version,
/// so a replaced object is a new key and read again). Concurrent first plays of one key
/// decode once: the others wait for that result. A failed load is not kept, so the next
/// play tries again. Bounded by entries and by decoded bytes; the least recently played
/// prompt is evicted first, and a prompt larger than the whole byte budget is decoded for
/// its call and not kept.
#[derive(Debug)]
pub struct PromptCache {
    inner: Mutex<CacheInner>,
    max_entries: usize,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct CacheInner {
    map: HashMap<String, Slot>,
    tick: u64,
    bytes: usize,
}

#[derive(Debug)]
struct Slot {
    cell: Arc<tokio::sync::OnceCell<Arc<Prompt>>>,
    used: u64,
    /// Decoded bytes counted in [`CacheInner::bytes`] (0 while loading).
    bytes: usize,
}

/// Default byte budget of [`PromptCache::new`]: 64 MiB, about 4.6 hours of 8 kHz audio
/// (2.3 hours of prompts that also keep 16 kHz samples).
pub const PROMPT_CACHE_BYTES: usize = 64 << 20;

impl Prompt {
    /// Memory the decoded prompt holds (samples at each rate and both encodings).
    pub fn memory_bytes(&self) -> usize {
        let wide = self.wide.as_ref().map_or(0, Vec::len);
        (self.pcm.len() + wide) * std::mem::size_of::<i16>() + self.ulaw.len() + self.alaw.len()
    }
}

impl PromptCache {
    /// A cache of at most `max_entries` prompts and [`PROMPT_CACHE_BYTES`].
    pub fn new(max_entries: usize) -> PromptCache {
        PromptCache::with_budget(max_entries, PROMPT_CACHE_BYTES)
    }

    /// A cache of at most `max_entries` prompts and `max_bytes` of decoded audio.
    pub fn with_budget(max_entries: usize, max_bytes: usize) -> PromptCache {
        PromptCache {
            inner: Mutex::new(CacheInner::default()),
            max_entries: max_entries.max(1),
            max_bytes,
        }
    }

    /// The cached prompt for `key`, if any.
    pub fn get(&self, key: &str) -> Option<Arc<Prompt>> {
        let mut g = self.inner.lock();
        g.tick += 1;
        let tick = g.tick;
        let slot = g.map.get_mut(key)?;
        slot.used = tick;
        slot.cell.get().cloned()
    }

    /// Inserts a decoded prompt under `key`.
    pub fn insert(&self, key: String, prompt: Arc<Prompt>) {
        let cell = Arc::new(tokio::sync::OnceCell::new_with(Some(prompt.clone())));
        let mut g = self.inner.lock();
        g.tick += 1;
        let used = g.tick;
        if let Some(old) = g.map.insert(
            key.clone(),
            Slot {
                cell,
                used,
                bytes: 0,
            },
        ) {
            g.bytes -= old.bytes;
        }
        self.account(&mut g, &key, &prompt);
    }

    /// Counts a loaded prompt against the budget and evicts the least recently played
    /// others until it fits (or drops it when it alone is over the budget).
    fn account(&self, g: &mut CacheInner, key: &str, prompt: &Prompt) {
        let size = prompt.memory_bytes();
        let Some(slot) = g.map.get_mut(key) else {
            return;
        };
        if slot.bytes == 0 && slot.cell.initialized() {
            slot.bytes = size;
            g.bytes += size;
        }
        if size > self.max_bytes {
            if let Some(s) = g.map.remove(key) {
                g.bytes -= s.bytes;
            }
            return;
        }
        while g.bytes > self.max_bytes || g.map.len() > self.max_entries {
            let Some(victim) = g
                .map
                .iter()
                .filter(|(k, _)| k.as_str() != key)
                .min_by_key(|(_, s)| s.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(s) = g.map.remove(&victim) {
                g.bytes -= s.bytes;
            }
        }
    }

    /// The cached prompt for `key`, or the bytes `fetch` returns decoded (off the async
    /// threads) and cached under `key`; callers asking for a key that is being loaded wait
    /// for that load. The file type is guessed from the path part of `key` (before any `?`
    /// or `#`). Fetching is the caller's: this crate reads no files and no URLs, so who may
    /// read what is decided where the reference is resolved.
    pub async fn get_or_load<F, Fut>(&self, key: &str, fetch: F) -> Result<Arc<Prompt>, PromptError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Vec<u8>, PromptError>>,
    {
        let cell = {
            let mut g = self.inner.lock();
            g.tick += 1;
            let used = g.tick;
            let slot = g.map.entry(key.to_string()).or_insert_with(|| Slot {
                cell: Arc::new(tokio::sync::OnceCell::new()),
                used,
                bytes: 0,
            });
            slot.used = used;
            slot.cell.clone()
        };
        let ext = extension_of(key).map(str::to_owned);
        let loaded = cell
            .get_or_try_init(|| async move {
                let bytes = fetch().await?;
                let prompt =
                    tokio::task::spawn_blocking(move || Prompt::decode(&bytes, ext.as_deref()))
                        .await
                        .map_err(|e| PromptError::Decode(e.to_string()))??;
                Ok::<_, PromptError>(Arc::new(prompt))
            })
            .await
            .cloned();
        let mut g = self.inner.lock();
        let ours = g.map.get(key).is_some_and(|s| Arc::ptr_eq(&s.cell, &cell));
        match loaded {
            Ok(prompt) => {
                if ours {
                    self.account(&mut g, key, &prompt);
                }
                Ok(prompt)
            }
            Err(e) => {
                // Not kept: the next play loads again.
                if ours && !cell.initialized() {
                    g.map.remove(key);
                }
                Err(e)
            }
        }
    }

    pub fn len(&self) -> usize {
        self.inner.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decoded bytes held.
    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthesis starts with its speech: the silence before its first audible sample
    /// is not played, kept or passed on; silence after it is.
    #[test]
    fn leading_silence_is_trimmed_up_to_the_first_audible_sample() {
        let src = StreamingAudio::new_with_history(10_000);
        src.trim_leading_silence();
        let follower = src.follow(10_000);
        src.push(&[0; 400]);
        src.push(&[3, -20, 32, -32]);
        assert_eq!(src.history_len(), 0, "nothing audible yet");
        assert_eq!(src.first_audio_ns(), None, "no audio yet");
        src.push(&[5, -33, 0, 400]);
        src.push(&[0, 1, 0]);
        src.push(&[100; FRAME_SAMPLES]);
        let history = src.take_history();
        assert_eq!(&history[..6], [-33, 0, 400, 0, 1, 0]);
        assert_eq!(history.len(), 6 + FRAME_SAMPLES);
        assert!(src.first_audio_ns().is_some());
        let mut frame = [0i16; FRAME_SAMPLES];
        assert_eq!(follower.take_frame(&mut frame), StreamFrame::Frame);
        assert_eq!(
            &frame[..6],
            &[-33, 0, 400, 0, 1, 0],
            "the follower starts there too"
        );
        let untrimmed = StreamingAudio::new_with_history(10_000);
        untrimmed.push(&[0, 0, 7]);
        assert_eq!(
            untrimmed.take_history(),
            [0, 0, 7],
            "other sources keep everything"
        );
        assert_eq!(audible_from(&[0; 5]), 5);
    }

    #[test]
    fn from_pcm_pads_to_frames_and_encodes() {
        let p = Prompt::from_pcm(vec![1000; 200]);
        assert_eq!(p.frames(), 2);
        assert_eq!(p.encoded(Codec::Pcmu).len(), 320);
        assert_eq!(p.encoded(Codec::Pcmu)[0], Codec::Pcmu.encode(1000));
        assert_eq!(p.encoded(Codec::Pcma)[319], Codec::Pcma.encode(0));
        assert_eq!(p.duration_ms(), 40);
    }

    #[test]
    fn resample_keeps_length_and_tone() {
        let rate = 22050;
        let src: Vec<f32> = (0..rate)
            .map(|i| (i as f32 * 2.0 * std::f32::consts::PI * 440.0 / rate as f32).sin() * 0.5)
            .collect();
        let out = resample_to_8k(&src, rate as u32).unwrap();
        assert_eq!(out.len(), 8000);
        // Zero crossings of a 440 Hz tone over one second: ~880.
        let zc = out
            .windows(2)
            .filter(|w| (w[0] >= 0) != (w[1] >= 0))
            .count();
        assert!((860..=900).contains(&zc), "zero crossings {zc}");
    }

    #[test]
    fn a_16k_source_keeps_16k_samples_counted_in_the_cache_budget() {
        let tone = |rate: u32| {
            let pcm: Vec<i16> = (0..rate)
                .map(|i| {
                    let t = i as f32 / rate as f32;
                    ((t * 2.0 * std::f32::consts::PI * 6000.0).sin() * 8000.0) as i16
                })
                .collect();
            wav_at(&pcm, rate)
        };
        let p = Prompt::decode(&tone(16000), Some("wav")).unwrap();
        let wide = p.wide().expect("16 kHz kept");
        assert_eq!((p.pcm().len(), wide.len()), (8000, 16000));
        assert_eq!(p.memory_bytes(), 8000 * 4 + 16000 * 2);
        // The 6 kHz tone lives in the 16 kHz samples only.
        let level = |x: &[i16]| x.iter().map(|v| (*v as f64).abs()).sum::<f64>() / x.len() as f64;
        assert!(level(&wide[800..15000]) > 3000.0);
        assert!(level(&p.pcm()[400..7500]) < 300.0);
        let mut f = [0i16; 320];
        p.frame_into(160, AudioRate::Wide, &mut f);
        assert_eq!(f[..], wide[320..640]);
        // 48 kHz sources keep 16 kHz too; narrowband ones do not.
        assert!(Prompt::decode(&tone(48000), None).unwrap().wide().is_some());
        assert!(Prompt::decode(&tone(11025), None).unwrap().wide().is_none());
    }

    #[test]
    fn streaming_audio_plays_at_the_players_rate() {
        let s = StreamingAudio::new_at(AudioRate::Wide, 16000);
        s.push(&[100; 320]);
        s.push_from(&[300; 160], AudioRate::Narrow);
        let mut narrow = [0i16; FRAME_SAMPLES];
        assert_eq!(s.take_frame(&mut narrow), StreamFrame::Frame);
        assert_eq!(narrow, [100; FRAME_SAMPLES]);
        let mut wide = [0i16; 320];
        assert_eq!(
            s.take_frame_as(AudioRate::Wide, &mut wide),
            StreamFrame::Frame
        );
        assert_eq!(wide, [300; 320]);
    }

    #[test]
    fn streaming_audio_frames_and_finish() {
        let s = StreamingAudio::new(8000);
        let mut f = [0i16; FRAME_SAMPLES];
        assert_eq!(s.take_frame(&mut f), StreamFrame::Starved);
        s.push(&[5; 200]);
        assert_eq!(s.take_frame(&mut f), StreamFrame::Frame);
        assert_eq!(s.take_frame(&mut f), StreamFrame::Starved);
        s.finish();
        assert_eq!(s.take_frame(&mut f), StreamFrame::Frame);
        assert_eq!(f[39], 5);
        assert_eq!(f[40], 0);
        assert_eq!(s.take_frame(&mut f), StreamFrame::Finished);
        let bounded = StreamingAudio::new(320);
        bounded.push(&[1; 1000]);
        assert_eq!(bounded.buffered(), 320);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(Prompt::decode(b"not audio at all, certainly not", None).is_err());
        assert!(Prompt::decode(b"RIFF\0\0\0\0WAVEjunk", Some("wav")).is_err());
    }

    #[test]
    fn extension_is_found() {
        assert_eq!(extension_of("http://x/a/b.mp3?sig=1"), Some("mp3"));
        assert_eq!(extension_of("/tmp/x.flac"), Some("flac"));
    }

    #[test]
    fn header_rates_outside_the_supported_range_are_refused() {
        let tone = vec![0.1f32; 64];
        // A header claiming ~1 GHz would plan an FFT of that size; 1 Hz would multiply the
        // output 8000 times.
        for rate in [0, 1, 999, 384_001, 1_056_975_633] {
            assert!(matches!(
                resample_to_8k(&tone, rate),
                Err(PromptError::Resample(_))
            ));
        }
        assert!(resample_to_8k(&tone, 384_000).is_ok());
        assert!(resample_to_8k(&tone, 1_000).is_ok());
    }

    #[test]
    fn non_finite_and_huge_samples_resample_without_panicking() {
        let mut s = vec![0.25f32; 2048];
        s[10] = f32::NAN;
        s[20] = f32::INFINITY;
        s[30] = -1.7e33;
        let out = resample_to_8k(&s, 48_000).unwrap();
        assert_eq!(out.len(), 2048 * 8000 / 48_000);
    }

    /// A mono 16-bit WAV of `pcm` at `rate`.
    fn wav_at(pcm: &[i16], rate: u32) -> Vec<u8> {
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut out = std::io::Cursor::new(Vec::new());
        let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
        for s in pcm {
            w.write_sample(*s).unwrap();
        }
        w.finalize().unwrap();
        out.into_inner()
    }

    /// `samples` of an 8 kHz sawtooth, as a WAV.
    fn wav(samples: usize) -> Vec<u8> {
        let pcm: Vec<i16> = (0..samples).map(|i| ((i % 50) as i16 - 25) * 400).collect();
        wav_at(&pcm, SAMPLE_RATE)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_first_plays_of_one_prompt_decode_it_once() {
        let cache = Arc::new(PromptCache::new(8));
        let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..32 {
            let (cache, fetches) = (cache.clone(), fetches.clone());
            tasks.push(tokio::spawn(async move {
                cache
                    .get_or_load("obj/acc/a.wav#v1", || async move {
                        fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        Ok(wav(8000))
                    })
                    .await
                    .unwrap()
            }));
        }
        let mut prompts = Vec::new();
        for t in tasks {
            prompts.push(t.await.unwrap());
        }
        assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(prompts.iter().all(|p| Arc::ptr_eq(p, &prompts[0])));
        assert_eq!(cache.bytes(), prompts[0].memory_bytes());
        assert_eq!(prompts[0].memory_bytes(), 8000 * 4);
    }

    #[tokio::test]
    async fn a_failed_load_is_not_kept_and_a_new_version_is_a_new_prompt() {
        let cache = PromptCache::new(8);
        let e = cache
            .get_or_load("a.wav#v1", || async {
                Err(PromptError::Fetch {
                    source_ref: "a.wav".into(),
                    message: "storage down".into(),
                })
            })
            .await;
        assert!(e.is_err());
        assert!(cache.is_empty());
        let v1 = cache
            .get_or_load("a.wav#v1", || async { Ok(wav(1600)) })
            .await
            .unwrap();
        let v2 = cache
            .get_or_load("a.wav#v2", || async { Ok(wav(3200)) })
            .await
            .unwrap();
        assert_eq!((v1.frames(), v2.frames()), (10, 20));
        // Undecodable bytes are an error, not a panic, and not kept either.
        assert!(
            cache
                .get_or_load("b.wav#v1", || async { Ok(b"not audio".to_vec()) })
                .await
                .is_err()
        );
        assert_eq!(cache.len(), 2);
    }

    #[tokio::test]
    async fn the_least_recently_played_prompt_leaves_first_when_bytes_run_out() {
        // Room for two prompts of 1600 samples (6400 bytes each), not three.
        let cache = PromptCache::with_budget(100, 14_000);
        for k in ["a.wav", "b.wav"] {
            cache
                .get_or_load(k, || async { Ok(wav(1600)) })
                .await
                .unwrap();
        }
        assert!(cache.get("a.wav").is_some()); // a played again: b is now the oldest
        cache
            .get_or_load("c.wav", || async { Ok(wav(1600)) })
            .await
            .unwrap();
        assert!(cache.get("b.wav").is_none());
        assert!(cache.get("a.wav").is_some() && cache.get("c.wav").is_some());
        assert_eq!(cache.bytes(), 2 * 6400);
        // A prompt over the whole budget plays but is not kept.
        let big = cache
            .get_or_load("big.wav", || async { Ok(wav(8000)) })
            .await
            .unwrap();
        assert_eq!(big.frames(), 50);
        assert!(cache.get("big.wav").is_none());
        assert_eq!(cache.bytes(), 2 * 6400);
        // The entry bound holds too.
        let small = PromptCache::with_budget(2, usize::MAX);
        for k in ["a.wav", "b.wav", "c.wav"] {
            small
                .get_or_load(k, || async { Ok(wav(160)) })
                .await
                .unwrap();
        }
        assert_eq!(small.len(), 2);
        assert!(small.get("a.wav").is_none());
    }
}
