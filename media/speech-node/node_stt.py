"""Recognition: Whisper (faster-whisper / CTranslate2 int8), Silero VAD, the
Smart Turn v3 end-of-turn model, and the per-stream endpointing state machine.

All processing runs on 16 kHz float32 audio: input at any rate (4-48 kHz) is
resampled as it streams in: telephone audio (8 kHz) by a short half-band filter of its own
(1.4 ms of delay), any other rate by soxr. Time is counted in audio samples, not wall
time, so a client that sends faster than real time gets the same segmentation.
"""

import logging
import threading
from dataclasses import dataclass

import numpy as np

log = logging.getLogger("speech-node")

SR = 16000
VAD_CHUNK = 512  # 32 ms at 16 kHz (what Silero v5 takes)


def whisper_language(tag):
    """A language tag as Whisper names languages ("de-DE" -> "de", "EN" -> "en"); None for
    none or Deepgram's "multi" (identify the language)."""
    code = str(tag or "").strip().lower().replace("_", "-").split("-")[0]
    return None if code in ("", "multi") else code


def pick_language(probs, candidates):
    """The most probable of `candidates` (Whisper codes) by the model's language
    probabilities `probs` ((code, p) pairs); the first candidate when the model gives
    none of them."""
    if not candidates:
        return None
    p = dict(probs)
    return max(candidates, key=lambda c: (p.get(c, -1.0), -candidates.index(c)))


@dataclass
class RecOptions:
    """A stream's recognition options: the languages the caller may speak (Whisper codes,
    primary first: the spoken one is identified among them when there are several) and
    the words and phrases to favour (Whisper's `hotwords`)."""

    languages: list = None
    hints: list = None
    detected: str = None  # the language of the stream's last final

    @classmethod
    def from_request(cls, language=None, candidates=(), hints=()):
        langs = []
        for tag in list(candidates or ()) or [language]:
            code = whisper_language(tag)
            if code and code not in langs:
                langs.append(code)
        words = [h.strip() for h in hints or () if isinstance(h, str) and h.strip()]
        return cls(languages=langs, hints=words)

    def current(self):
        """The language partials are decoded in: the last final's, else the primary."""
        return self.detected or (self.languages[0] if self.languages else None)


class Recognizer:
    """One Whisper model; `transcribe` is called from a single worker thread."""

    def __init__(self, model_dir, threads: int, name: str):
        from faster_whisper import WhisperModel

        self.name = name
        self.model_dir = str(model_dir)
        self.model = WhisperModel(self.model_dir, device="cpu", compute_type="int8", cpu_threads=threads)
        # Whisper's encoder always sees 30 s (3000 frames, zero-padded). CTranslate2 also
        # takes a shorter window, which costs proportionally less: partials use the
        # utterance plus 3 s (about 3x cheaper for short turns, slightly less accurate),
        # finals the full 30 s window.
        self._frames = 3000
        encode = self.model.encode

        def windowed_encode(features):
            if features.shape[-1] > self._frames:
                features = features[..., : self._frames]
            return encode(features)

        self.model.encode = windowed_encode
        # Warm up so the first real request does not pay one-off initialisation.
        self.transcribe(np.zeros(SR, dtype=np.float32), 0.0, True)
        self.transcribe(np.zeros(SR, dtype=np.float32), 0.0, False, trim=True)

    def language_for(self, audio: np.ndarray, opts, identify: bool):
        """The language to decode `audio` in: English for an English-only model; with
        several candidates and `identify`, the most probable of them (one encoder pass);
        else the options' current language (English when none is named)."""
        if not self.model.model.is_multilingual:
            return "en"
        langs = (opts.languages if opts else None) or []
        if identify and len(langs) > 1:
            _lang, _p, probs = self.model.detect_language(audio)
            return pick_language(probs, langs)
        return (opts.current() if opts else None) or "en"

    def transcribe(self, audio: np.ndarray, offset_s: float, words: bool, trim: bool = False, opts=None,
                   identify: bool = False):
        """Returns (text, words, end_s, language): `words` with their timings when asked
        for (an extra alignment pass, ~25 % of a short final), `end_s` where the recognised
        speech ends in stream seconds (the last word's end, else the last segment's end;
        None without speech), `language` the language decoded in (`language_for`; the
        options' `hints` are Whisper's hotwords). Called from one worker thread only.

        Decoding always predicts timestamps: without them a shortened encoder window makes
        Whisper repeat short phrases ("Not today. Not today. Not today.") until the token
        cap, while the segment's end timestamp stops it."""
        if audio.size < SR // 10:
            return "", [], None, None
        frames = audio.size // 160
        self._frames = min(3000, (frames + 300 + 99) // 100 * 100) if trim else 3000
        language = self.language_for(audio, opts, identify)
        hints = (opts.hints if opts else None) or []
        segments, _info = self.model.transcribe(
            audio,
            language=language,
            hotwords=", ".join(hints) if hints else None,
            beam_size=1,
            condition_on_previous_text=False,
            temperature=0.0,
            vad_filter=False,
            word_timestamps=words,
            without_timestamps=False,
            # a guard against hallucination loops (speech is under ~5 tokens/s)
            max_new_tokens=int(24 + 8 * audio.size / SR),
        )
        texts, result, end = [], [], None
        for seg in segments:
            if seg.no_speech_prob > 0.6 and seg.avg_logprob < -1.0:
                continue
            texts.append(seg.text.strip())
            end = round(offset_s + min(seg.end, audio.size / SR), 3)
            for w in seg.words or []:
                result.append(
                    {
                        "word": w.word.strip(),
                        "start": round(offset_s + w.start, 3),
                        "end": round(offset_s + w.end, 3),
                        "conf": round(float(w.probability), 3),
                    }
                )
        if result:
            end = result[-1]["end"]
        return " ".join(t for t in texts if t).strip(), result, end, language


def _ort_session(path, threads=1):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.inter_op_num_threads = 1
    so.intra_op_num_threads = threads
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])


