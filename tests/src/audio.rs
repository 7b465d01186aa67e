//! Audio for and from calls: speech and tones as raw 8 kHz µ-law (what SIPp `rtp_stream`
//! plays), WAV files, and tone detection in what a call recorded.

use std::path::{Path, PathBuf};

use callsmith_media::tone::power_at;

/// Runs sox with `args` (panics with its error output on failure).
pub fn sox(args: &[&str]) {
    let out = std::process::Command::new("sox")
        .args(args)
        .output()
        .expect("run sox");
    assert!(
        out.status.success(),
        "sox {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Speaks `text` with flite into the WAV file `wav` (flite's own 8 kHz).
fn flite(text: &str, wav: &Path) {
    let st = std::process::Command::new("flite")
        .args(["-t", text, "-o"])
        .arg(wav)
        .status()
        .expect("run flite");
    assert!(st.success(), "flite failed");
}

/// Speaks `text` with flite and writes raw 8 kHz µ-law (what SIPp `rtp_stream` plays) to
/// `dir/name`, with `lead_ms` of silence first and one second after.
pub fn ulaw_speech(dir: &Path, name: &str, text: &str, lead_ms: u32) -> PathBuf {
    let wav = dir.join(format!("{name}.flite.wav"));
    flite(text, &wav);
    let out = dir.join(name);
    let st = std::process::Command::new("sox")
        .arg(&wav)
        .args(["-r", "8000", "-c", "1", "-t", "ul"])
        .arg(&out)
        .args(["pad", &format!("{:.3}", f64::from(lead_ms) / 1000.0), "1.0"])
        .status()
        .expect("run sox");
    assert!(st.success(), "sox failed");
    out
}

/// A voicemail greeting as raw 8 kHz µ-law: 200 ms of silence, flite speaking `text`,
/// 400 ms of silence, a 1 kHz beep of `beep_ms`, then one second of silence.
pub fn ulaw_greeting_with_beep(dir: &Path, name: &str, text: &str, beep_ms: u32) -> PathBuf {
    let wav = dir.join(format!("{name}.flite.wav"));
    flite(text, &wav);
    let speech = dir.join(format!("{name}.speech.ul"));
    let (w, sp) = (wav.display().to_string(), speech.display().to_string());
    sox(&[
        &w, "-r", "8000", "-c", "1", "-t", "ul", &sp, "pad", "0.2", "0.4",
    ]);
    let beep = dir.join(format!("{name}.beep.ul"));
    let b = beep.display().to_string();
    let secs = format!("{:.3}", f64::from(beep_ms) / 1000.0);
    sox(&[
        "-n", "-r", "8000", "-c", "1", "-t", "ul", &b, "synth", &secs, "sine", "1000", "vol",
        "0.5", "pad", "0", "1.0",
    ]);
    let out = dir.join(name);
    let mut bytes = std::fs::read(&speech).expect("speech");
    bytes.extend(std::fs::read(&beep).expect("beep"));
    std::fs::write(&out, bytes).expect("write greeting");
    out
}

/// Writes `secs` seconds of a `freq_hz` sine (8 kHz, raw µ-law, what SIPp `rtp_stream`
/// plays) to `dir/name`.
pub fn ulaw_tone(dir: &Path, name: &str, freq_hz: f32, secs: f32) -> PathBuf {
    let bytes: Vec<u8> = tone_frame_iter(freq_hz)
        .take((secs * 50.0) as usize)
        .flatten()
        .map(callsmith_media::g711::ulaw_encode)
        .collect();
    let out = dir.join(name);
    std::fs::write(&out, bytes).expect("write tone");
    out
}

/// 20 ms frames (160 samples at 8 kHz) of a continuous sine at half scale.
pub(crate) fn tone_frame_iter(freq_hz: f32) -> impl Iterator<Item = Vec<i16>> {
    (0u64..).map(move |f| {
        (0..160u64)
            .map(|i| {
                let t = (f * 160 + i) as f32 / 8000.0;
                ((2.0 * std::f32::consts::PI * freq_hz * t).sin() * 16000.0) as i16
            })
            .collect()
    })
}

/// How many 20 ms frames of `pcm` carry a clear `freq_hz` tone (Goertzel share of the
/// frame's energy above 0.5, and not near-silence).
pub fn tone_frames(pcm: &[i16], freq_hz: f32) -> usize {
    pcm.chunks_exact(160)
        .filter(|f| {
            let rms = (f.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / 160.0).sqrt();
            rms > 500.0 && callsmith_media::amd::tone_ratio(f, freq_hz) > 0.5
        })
        .count()
}

/// Whether a µ-law payload carries voice (more than a quarter of its samples above ~ -40 dBFS).
pub(crate) fn ulaw_voiced(payload: &[u8]) -> bool {
    let loud = payload.iter().filter(|b| ((!**b) >> 4) & 0x07 >= 3).count();
    loud * 4 > payload.len()
}

/// The two channels of a 16-bit stereo WAV (a call recording: left = caller, right = bot).
pub fn wav_channels(path: &Path) -> (Vec<i16>, Vec<i16>) {
    let r = hound::WavReader::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    assert_eq!(r.spec().channels, 2, "a stereo recording");
    let samples: Vec<i16> = r
        .into_samples::<i16>()
        .map(|s| s.expect("sample"))
        .collect();
    let left = samples.iter().step_by(2).copied().collect();
    let right = samples.iter().skip(1).step_by(2).copied().collect();
    (left, right)
}

/// A WAV of `secs` of a loud 440 Hz tone at 8 kHz, 16-bit mono.
pub fn tone_wav(secs: f32) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 8000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).expect("wav");
    for i in 0..(8000.0 * secs) as usize {
        let v = (i as f32 * 2.0 * std::f32::consts::PI * 440.0 / 8000.0).sin() * 16000.0;
        w.write_sample(v as i16).expect("sample");
    }
    w.finalize().expect("finalize");
    out.into_inner()
}

