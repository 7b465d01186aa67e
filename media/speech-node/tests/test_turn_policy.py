"""The turn policy of the node: the unfinished-transcript hold and the stream's patience.

The hold is judged on text (node_stt.unfinished) and applied by the stream (a held silence
ends at the cap) and the session (server.RecSession.decide, with a scripted recogniser in
place of Whisper: the transcript is what the test says it is).
"""

import asyncio
import os
import sys
import types

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True

from node_stt import EndpointConfig, Stream, unfinished  # noqa: E402
from test_stream import CHUNK_MS, chunks_for, energy, events, silence, tone  # noqa: E402


@pytest.mark.parametrize(
    "text",
    ["I'd like to", "My number is", "um", "Yes and", "I want the", "It's for my", "Well", "so",
     "I'd like to...", "My number is five five five,", "Uh, maybe", "My numbers", "your address"],
)
def test_an_answer_that_ends_open_is_unfinished(text):
    assert unfinished(text, "en")


@pytest.mark.parametrize(
    "text",
    ["", "Yes", "No thanks", "Sure, call me back.", "I'd like to maybe next week.", "What is this about?",
     "Not today.", "Hold on", "I like that", "Thank you", "five five five one two", "My number is 555 1234."],
)
def test_a_finished_answer_is_not(text):
    assert not unfinished(text, "en")


def test_a_digit_run_is_unfinished_only_when_the_question_expects_digits():
    for text in ("my number is five five five one two", "it's 555 12", "Double oh"):
        assert unfinished(text, "en", digits=True), text
        assert not unfinished(text, "en") or text == "Double oh", text
    assert not unfinished("my number is 555 1234, thanks", "en", digits=True)


def test_languages_without_word_lists_are_never_held():
    assert unfinished("I'd like to", "en")
    assert not unfinished("Ich möchte und", "de")
    assert not unfinished("I'd like to", "fr")


def test_a_held_fixed_timer_ends_at_the_cap_instead():
    taken = []
    s = Stream(energy(silence_ms=700, max_silence_ms=1500, final_start_ms=100), None, rate=1 * 16000)
    got = []
    for ev, _at in events(s, tone(600) + silence(50)):
        got.append(ev)
    assert got == []
    data = silence(1800)
    out = []
    ev = s.feed(data)
    while ev is not None:
        out.append((ev, s.ms(s.silence)))
        if ev == "end" and s.can_hold():
            s.hold()  # what the session does for an unfinished transcript
        elif ev == "end":
            taken.append(s.take_utterance())
        ev = s.feed(b"")
    assert [e for e, _ in out] == ["spec", "end", "end"]
    assert out[1][1] == pytest.approx(chunks_for(700), abs=CHUNK_MS)
    assert out[2][1] == pytest.approx(chunks_for(1500), abs=CHUNK_MS)
    assert len(taken) == 1 and s.holds == 1


def test_no_hold_when_it_is_off_or_the_cap_leaves_no_room():
    for cfg in (energy(silence_ms=700, max_silence_ms=1500, hold=False), energy(silence_ms=700, max_silence_ms=700)):
        s = Stream(cfg, None, rate=16000)
        events(s, tone(600))
        s.silence = 700 * 16
        assert not s.can_hold()


def test_speech_after_a_hold_reopens_the_turn_and_may_be_held_again():
    s = Stream(energy(silence_ms=700, max_silence_ms=1500), None, rate=16000)
    events(s, tone(600))
    s.silence = 700 * 16
    s.hold()
    assert not s.can_hold()
    events(s, tone(300))
    assert not s.held and s.can_hold()


def test_patience_sets_how_soon_the_turn_may_end():
    cfg = EndpointConfig()
    cfg.apply_patience("digits")
    assert (cfg.turn_check_ms, cfg.turn_threshold, cfg.max_silence_ms, cfg.hold_digits) == (300, 0.7, 2000, True)
    cfg = EndpointConfig()
    cfg.apply_patience("short")
    assert (cfg.turn_check_ms, cfg.max_silence_ms, cfg.hold_digits) == (200, 800, False)
    with pytest.raises(ValueError):
        EndpointConfig().apply_patience("eager")


# ---------------------------------------------------------------------------
# The session: server.RecSession.decide with a scripted recogniser.


@pytest.fixture
def server(monkeypatch):
    import server as srv

    # The scripted recogniser and turn model are set per test; the node's are restored.
    monkeypatch.setattr(srv.E, "rec", None)
    monkeypatch.setattr(srv.E, "turn", None)
    return srv