class SileroVad:
    """Silero VAD v5 (ONNX). The session is shared; each stream keeps its own state."""

    CONTEXT = 64

    def __init__(self, path):
        self.session = _ort_session(path, 1)
        self.sr = np.array(SR, dtype=np.int64)

    def new_state(self):
        return {"state": np.zeros((2, 1, 128), dtype=np.float32), "ctx": np.zeros((1, self.CONTEXT), np.float32)}

    def prob(self, st, chunk: np.ndarray) -> float:
        x = np.concatenate((st["ctx"], chunk.reshape(1, -1).astype(np.float32)), axis=1)
        out, state = self.session.run(None, {"input": x, "state": st["state"], "sr": self.sr})
        st["state"] = state
        st["ctx"] = x[:, -self.CONTEXT :]
        return float(out[0][0])


class SmartTurn:
    """Smart Turn v3 (ONNX, Whisper-encoder based): probability that the speaker
    finished their turn, from the last 8 s of audio (16 kHz)."""

    def __init__(self, path, features, threads=1):
        self.session = _ort_session(path, threads)
        self.features = features
        self.lock = threading.Lock()
        self.predict(np.zeros(SR, dtype=np.float32))

    def predict(self, audio: np.ndarray) -> float:
        n = 8 * SR
        x = audio[-n:]
        if x.size < n:
            x = np.pad(x, (n - x.size, 0))
        feats = self.features.compute_whisper_log_mel_features(x, do_normalize=True)
        out = self.session.run(None, {"input_features": feats[None]})
        return float(np.asarray(out[0]).reshape(-1)[0])