/// One second of a quiet 6 kHz tone (about -20 dBFS), then flite saying `text` as a mono WAV
/// at `rate`, after `lead_ms` of silence and with 3 s after (baresip's `aufile` plays a
/// file only at its codec's own rate; at 8 kHz the tone cannot be carried and is left out).
pub fn tone_and_speech_wav(dir: &Path, text: &str, rate: u32, lead_ms: u32) -> PathBuf {
    let raw = dir.join("flite.wav");
    flite(text, &raw);
    let out = dir.join("speech.wav");
    let (r, o, hz) = (
        raw.display().to_string(),
        out.display().to_string(),
        rate.to_string(),
    );
    let lead = format!("{:.3}", f64::from(lead_ms) / 1000.0);
    sox(&[
        &r, "-r", &hz, "-c", "1", "-b", "16", &o, "pad", &lead, "3.0",
    ]);
    if rate < 16000 {
        return out;
    }
    let tone = dir.join("tone.wav").display().to_string();
    sox(&[
        "-n", "-r", &hz, "-c", "1", "-b", "16", &tone, "synth", "1.0", "sine", "6000", "vol", "0.1",
    ]);
    let both = dir.join("tone-speech.wav");
    sox(&[&tone, &o, &both.display().to_string()]);
    both
}

/// The sample rate in a WAV header.
pub fn wav_rate(wav: &[u8]) -> u32 {
    assert!(wav.starts_with(b"RIFF") && wav.len() > 44, "a WAV file");
    u32::from_le_bytes(wav[24..28].try_into().unwrap())
}

/// The loudest 20 ms of a 6 kHz tone in a stereo 16 kHz recording's left (caller) channel,
/// as the tone's amplitude, with the power beside it (at 5 kHz) in the same window.
pub fn caller_tone_6k(wav: &[u8]) -> (f64, f64) {
    let r = hound::WavReader::new(std::io::Cursor::new(wav)).expect("recording parses");
    assert_eq!(r.spec().channels, 2);
    let s: Vec<i16> = r.into_samples::<i16>().map(|x| x.unwrap()).collect();
    let left: Vec<i16> = s.iter().step_by(2).copied().collect();
    left.chunks_exact(320)
        .map(|w| (power_at(w, 6000.0, 16000.0), power_at(w, 5000.0, 16000.0)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(p, beside)| ((4.0 * p).sqrt(), (4.0 * beside).sqrt()))
        .unwrap_or((0.0, 0.0))
}