def args(srv, *argv):
    return srv.parse_args(list(argv))


def test_the_streams_patience_and_its_explicit_endpointing(server):
    a = args(server, "--endpoint", "fixed")
    cfg = server.endpoint_cfg(a, None, None, "long")
    assert (cfg.patience, cfg.max_silence_ms, cfg.turn_threshold) == ("long", 2000, 0.7)
    # The question's explicit silence wins over the patience's cap.
    cfg = server.endpoint_cfg(a, "1000", None, "long")
    assert (cfg.max_silence_ms, cfg.silence_ms, cfg.turn_threshold) == (1000, 1000, 0.7)
    # --patience off: every stream normal; an unknown level is refused either way.
    off = args(server, "--patience", "off")
    assert server.endpoint_cfg(off, None, None, "long").max_silence_ms == 1200
    with pytest.raises(ValueError):
        server.endpoint_cfg(off, None, None, "eager")
    assert server.endpoint_cfg(a, None, None, None).patience == "normal"
    assert server.endpoint_cfg(args(server, "--turn-hold", "off"), None, None, None).hold is False


class FakeWs:
    def __init__(self):
        self.sent = []

    async def send_str(self, s):
        self.sent.append(s)


def run_turn(srv, transcript, cfg):
    """Feeds 600 ms of tone and 2 s of silence through a session whose recogniser hears
    `transcript`; returns (events decided, silence ms at each)."""
    srv.E.rec = types.SimpleNamespace(transcribe=lambda *a, **k: (transcript, [], 0.6, "en"))

    async def go():
        sess = srv.RecSession(FakeWs(), cfg, 16000)
        st = sess.stream
        out = []
        ev = st.feed(tone(600) + silence(2000))
        while ev is not None:
            d = await sess.decide(ev)
            if d in ("end", "max"):
                out.append((d, st.ms(st.silence)))
                await sess.final()
            ev = st.feed(b"")
        return out, st.holds

    return asyncio.run(go())


def test_an_unfinished_transcript_holds_the_turn_to_the_cap(server):
    cfg = energy(silence_ms=700, max_silence_ms=1500)
    out, holds = run_turn(server, "I'd like to", cfg)
    assert holds == 1
    assert [e for e, _ in out] == ["end"]
    assert out[0][1] == pytest.approx(chunks_for(1500), abs=CHUNK_MS)
    # A finished answer ends at the timer; with the hold off so does an open one.
    out, holds = run_turn(server, "Maybe next week.", energy(silence_ms=700, max_silence_ms=1500))
    assert holds == 0 and out[0][1] == pytest.approx(chunks_for(700), abs=CHUNK_MS)
    out, holds = run_turn(server, "I'd like to", energy(silence_ms=700, max_silence_ms=1500, hold=False))
    assert holds == 0 and out[0][1] == pytest.approx(chunks_for(700), abs=CHUNK_MS)


def test_smart_turns_complete_is_held_for_an_unfinished_transcript(server):
    server.E.turn = types.SimpleNamespace(predict=lambda audio: 0.99)  # "complete" every time
    cfg = energy(mode="smart", turn_check_ms=200, max_silence_ms=1200)
    out, holds = run_turn(server, "My number is", cfg)
    assert holds == 1 and out[0][1] == pytest.approx(chunks_for(1200), abs=CHUNK_MS)
    out, holds = run_turn(server, "Yes, please.", energy(mode="smart", turn_check_ms=200, max_silence_ms=1200))
    assert holds == 0 and out[0][1] == pytest.approx(chunks_for(200), abs=CHUNK_MS)