# The turn policy: when the end-of-turn check (Smart Turn, or the fixed timer) says the
# turn is complete but the running transcript ends the way a finished answer does not, the
# node keeps listening up to the silence cap (the "hold"). Per language (Whisper codes);
# a language without lists is never held.
#
# TRAILING: a last word that leaves the sentence open (articles, possessives, prepositions
# that take an object, conjunctions, copulas and auxiliaries, subject pronouns, fillers).
# Words that often end a finished answer ("about", "in", "on", "up", "it", "that", "you",
# "so", "well") are not in it. ALONE: words that are no answer when they are all that was
# said ("well", "so", "okay so"). LEADING: possessives that make a transcript of at most
# two words a noun phrase still waiting for its verb ("my number…", "your address…").
HOLD_WORDS = {
    "en": {
        "trailing": {
            "a", "an", "the",
            "my", "your", "our", "their", "his", "her", "its",
            "to", "of", "for", "with", "at", "from", "into", "by", "than",
            "and", "or", "but", "because", "if", "nor",
            "is", "are", "was", "were", "am", "be", "been",
            "i", "we", "i'd", "i'm", "i'll", "we'd", "we're", "it's", "that's", "there's",
            "can", "could", "would", "should", "will", "shall", "might", "must", "do", "does", "did",
            "uh", "um", "er", "erm", "uhm", "hmm", "hm", "mm", "mhm", "ah", "like", "maybe",
        },
        "alone": {"well", "so", "okay so", "right so", "let me see", "let's see"},
        "leading": {"my", "your", "our", "their", "his", "her"},
    },
}
# Spoken digits (English) for the digit-run hold (patience "digits").
DIGIT_WORDS = {
    "en": {"zero", "oh", "o", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
           "eleven", "twelve", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
           "hundred", "thousand", "double", "triple"},
}
# The question's patience (the stream's `patience` option) as endpointing: the silence
# after which the end-of-turn model is asked, the model's probability that counts as
# complete, the silence cap, and whether a trailing digit run is held (`long` and
# `digits` also send no eager end of turn). `normal` is the node's own settings.
PATIENCE = {
    # Asked sooner than the node's own time, Smart Turn more often finds the turn
    # unfinished (a 150 ms first check, with an unfinished verdict waiting for the cap,
    # doubled the plain set's p50 in voice_turn), so `short` only lowers the cap.
    "short": {"max_silence_ms": 800},
    "normal": {},
    "long": {"turn_check_ms": 300, "turn_threshold": 0.7, "max_silence_ms": 2000, "eager_ms": 0},
    "digits": {"turn_check_ms": 300, "turn_threshold": 0.7, "max_silence_ms": 2000, "hold_digits": True,
               "eager_ms": 0},
}


def _words(text):
    import re

    return re.findall(r"[\w']+", str(text or "").lower().replace("\u2019", "'"))


def unfinished(text, language="en", digits=False):
    """Whether a running transcript ends the way a finished answer in `language` (a
    Whisper code) does not: a trailing word of HOLD_WORDS, a transcript of only ALONE
    words, one of at most two words led by a LEADING possessive ("My numbers", as Whisper
    hears "my number is" on the phone), a trailing ellipsis, comma or dash, and with `digits` (patience "digits") a
    trailing digit or spoken digit. False for an empty transcript and for a language
    without word lists."""
    lists = HOLD_WORDS.get(language or "en")
    t = str(text or "").strip()
    if lists is None or not t:
        return False
    words = _words(t)
    if not words:
        return False
    if t.endswith(("...", "\u2026", ",", "-", "\u2014", "\u2013")):
        return True
    if words[-1] in lists["trailing"] or " ".join(words) in lists["alone"]:
        return True
    if len(words) <= 2 and words[0] in lists["leading"]:
        return True
    if digits:
        last = words[-1]
        return last.isdigit() or last in DIGIT_WORDS.get(language or "en", ())
    return False


