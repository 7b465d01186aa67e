//! The labelled clip set of the answering-machine benches (`amd_bench`): what a callee
//! says when it picks up, generated (never downloaded), 8 kHz, through G.711 µ-law.
//!
//! - **machine**: voicemail greetings of 8 texts (1.5–9 s) in 10 voices, most followed by
//!   a beep of 440–1,400 Hz and 180–800 ms after a 250–1,000 ms gap, some with none;
//!   carrier messages ("the number you have dialed is not in service"), half of them
//!   after the three special-information tones;
//! - **human**: 10 short answers ("hello?", "yes, speaking", "hi, this is Sam", ...) after
//!   0–2.5 s of silence, in quiet lines, line hiss or room noise up to 5 dB under the
//!   voice, some saying "hello?" again after two seconds, then waiting (6 s of noise).
//!
//! Voices: flite (kal, slt, rms, awb), espeak-ng (en-us, en-us+f3, en-gb+m3), Piper (joe)
//! and SVOX Pico (en-US, en-GB) from the speech node's virtual environment
//! (media/speech-node/install.sh; `CALLSMITH_STT_PYTHON` names its python). Speech is
//! band-limited to 250–3,400 Hz and resampled by sox, levelled to -18…-30 dBFS, mixed with
//! seeded noise, then µ-law encoded. The set is cached under
//! `$CALLSMITH_AMD_SET_DIR` (default `~/.cache/callsmith/amd-set`) in a folder named after
//! [`SET_VERSION`]: `<id>.ul` per clip and `labels.json`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use callsmith_media::g711::Codec;
use serde::{Deserialize, Serialize};

/// Bumped whenever the generator's output changes (a new cache folder).
pub const SET_VERSION: &str = "v2";

/// The truth of a clip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    Human,
    Machine,
}

/// One clip's description (its audio is `<id>.ul`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClipInfo {
    pub id: String,
    pub label: Label,
    /// greeting, greeting+beep, carrier, carrier+sit, human, human+again.
    pub kind: String,
    pub voice: String,
    pub text: String,
    /// Beep frequency and length, and the silence before it.
    pub beep_hz: Option<u32>,
    pub beep_ms: Option<u32>,
    pub gap_ms: Option<u32>,
    /// Silence (or noise) before the first word.
    pub lead_ms: u32,
    /// none, hiss, room, loud_room.
    pub noise: String,
    /// Speech level, dBFS RMS.
    pub speech_dbfs: i32,
    /// Length of the first utterance, and of the whole clip.
    pub speech_ms: u32,
    pub clip_ms: u32,
}

/// A clip: its description and its audio, 8 kHz µ-law.
#[derive(Debug, Clone)]
pub struct Clip {
    pub info: ClipInfo,
    pub ulaw: Vec<u8>,
}

impl Clip {
    /// The audio as linear PCM (what the engine's decoder gives the detector).
    pub fn pcm(&self) -> Vec<i16> {
        let mut pcm = vec![0i16; self.ulaw.len()];
        Codec::Pcmu.decode_into(&self.ulaw, &mut pcm);
        pcm
    }
}