def test_smart_turn_is_asked_again_while_the_pause_goes_on(server):
    # The turn model finds the turn unfinished at its first check (200 ms of silence) and
    # complete from its second on: the turn ends at the re-check, 150 ms later, not at
    # the 1200 ms cap.
    def scripted(*ps):
        asked = []

        def predict(audio):
            asked.append(audio.size)
            return ps[min(len(asked), len(ps)) - 1]

        return types.SimpleNamespace(predict=predict), asked

    server.E.turn, asked = scripted(0.2, 0.9)
    cfg = energy(mode="smart", turn_check_ms=200, turn_recheck_ms=150, max_silence_ms=1200)
    out, _ = run_turn(server, "Yes, please.", cfg)
    assert [e for e, _ in out] == ["end"]
    assert out[0][1] == pytest.approx(chunks_for(350), abs=CHUNK_MS)
    assert len(asked) == 2 and asked[1] > asked[0]  # the second saw the longer pause
    # Re-asking off: the first verdict waits for the cap.
    server.E.turn, asked = scripted(0.2, 0.9)
    cfg = energy(mode="smart", turn_check_ms=200, turn_recheck_ms=0, max_silence_ms=1200)
    out, _ = run_turn(server, "Yes, please.", cfg)
    assert out[0][1] == pytest.approx(chunks_for(1200), abs=CHUNK_MS) and len(asked) == 1
    # Unfinished every time: asked every 150 ms up to the cap, which ends the turn.
    server.E.turn, asked = scripted(0.2)
    cfg = energy(mode="smart", turn_check_ms=200, turn_recheck_ms=150, max_silence_ms=1200)
    out, _ = run_turn(server, "Yes, please.", cfg)
    assert out[0][1] == pytest.approx(chunks_for(1200), abs=CHUNK_MS)
    assert 6 <= len(asked) <= 8, asked
    # A held turn (complete, but the transcript ends open) is not asked again: the cap.
    server.E.turn, asked = scripted(0.99)
    cfg = energy(mode="smart", turn_check_ms=200, turn_recheck_ms=150, max_silence_ms=1200)
    out, holds = run_turn(server, "My number is", cfg)
    assert holds == 1 and len(asked) == 1
    assert out[0][1] == pytest.approx(chunks_for(1200), abs=CHUNK_MS)


def test_the_node_switch_for_asking_again(server):
    assert server.endpoint_cfg(args(server), None, None, None).turn_recheck_ms == 150
    assert server.endpoint_cfg(args(server, "--turn-recheck-ms", "100"), None, None, None).turn_recheck_ms == 100
    assert server.endpoint_cfg(args(server, "--turn-recheck", "off"), None, None, None).turn_recheck_ms == 0


# ---------------------------------------------------------------------------
# The Deepgram-style endpoint end to end (aiohttp test server, scripted models).


def listen(srv, monkeypatch, transcript, query, *argv, audio=None, p=0.99):
    """Streams 600 ms of tone and 2 s of silence (16 kHz) to /v1/listen on a node whose
    recogniser hears `transcript` and whose turn model always answers `p`; returns the
    JSON messages the node sent, in order."""
    import json

    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer

    monkeypatch.setattr(srv.E, "rec", types.SimpleNamespace(transcribe=lambda *a, **k: (transcript, [], 0.6, "en")))
    monkeypatch.setattr(srv.E, "turn", types.SimpleNamespace(predict=lambda audio: p))
    monkeypatch.setattr(srv.E, "vad", None)
    srv.E.ready.set()
    args = srv.parse_args(["--vad", "energy", "--partial-interval", "0.3", *argv])

    async def go():
        app = web.Application()
        app["args"] = args
        app.router.add_get("/v1/listen", srv.deepgram_ws)
        async with TestClient(TestServer(app)) as client:
            ws = await client.ws_connect("/v1/listen?encoding=linear16&sample_rate=16000&" + query)
            data = audio if audio is not None else tone(600) + silence(2000)
            for i in range(0, len(data), 640):
                await ws.send_bytes(data[i : i + 640])
                await asyncio.sleep(0.002)  # lets partials finish between frames
            await ws.send_str('{"type":"CloseStream"}')
            out = []
            async for msg in ws:
                out.append(json.loads(msg.data))
            return out

    return asyncio.run(go())


def kinds(msgs):
    return [(m["type"], m.get("is_final")) for m in msgs if m["type"] != "Metadata"]


def test_the_end_of_turn_event_names_the_interim_transcript_before_the_final(server, monkeypatch):
    msgs = listen(server, monkeypatch, "Yes please.", "interim_results=true")
    eot = [m for m in msgs if m["type"] == "EndOfTurn"]
    assert len(eot) == 1 and eot[0]["transcript"] == "Yes please."
    assert eot[0]["uncovered_ms"] >= 0
    i = msgs.index(eot[0])
    finals = [j for j, m in enumerate(msgs) if m.get("is_final")]
    assert finals and finals[0] > i  # ahead of the final
    # Off, or without interim results: no such event.
    for query, argv in (("interim_results=true", ("--end-of-turn-events", "off")), ("interim_results=false", ())):
        msgs = listen(server, monkeypatch, "Yes please.", query, *argv)
        assert not [m for m in msgs if m["type"] == "EndOfTurn"]
        assert [m for m in msgs if m.get("is_final")]