@dataclass
class EndpointConfig:
    mode: str = "smart"  # "smart" (VAD + Smart Turn) or "fixed" (VAD + fixed silence timer)
    silence_ms: int = 700  # fixed mode: silence that ends an utterance
    turn_check_ms: int = 200  # smart mode: silence after which Smart Turn's verdict counts
    # smart mode: Smart Turn is asked this long before `turn_check_ms` (its inference takes
    # about 50-65 ms on one thread), so a "complete" verdict ends the turn at `turn_check_ms`
    # instead of an inference later; speech in between voids it
    turn_lead_ms: int = 64
    # smart mode: Smart Turn is asked again every this many ms of further silence while it
    # finds the turn unfinished, up to the cap (0: asked once per pause)
    turn_recheck_ms: int = 150
    # silence after which an "eager" event is reported once per pause (both modes): the
    # session may announce a likely end of turn, taken back if speech resumes (0: off)
    eager_ms: int = 0
    # silence after which the final transcription starts (both modes; at least one VAD
    # chunk). Sooner, the audio misses the tail of the last word that the VAD already
    # counts as silence, and Whisper mishears short last words.
    final_start_ms: int = 100
    max_silence_ms: int = 1200  # smart mode: silence that ends an utterance whatever Smart Turn said
    turn_threshold: float = 0.5
    max_utterance_s: float = 15.0
    partial_interval: float = 1.0
    vad: str = "silero"  # or "energy"
    vad_threshold: float = 0.5
    energy_threshold: float = 300.0  # int16 RMS, energy VAD only
    preroll_ms: int = 400
    min_speech_ms: int = 64
    hold: bool = True  # the unfinished-transcript hold (see `unfinished`)
    hold_digits: bool = False  # the hold also keeps a trailing digit run open (patience "digits")
    patience: str = "normal"  # the stream's patience, as applied (PATIENCE)

    def apply_patience(self, patience):
        """Applies a PATIENCE level over the current settings; an unknown level is
        refused (ValueError)."""
        if patience not in PATIENCE:
            raise ValueError(f"patience {patience!r}: one of {', '.join(PATIENCE)}")
        for k, v in PATIENCE[patience].items():
            setattr(self, k, v)
        self.patience = patience

    def hold_cap_ms(self):
        """The silence a held turn may last: the smart mode's cap; with the fixed timer the
        larger of the timer and that cap (no hold when they are equal)."""
        return self.max_silence_ms if self.mode != "fixed" else max(self.silence_ms, self.max_silence_ms)