#[derive(Debug, Clone, Copy)]
enum Voice {
    Flite(&'static str),
    Espeak(&'static str),
    Piper,
    Pico(&'static str),
}

impl Voice {
    fn name(self) -> String {
        match self {
            Voice::Flite(v) => format!("flite/{v}"),
            Voice::Espeak(v) => format!("espeak-ng/{v}"),
            Voice::Piper => "piper/joe".into(),
            Voice::Pico(v) => format!("pico/{v}"),
        }
    }
}

const VOICES: [Voice; 10] = [
    Voice::Flite("kal"),
    Voice::Piper,
    Voice::Espeak("en-us"),
    Voice::Pico("en-US"),
    Voice::Flite("slt"),
    Voice::Espeak("en-us+f3"),
    Voice::Flite("rms"),
    Voice::Pico("en-GB"),
    Voice::Flite("awb"),
    Voice::Espeak("en-gb+m3"),
];

const GREETINGS: [&str; 8] = [
    "Hi, you've reached Sam. Leave a message.",
    "Please leave a message after the tone.",
    "Hello, you have reached the voicemail of John Smith. Please leave a message after the tone.",
    "Hi, this is Maria. I can't take your call right now. Please leave your name and number and I will get back to you as soon as possible.",
    "The person you are calling is not available. Please record your message after the tone. When you are finished, hang up or press pound for more options.",
    "Thank you for calling Acme Dental. Our office is currently closed. Please leave a message and we will return your call.",
    "Hey, it's Tom. Leave a message.",
    "You have reached five five five, zero one two three. Please leave a message.",
];

/// Beeps real voicemail systems use: (Hz, ms); `None`: the greeting ends without one.
const BEEPS: [Option<(u32, u32)>; 8] = [
    Some((1000, 250)),
    Some((440, 500)),
    None,
    Some((850, 400)),
    Some((600, 300)),
    Some((1400, 600)),
    Some((950, 180)),
    Some((500, 800)),
];
const BEEP_GAPS_MS: [u32; 4] = [250, 500, 800, 1000];

const CARRIER: [&str; 4] = [
    "The number you have dialed is not in service. Please check the number and try again.",
    "We're sorry, your call cannot be completed as dialed. Please check the number and dial again.",
    "The subscriber you have called is not available. Please try again later.",
    "The wireless customer you are calling is not available. Please try your call again later.",
];

const HUMAN: [&str; 10] = [
    "Hello?",
    "Yes, speaking.",
    "Hi, this is Sam.",
    "Hello, who is this?",
    "Yeah?",
    "Hi.",
    "Sam speaking.",
    "Yes?",
    "Hello, Maria speaking.",
    "Good morning.",
];
const HUMAN_LEADS_MS: [u32; 4] = [0, 400, 1200, 2500];
const NOISES: [&str; 4] = ["none", "hiss", "room", "loud_room"];
const LEVELS_DBFS: [i32; 4] = [-18, -22, -26, -30];

/// Noise RMS level, dBFS (none: digital silence).
fn noise_dbfs(noise: &str) -> Option<f32> {
    match noise {
        "hiss" => Some(-55.0),
        "room" => Some(-45.0),
        "loud_room" => Some(-35.0),
        _ => None,
    }
}

/// Where the set lives: `$CALLSMITH_AMD_SET_DIR` or `~/.cache/callsmith/amd-set`, then
/// [`SET_VERSION`].
pub fn cache_dir() -> PathBuf {
    let base = std::env::var_os("CALLSMITH_AMD_SET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/tmp".into()))
                .join(".cache/callsmith/amd-set")
        });
    base.join(SET_VERSION)
}