def test_a_caller_who_pauses_after_an_open_ending_gets_one_turn(server, monkeypatch):
    # "I'd like to", 500 ms of silence, more words: held, one final for both parts; with
    # the hold off the pause ends a turn (the bot would talk over the rest).
    audio = tone(600) + silence(500) + tone(600) + silence(2000)

    def finals(msgs):
        return [m for m in msgs if m.get("is_final")]

    held = listen(server, monkeypatch, "I'd like to", "interim_results=true&endpointing=1200", audio=audio)
    assert len(finals(held)) == 1 and finals(held)[0]["speech_final"] is True
    assert finals(held)[0]["channel"]["alternatives"][0]["transcript"] == "I'd like to"
    off = listen(server, monkeypatch, "I'd like to", "interim_results=true&endpointing=1200", "--turn-hold", "off",
                 audio=audio)
    assert len(finals(off)) == 2
    # A finished answer is not held: two turns either way.
    assert len(finals(listen(server, monkeypatch, "Yes.", "interim_results=true&endpointing=1200", audio=audio))) == 2


def test_patience_sets_how_sure_the_turn_model_must_be_and_the_cap(server, monkeypatch):
    # A 1500 ms pause and a turn model 60 % sure the turn is over: enough for a normal
    # stream (threshold 0.5, two turns); a long one waits (0.7, cap 2000 ms: one turn),
    # unless the node ignores patience.
    audio = tone(600) + silence(1500) + tone(600) + silence(2500)

    def turns(query, *argv):
        msgs = listen(server, monkeypatch, "Yes.", "interim_results=true&" + query, *argv, audio=audio, p=0.6)
        return len([m for m in msgs if m.get("is_final")])

    assert turns("patience=normal") == 2
    assert turns("patience=long") == 1
    assert turns("patience=long", "--patience", "off") == 2
    # The question's own endpointing wins over the patience's cap.
    assert turns("patience=long&endpointing=1000") == 2
    # An unknown patience closes the stream with 1008 before any result.
    assert listen(server, monkeypatch, "Yes.", "patience=eager") == []


def test_the_eager_end_of_turn_is_taken_back_when_the_caller_goes_on(server, monkeypatch):
    # "Yes", a 500 ms pause, more words: the turn model finds the pause unfinished, so the
    # turn runs on to one final; with the eager end of turn the node announces the likely
    # end at 150 ms of silence, takes it back when the speech resumes, and announces it
    # again in the last silence, ahead of the turn's EndOfTurn and final.
    audio = tone(600) + silence(500) + tone(600) + silence(2000)
    query = "interim_results=true&endpointing=1200"

    def flow(msgs):
        return [m["type"] if m["type"] != "Results" else ("final" if m["is_final"] else "interim")
                for m in msgs if m["type"] != "Metadata" and not (m["type"] == "Results" and not m["is_final"])]

    msgs = listen(server, monkeypatch, "Yes, call me back.", query, "--eager-end-of-turn", "on", "--turn-recheck",
                  "off", audio=audio, p=0.1)
    assert flow(msgs) == ["EagerEndOfTurn", "TurnResumed", "EagerEndOfTurn", "EndOfTurn", "final"], flow(msgs)
    eager = [m for m in msgs if m["type"] == "EagerEndOfTurn"]
    assert all(m["transcript"] == "Yes, call me back." for m in eager)
    # Off (the default), or for a question expecting a long answer: no eager events.
    for argv, q in ((("--turn-recheck", "off"), query), (("--eager-end-of-turn", "on"), query + "&patience=long")):
        msgs = listen(server, monkeypatch, "Yes, call me back.", q, *argv, audio=audio, p=0.1)
        assert not [m for m in msgs if m["type"] in ("EagerEndOfTurn", "TurnResumed")], flow(msgs)
        assert flow(msgs)[-2:] == ["EndOfTurn", "final"]


def test_an_eager_end_of_turn_the_caller_does_not_take_back_is_followed_by_the_final(server, monkeypatch):
    msgs = listen(server, monkeypatch, "Yes please.", "interim_results=true", "--eager-end-of-turn", "on", p=0.99)
    types_ = [m["type"] for m in msgs if m["type"] in ("EagerEndOfTurn", "TurnResumed", "EndOfTurn")]
    assert types_ == ["EagerEndOfTurn", "EndOfTurn"], types_
    finals = [i for i, m in enumerate(msgs) if m.get("is_final")]
    assert len(finals) == 1 and finals[0] > [m["type"] for m in msgs].index("EagerEndOfTurn")