class Upsample2x:
    """8 kHz to 16 kHz for a stream: zero-stuffing and a 47-tap half-band FIR (Kaiser
    window, beta 6: about 60 dB of image rejection above 4.6 kHz, flat to 3.4 kHz).
    soxr's HQ stream holds back about 66 ms of output, which every end-of-turn decision
    waited for; this filter holds back 23 samples at 16 kHz (1.4 ms). Same interface as
    soxr.ResampleStream's `resample_chunk`."""

    TAPS = 47

    def __init__(self):
        n = np.arange(self.TAPS) - (self.TAPS - 1) // 2
        self.h = (np.sinc(n / 2.0) * np.kaiser(self.TAPS, 6.0)).astype(np.float32)
        self.tail = np.zeros(self.TAPS - 1, dtype=np.float32)  # zero-stuffed input not yet out

    def resample_chunk(self, x, last=False):
        up = np.zeros(2 * x.size, dtype=np.float32)
        up[0::2] = x
        if last:  # push out what the filter still holds
            up = np.concatenate((up, np.zeros((self.TAPS - 1) // 2, dtype=np.float32)))
        buf = np.concatenate((self.tail, up))
        y = np.convolve(buf, self.h, mode="valid")
        self.tail = buf[buf.size - (self.TAPS - 1):]
        return y.astype(np.float32, copy=False)


class Stream:
    """One recognition stream: resampling, VAD, endpoint events, utterance audio."""

    def __init__(self, cfg: EndpointConfig, vad, rate: int = 8000):
        self.cfg = cfg
        self.vad = vad if cfg.vad == "silero" else None
        self.vad_state = self.vad.new_state() if self.vad else None
        self.rate = 0
        self.resampler = None
        self.set_rate(rate)
        self.pending = np.zeros(0, dtype=np.float32)  # 16 kHz audio not yet through the VAD
        self.odd = b""
        self.total_in = 0  # input samples received
        self.pos = 0  # 16 kHz samples through the VAD (stream time)
        self.utt = []  # chunks of the current utterance (pre-roll included)
        self.utt_len = 0
        self.utt_start = 0  # stream sample of utt[0]
        self.speech = False
        self.run = 0
        self.silence = 0
        self.voice_seq = 0  # bumps on every speech chunk inside an utterance
        self.speech_end = 0  # stream sample where speech was last heard
        self.turn_checked = False
        self.complete = False  # the check found the turn complete ahead of `turn_check_ms`
        self.checked_at_ms = 0.0  # silence (ms) at the current pause's last "check"
        self.eager_reported = False  # "eager" reported for the current silence
        self.spec_started = False  # "spec" reported for the current silence
        self.held = False  # the current silence is held (an unfinished transcript)
        self.holds = 0  # turns held, for the request log line
        self.quiet_run = 0  # for the Silero state reset outside speech
        self.recent_max = 0.0
        self.utterance_id = 0
        self.partial = ""
        self.partial_at = 0
        self.partial_end = 0  # stream sample where the audio of `partial` ends
        self.partial_task = None
        self.spec = None  # (future, utterance_id, voice_seq): transcription launched at the turn check
        self.closed = False
        # figures for the request log line
        self.finals = 0
        self.turn_checks = 0
        self.turn_latencies = []  # ms of stream time from speech end to the endpoint decision

    def set_rate(self, rate: int):
        if rate == self.rate:
            return
        self.rate = rate
        if rate == SR:
            self.resampler = None
        elif rate * 2 == SR:
            self.resampler = Upsample2x()
        else:
            import soxr

            self.resampler = soxr.ResampleStream(rate, SR, 1, dtype="float32", quality="HQ")

    def ms(self, n16: int) -> float:
        return n16 * 1000.0 / SR

    def _append_input(self, data: bytes, last=False):
        data = self.odd + data
        if len(data) % 2:
            self.odd, data = data[-1:], data[:-1]
        else:
            self.odd = b""
        x = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
        self.total_in += x.size
        if self.resampler is not None:
            x = self.resampler.resample_chunk(x, last=last)
        if x.size:
            self.pending = np.concatenate((self.pending, x.astype(np.float32, copy=False)))

    def feed(self, data: bytes):
        """Adds audio and runs the VAD until an event: None, "check" (ask Smart
        Turn), "spec" (start the final transcription, the speaker may still go on),
        "eager" (`eager_ms` of silence: a likely end of turn, once per pause), "end"
        (silence timer ran out) or "max" (utterance too long).
        After an event, call feed(b"") again: unprocessed audio is kept."""
        if data:
            self._append_input(data)
        cfg = self.cfg
        off = 0
        ev = None
        while self.pending.size - off >= VAD_CHUNK and ev is None:
            chunk = self.pending[off : off + VAD_CHUNK]
            off += VAD_CHUNK
            ev = self._chunk(chunk)
        self.pending = self.pending[off:]
        return ev

    def _is_speech(self, chunk):
        cfg = self.cfg
        if self.vad is not None:
            p = self.vad.prob(self.vad_state, chunk)
            self.recent_max = max(self.recent_max * 0.8, p)
            thr = cfg.vad_threshold if not self.speech else max(0.15, cfg.vad_threshold - 0.15)
            return p >= thr
        rms = float(np.sqrt(np.mean(chunk * chunk))) * 32768.0
        return rms >= cfg.energy_threshold

    def _chunk(self, chunk):
        cfg = self.cfg
        voiced = self._is_speech(chunk)
        self.utt.append(chunk)
        self.utt_len += chunk.size
        self.pos += chunk.size
        if not self.speech:
            self.run = self.run + 1 if voiced else 0
            if voiced:
                self.quiet_run = 0
            else:
                self.quiet_run += chunk.size
                # Silero's state drifts in long non-speech at telephony rates: reset it
                # (only in clear non-speech, as pipecat does).
                if self.vad is not None and self.quiet_run >= 2 * SR and self.recent_max < 0.1:
                    self.vad_state = self.vad.new_state()
                    self.quiet_run = 0
            if self.run * VAD_CHUNK * 1000 >= cfg.min_speech_ms * SR:
                self.speech = True
                self._voiced()
                self.partial_at = 0
            else:
                keep = cfg.preroll_ms * SR // 1000
                while self.utt and self.utt_len - self.utt[0].size >= keep:
                    self.utt_start += self.utt[0].size
                    self.utt_len -= self.utt[0].size
                    self.utt.pop(0)
            return None
        if voiced:
            self._voiced()
        else:
            self.silence += chunk.size
        if self.utt_len >= cfg.max_utterance_s * SR:
            return "max"
        sil_ms = self.ms(self.silence)
        if cfg.mode == "fixed":
            if sil_ms >= (cfg.hold_cap_ms() if self.held else cfg.silence_ms):
                return "end"
        elif sil_ms >= cfg.max_silence_ms:
            return "end"
        elif self.complete:
            if sil_ms >= cfg.turn_check_ms:
                return "end"
        elif sil_ms >= cfg.turn_check_ms - cfg.turn_lead_ms and not self.turn_checked:
            self.turn_checked = True
            self.checked_at_ms = sil_ms
            self.spec_started = True  # the check starts the final transcription if "spec" did not
            return "check"
        elif self.turn_checked and self.recheck_due(sil_ms):
            self.checked_at_ms = sil_ms
            return "check"
        if self.silence > 0 and sil_ms >= cfg.final_start_ms and not self.spec_started:
            self.spec_started = True
            return "spec"
        if cfg.eager_ms > 0 and sil_ms >= cfg.eager_ms and not self.eager_reported:
            self.eager_reported = True
            return "eager"
        return None

    def _new_pause(self):
        """No silence counted yet, and nothing decided about it."""
        self.silence = 0
        self.turn_checked = False
        self.complete = False
        self.spec_started = False
        self.eager_reported = False
        self.held = False

    def _voiced(self):
        """A voiced chunk in the utterance: the pause, and what was decided in it, is over."""
        self._new_pause()
        self.speech_end = self.pos
        self.voice_seq += 1

    def judged_complete(self):
        """The end-of-turn check found the turn complete: "end" once the silence has
        reached `turn_check_ms` (the check runs `turn_lead_ms` ahead of it, so its verdict
        is ready then), else None: the stream ends the turn there unless speech resumes."""
        if self.ms(self.silence) >= self.cfg.turn_check_ms:
            return "end"
        self.complete = True
        return None

    def recheck_due(self, sil_ms):
        """Whether Smart Turn is asked again in this pause: re-asking is on, the last
        verdict was "unfinished" (the pause goes on, not held: a held turn waits for the
        cap) and `turn_recheck_ms` of silence have passed since."""
        step = self.cfg.turn_recheck_ms
        return step > 0 and not self.held and sil_ms >= self.checked_at_ms + step

    def can_hold(self):
        """Whether the current silence may still be held: the hold is on, not yet held,
        and the cap lies beyond the silence so far."""
        return self.cfg.hold and not self.held and self.ms(self.silence) < self.cfg.hold_cap_ms()

    def hold(self):
        """Keeps the turn open after an end-of-turn decision (an unfinished transcript):
        it ends at the silence cap ("end") unless the caller goes on."""
        self.held = True
        self.holds += 1

    def uncovered_ms(self) -> float:
        """Milliseconds of the utterance's speech after the audio of the latest partial
        (0 when the partial heard it all)."""
        return max(0.0, self.ms(self.speech_end - self.partial_end))

    def audio(self) -> np.ndarray:
        if not self.utt:
            return np.zeros(0, dtype=np.float32)
        if len(self.utt) > 1:
            self.utt = [np.concatenate(self.utt)]
        return self.utt[0]

    def flush_input(self):
        """End of stream: pushes the resampler's tail and the last partial VAD chunk
        into the utterance."""
        if self.resampler is not None:
            self._append_input(b"", last=True)
        if self.pending.size:
            self.utt.append(self.pending)
            self.utt_len += self.pending.size
            self.pos += self.pending.size
            self.pending = np.zeros(0, dtype=np.float32)

    def start_s(self) -> float:
        return self.utt_start / SR

    def want_partial(self):
        return (
            self.speech
            and self.silence == 0
            and (self.partial_task is None or self.partial_task.done())
            and (self.spec is None or self.spec[0].done())
            and self.utt_len - self.partial_at >= self.cfg.partial_interval * SR
        )

    def take_utterance(self, endpoint=True):
        """Ends the current utterance; returns (audio, start_s). `endpoint`: ended by
        the endpointing (counted in the latency figures), not by a flush."""
        audio, start = self.audio(), self.start_s()
        if self.speech and endpoint:
            self.turn_latencies.append(self.ms(self.pos - self.speech_end))
        self.utt_start += self.utt_len
        self.utt, self.utt_len = [], 0
        self.speech = False
        self.run = 0
        self._new_pause()
        self.partial = ""
        self.partial_at = 0
        self.partial_end = 0
        self.spec = None
        self.utterance_id += 1
        self.finals += 1
        return audio, start