/// The speech node's python (Piper and Pico).
fn speech_python() -> String {
    std::env::var("CALLSMITH_STT_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/callsmith/speech-venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    })
}

/// The set: loaded from the cache, generated there first when absent.
pub fn load_or_generate() -> Result<Vec<Clip>> {
    let dir = cache_dir();
    if !dir.join("labels.json").exists() {
        generate(&dir)?;
    }
    load(&dir)
}

/// Reads a generated set.
pub fn load(dir: &Path) -> Result<Vec<Clip>> {
    let labels: Vec<ClipInfo> = serde_json::from_slice(
        &std::fs::read(dir.join("labels.json")).context("read labels.json")?,
    )?;
    labels
        .into_iter()
        .map(|info| {
            let ulaw = std::fs::read(dir.join(format!("{}.ul", info.id)))
                .with_context(|| format!("read {}.ul", info.id))?;
            Ok(Clip { info, ulaw })
        })
        .collect()
}

/// One utterance to synthesise.
struct Say {
    voice: Voice,
    text: &'static str,
}

/// What to build from the utterances.
struct Plan {
    info: ClipInfo,
    /// Indices into the utterance list: the first utterance, and a repeat of "hello?".
    say: usize,
    again: Option<usize>,
    sit: bool,
    seed: u64,
}

/// The clip plans, in a fixed order, and the utterances they need.
fn plans() -> (Vec<Say>, Vec<Plan>) {
    let mut says: Vec<Say> = Vec::new();
    let mut say = |voice: Voice, text: &'static str| {
        says.push(Say { voice, text });
        says.len() - 1
    };
    let mut plans = Vec::new();
    let mut n = 0usize;
    let info = |id: String, label: Label, kind: &str, voice: Voice, text: &str| ClipInfo {
        id,
        label,
        kind: kind.into(),
        voice: voice.name(),
        text: text.into(),
        beep_hz: None,
        beep_ms: None,
        gap_ms: None,
        lead_ms: 0,
        noise: "none".into(),
        speech_dbfs: -22,
        speech_ms: 0,
        clip_ms: 0,
    };
    // Greetings: four voices each, beeps and gaps in rotation.
    for (g, text) in GREETINGS.iter().enumerate() {
        for k in 0..4 {
            let voice = VOICES[(g * 3 + k) % VOICES.len()];
            let beep = BEEPS[(g + k * 3) % BEEPS.len()];
            let mut i = info(
                format!("m{n:02}"),
                Label::Machine,
                if beep.is_some() {
                    "greeting+beep"
                } else {
                    "greeting"
                },
                voice,
                text,
            );
            i.beep_hz = beep.map(|b| b.0);
            i.beep_ms = beep.map(|b| b.1);
            i.gap_ms = beep.map(|_| BEEP_GAPS_MS[(g + k) % BEEP_GAPS_MS.len()]);
            i.lead_ms = [0, 200, 500, 0][k];
            i.noise = ["none", "hiss", "none", "room"][(g + k) % 4].into();
            i.speech_dbfs = LEVELS_DBFS[(g + k) % LEVELS_DBFS.len()];
            plans.push(Plan {
                info: i,
                say: say(voice, text),
                again: None,
                sit: false,
                seed: n as u64,
            });
            n += 1;
        }
    }
    // Carrier messages: two voices each, the first after the special-information tones.
    for (c, text) in CARRIER.iter().enumerate() {
        for k in 0..2 {
            let voice = VOICES[(c * 2 + k + 1) % VOICES.len()];
            let sit = k == 0;
            let mut i = info(
                format!("m{n:02}"),
                Label::Machine,
                if sit { "carrier+sit" } else { "carrier" },
                voice,
                text,
            );
            i.lead_ms = 300;
            i.noise = ["hiss", "none"][k].into();
            i.speech_dbfs = LEVELS_DBFS[(c + k) % LEVELS_DBFS.len()];
            plans.push(Plan {
                info: i,
                say: say(voice, text),
                again: None,
                sit,
                seed: n as u64,
            });
            n += 1;
        }
    }
    // People: four takes of each answer (voice, lead, noise and level in rotation).
    let mut h = 0usize;
    for (p, text) in HUMAN.iter().enumerate() {
        for k in 0..4 {
            let voice = VOICES[(p + k * 3) % VOICES.len()];
            let again = (p + k) % 5 == 0 && text.starts_with("Hello");
            let mut i = info(
                format!("h{h:02}"),
                Label::Human,
                if again { "human+again" } else { "human" },
                voice,
                text,
            );
            i.lead_ms = HUMAN_LEADS_MS[(p + k) % HUMAN_LEADS_MS.len()];
            i.noise = NOISES[(p + 2 * k) % NOISES.len()].into();
            i.speech_dbfs = LEVELS_DBFS[(p * 3 + k) % LEVELS_DBFS.len()];
            let first = say(voice, text);
            let again = again.then(|| say(voice, "Hello?"));
            plans.push(Plan {
                info: i,
                say: first,
                again,
                sit: false,
                seed: 1000 + h as u64,
            });
            h += 1;
        }
    }
    (says, plans)
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("run {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Synthesises every utterance to `dir/say<i>.wav` (its engine's rate).
fn synthesise(says: &[Say], dir: &Path) -> Result<()> {
    let mut py_jobs = Vec::new();
    for (i, s) in says.iter().enumerate() {
        let wav = dir.join(format!("say{i}.wav"));
        match s.voice {
            Voice::Flite(v) => run(
                Command::new("flite")
                    .args(["-voice", v, "-t", s.text, "-o"])
                    .arg(&wav),
                "flite (apt-get install flite)",
            )?,
            Voice::Espeak(v) => run(
                Command::new("espeak-ng")
                    .args(["-v", v, "-w"])
                    .arg(&wav)
                    .arg(s.text),
                "espeak-ng (apt-get install espeak-ng)",
            )?,
            Voice::Piper => py_jobs.push(serde_json::json!({
                "engine": "piper", "voice": "joe", "text": s.text, "out": wav})),
            Voice::Pico(v) => py_jobs.push(serde_json::json!({
                "engine": "pico", "voice": v, "text": s.text, "out": wav})),
        }
    }
    if !py_jobs.is_empty() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("amd/tts_batch.py");
        let python = speech_python();
        let mut child = Command::new(&python)
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| {
                format!("run {python} (the speech node's venv: media/speech-node/install.sh)")
            })?;
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().context("python stdin")?;
            stdin.write_all(serde_json::to_string(&py_jobs)?.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "Piper/Pico synthesis failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}

/// A WAV as 8 kHz telephone-band PCM (sox: 250–3,400 Hz, resampled), trimmed of the
/// engine's leading and trailing silence.
fn telephone_pcm(wav: &Path) -> Result<Vec<f32>> {
    let raw = wav.with_extension("raw");
    run(
        Command::new("sox")
            .arg(wav)
            .args([
                "-r",
                "8000",
                "-c",
                "1",
                "-b",
                "16",
                "-e",
                "signed-integer",
                "-t",
                "raw",
            ])
            .arg(&raw)
            .args(["highpass", "250", "lowpass", "3400"]),
        "sox (apt-get install sox)",
    )?;
    let bytes = std::fs::read(&raw)?;
    let pcm: Vec<f32> = bytes
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])))
        .collect();
    let peak = pcm.iter().fold(0f32, |m, x| m.max(x.abs()));
    let thr = peak * 0.02;
    let first = pcm.iter().position(|x| x.abs() > thr).unwrap_or(0);
    let last = pcm.iter().rposition(|x| x.abs() > thr).unwrap_or(pcm.len());
    if last <= first {
        bail!("{} holds no speech", wav.display());
    }
    Ok(pcm[first..=last].to_vec())
}

fn rms(x: &[f32]) -> f32 {
    (x.iter().map(|v| v * v).sum::<f32>() / x.len().max(1) as f32).sqrt()
}

fn db_to_amp(db: f32) -> f32 {
    32768.0 * 10f32.powf(db / 20.0)
}

/// A seeded xorshift generator (the set must not change between runs).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
    /// About Gaussian, unit variance.
    fn gauss(&mut self) -> f32 {
        (0..4).map(|_| self.next()).sum::<f32>() * 1.732
    }
}

/// `len` samples of noise of the given kind and RMS level; silence for "none".
fn noise(kind: &str, len: usize, seed: u64) -> Vec<f32> {
    let Some(db) = noise_dbfs(kind) else {
        return vec![0.0; len];
    };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1));
    let mut out: Vec<f32> = (0..len).map(|_| rng.gauss()).collect();
    if kind != "hiss" {
        // Room noise: low-passed (a one-pole filter), with a slow swell.
        let mut y = 0f32;
        for (i, v) in out.iter_mut().enumerate() {
            y = 0.92 * y + 0.08 * *v;
            let swell = 1.0 + 0.4 * (i as f32 * 2.0 * std::f32::consts::PI * 0.3 / 8000.0).sin();
            *v = y * swell;
        }
    }
    let scale = db_to_amp(db) / rms(&out).max(1e-6);
    out.iter_mut().for_each(|v| *v *= scale);
    out
}

/// A tone burst with 5 ms ramps.
fn tone(hz: f32, ms: u32, dbfs: f32) -> Vec<f32> {
    let n = (ms * 8) as usize;
    let amp = db_to_amp(dbfs) * std::f32::consts::SQRT_2;
    (0..n)
        .map(|i| {
            let ramp = (i.min(n - 1 - i) as f32 / 40.0).min(1.0);
            amp * ramp * (i as f32 * 2.0 * std::f32::consts::PI * hz / 8000.0).sin()
        })
        .collect()
}

fn silence(ms: u32) -> Vec<f32> {
    vec![0.0; (ms * 8) as usize]
}

/// The special-information tones before a carrier message (913.8, 1,370.6, 1,776.7 Hz).
fn sit() -> Vec<f32> {
    let mut v = tone(913.8, 274, -16.0);
    v.extend(tone(1370.6, 274, -16.0));
    v.extend(tone(1776.7, 380, -16.0));
    v.extend(silence(300));
    v
}

fn levelled(speech: &[f32], dbfs: i32) -> Vec<f32> {
    let g = db_to_amp(dbfs as f32) / rms(speech).max(1e-6);
    speech.iter().map(|v| v * g).collect()
}

/// Builds one clip from its plan and the synthesised utterances.
fn build(plan: &Plan, speech: &[Vec<f32>]) -> (ClipInfo, Vec<u8>) {
    let mut info = plan.info.clone();
    let first = levelled(&speech[plan.say], info.speech_dbfs);
    info.speech_ms = (first.len() / 8) as u32;
    let mut sig = silence(info.lead_ms);
    if plan.sit {
        sig.extend(sit());
    }
    sig.extend(&first);
    match info.label {
        Label::Machine => {
            if let (Some(hz), Some(ms), Some(gap)) = (info.beep_hz, info.beep_ms, info.gap_ms) {
                sig.extend(silence(gap));
                sig.extend(tone(hz as f32, ms, -14.0));
            }
            sig.extend(silence(1500));
        }
        Label::Human => {
            if let Some(a) = plan.again {
                sig.extend(silence(2000));
                sig.extend(levelled(&speech[a], info.speech_dbfs));
            }
            sig.extend(silence(6000));
        }
    }
    let frames = sig.len().div_ceil(160);
    sig.resize(frames * 160, 0.0);
    let n = noise(&info.noise, sig.len(), plan.seed);
    let pcm: Vec<i16> = sig
        .iter()
        .zip(&n)
        .map(|(s, n)| (s + n).round().clamp(-32768.0, 32767.0) as i16)
        .collect();
    info.clip_ms = (pcm.len() / 8) as u32;
    let mut ulaw = vec![0u8; pcm.len()];
    Codec::Pcmu.encode_into(&pcm, &mut ulaw);
    (info, ulaw)
}

/// Generates the whole set into `dir` (written beside it, then renamed into place).
pub fn generate(dir: &Path) -> Result<()> {
    let (says, plans) = plans();
    let parent = dir.parent().context("set folder")?;
    std::fs::create_dir_all(parent)?;
    let work = tempfile::tempdir_in(parent)?;
    let t0 = std::time::Instant::now();
    synthesise(&says, work.path())?;
    let speech: Vec<Vec<f32>> = (0..says.len())
        .map(|i| telephone_pcm(&work.path().join(format!("say{i}.wav"))))
        .collect::<Result<_>>()?;
    let out = work.path().join("set");
    std::fs::create_dir_all(&out)?;
    let mut labels = Vec::new();
    for plan in &plans {
        let (info, ulaw) = build(plan, &speech);
        std::fs::write(out.join(format!("{}.ul", info.id)), &ulaw)?;
        labels.push(info);
    }
    std::fs::write(out.join("labels.json"), serde_json::to_vec_pretty(&labels)?)?;
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::rename(&out, dir)?;
    eprintln!(
        "amd set: {} clips generated in {:.1} s into {}",
        labels.len(),
        t0.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_is_labelled_and_varied() {
        let (says, plans) = plans();
        let humans = plans
            .iter()
            .filter(|p| p.info.label == Label::Human)
            .count();
        let machines = plans.len() - humans;
        assert!(humans >= 30 && machines >= 30, "{humans} / {machines}");
        let voices: std::collections::BTreeSet<&str> =
            plans.iter().map(|p| p.info.voice.as_str()).collect();
        assert_eq!(voices.len(), VOICES.len());
        let beeps: std::collections::BTreeSet<u32> =
            plans.iter().filter_map(|p| p.info.beep_hz).collect();
        assert!(beeps.len() >= 6 && beeps.contains(&440), "{beeps:?}");
        assert!(plans.iter().any(|p| p.info.kind == "greeting"));
        assert!(plans.iter().any(|p| p.info.kind == "carrier+sit"));
        assert!(plans.iter().any(|p| p.info.kind == "human+again"));
        assert!(
            plans
                .iter()
                .any(|p| p.info.label == Label::Human && p.info.lead_ms >= 2000)
        );
        let ids: std::collections::BTreeSet<&str> =
            plans.iter().map(|p| p.info.id.as_str()).collect();
        assert_eq!(ids.len(), plans.len(), "ids are unique");
        assert!(says.len() >= plans.len());
    }

    #[test]
    fn noise_is_seeded_and_at_its_level() {
        let a = noise("room", 8000, 7);
        assert_eq!(a, noise("room", 8000, 7));
        assert_ne!(a, noise("room", 8000, 8));
        let db = 20.0 * (rms(&a) / 32768.0).log10();
        assert!((db + 45.0).abs() < 0.5, "{db}");
        assert!(noise("none", 10, 1).iter().all(|v| *v == 0.0));
    }
}
