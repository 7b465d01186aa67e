//! The call's I/O: its leg (SIP or browser), its media session, and what ends the call.
//!
//! Everything a waiting call must take in comes out of one [`CallIo::next`]: keys from
//! either source (RFC 4733 through the media, SIP INFO through the leg) as one
//! [`CallEvent::Digit`], the other media events, and the call's end. The end is applied
//! here, once: the leg's end is noted, and a reason of the engine's to end the call
//! (maximum duration, shutdown, RTP timeout, a hang-up through the API) is reported once
//! and hangs the leg up. A caller that waits on something else (a model, a fetch, a
//! transfer's second leg) selects on `next` beside it and decides only what the event
//! means to it.

use std::time::Duration;

use callsmith_media::{MediaEvent, MediaEvents};
use callsmith_sip::{CallStatus, EndInfo, LegEvent, Party};
use futures::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::leg::Leg;
use super::media::CallMedia;

/// What happened on a call while it waits.
#[derive(Debug)]
pub(super) enum CallEvent {
    /// A key, whichever way it came (RFC 4733 or SIP INFO).
    Digit(char),
    /// A media event other than a key (speech started or stopped, ...).
    Media(MediaEvent),
    /// The call ended (reported once for each way it ends).
    Ended(CallEnd),
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CallEnd {
    /// The leg ended: the caller hung up, or the leg is gone.
    HungUp,
    /// The engine ends the call; its leg is being hung up.
    Forced(ForcedEnd),
}

impl CallEnd {
    /// Why a wait on something else stops.
    pub(super) fn why(self) -> &'static str {
        match self {
            CallEnd::HungUp => "the caller hung up",
            CallEnd::Forced(_) => "the call ended",
        }
    }
}

/// Why the engine ended a call itself: the saved history's vocabulary (its `reason` is the
/// communication's `end_reason`).
pub use callsmith_domain::communication::history::ForcedEnd;

/// The leg events an answered call acts on.
enum Signal {
    Dtmf(char),
    /// A re-INVITE re-keyed the leg's SRTP: the media takes the new keys.
    Rekeyed(callsmith_sip::SrtpKeys),
    Ended(EndInfo),
}

/// The next [`Signal`] of the leg, passing over the events an answered call has no use
/// for; `None` once the leg is gone. Cancel-safe: an event is taken only when returned or
/// passed over.
async fn next_signal(leg: &mut Leg) -> Option<Signal> {
    loop {
        match leg.next_event().await? {
            LegEvent::Dtmf(d) => return Some(Signal::Dtmf(d)),
            LegEvent::SrtpRekeyed(keys) => return Some(Signal::Rekeyed(keys)),
            LegEvent::Ended(e) => return Some(Signal::Ended(e)),
            _ => {}
        }
    }
}

/// What one wait of [`CallIo::next`] saw, before the call's end is applied.
enum Happening {
    Media(Option<MediaEvent>),
    Signal(Option<Signal>),
    Forced(ForcedEnd),
}

/// An answered call's leg and media session, and the reasons that end it.
pub(super) struct CallIo {
    /// The call's media session (prompts, recognition, recording, a bridge).
    pub(super) session: CallMedia,
    media_events: Option<MediaEvents>,
    /// The call's leg (SIP or browser): its events, and hanging up or transferring it.
    pub(super) leg: Leg,
    /// How the leg ended, once it reported it.
    ended: Option<EndInfo>,
    /// When the call reaches `dialer.max_call_secs`.
    deadline: Instant,
    /// Cancelled when the engine's drain time runs out.
    hangup_all: CancellationToken,
    /// Cancelled when `POST /v1/communication/{id}/hangup` asks this call to end.
    hangup: CancellationToken,
    /// Why the engine ended the call, when it did.
    forced: Option<ForcedEnd>,
    /// Keys pressed while no listen turn took them (during a prompt, a model's answer),
    /// kept for the next listen turn.
    typed: String,
}

impl CallIo {
    /// The I/O of a call answered now, ended by the engine at `deadline`, on a shutdown's
    /// `hangup_all` or on the API's `hangup`.
    pub(super) fn new(
        mut session: CallMedia,
        leg: Leg,
        deadline: Instant,
        hangup_all: CancellationToken,
        hangup: CancellationToken,
    ) -> CallIo {
        CallIo {
            media_events: session.take_events(),
            session,
            leg,
            ended: None,
            deadline,
            hangup_all,
            hangup,
            forced: None,
            typed: String::new(),
        }
    }

    /// Whether the leg has ended (the caller hung up, or the leg is gone).
    pub(super) fn hung_up(&self) -> bool {
        self.ended.is_some()
    }

    /// How the leg ended, once it did.
    pub(super) fn end_info(&self) -> Option<&EndInfo> {
        self.ended.as_ref()
    }

    /// Why the engine ended the call, when it did.
    pub(super) fn forced(&self) -> Option<ForcedEnd> {
        self.forced
    }

    /// Keeps a key for the next listen turn.
    pub(super) fn keep_digit(&mut self, d: char) {
        self.typed.push(d);
    }

    /// The keys kept for the next listen turn (taken).
    pub(super) fn take_typed(&mut self) -> String {
        std::mem::take(&mut self.typed)
    }

    /// Hangs the leg up (its end is then reported by [`CallIo::next`]).
    pub(super) fn hangup(&self) {
        self.leg.hangup();
    }

    /// The next thing that happens on the call. Cancel-safe: an event is taken only when
    /// returned (a finished media stream is noted and not waited on again).
    ///
    /// Each reason of the engine's to end the call is reported once, as
    /// [`CallEnd::Forced`] (the leg is hung up); after that only the leg's end and the
    /// media are waited for. The leg is heard until it reported its end: after that it
    /// answers every poll at once with nothing, and a wait that outlasts the end (a prompt
    /// being stopped after the caller hung up) would spin on it; a wait that begins after
    /// the end checks [`CallIo::hung_up`] before it waits.
    pub(super) async fn next(&mut self) -> CallEvent {
        loop {
            match self.happening().await {
                Happening::Media(Some(MediaEvent::Dtmf { digit, .. })) => {
                    return CallEvent::Digit(digit);
                }
                Happening::Media(Some(m)) => return CallEvent::Media(m),
                Happening::Media(None) => self.media_events = None,
                Happening::Signal(Some(Signal::Dtmf(d))) => return CallEvent::Digit(d),
                Happening::Signal(Some(Signal::Rekeyed(keys))) => self.rekey(&keys),
                Happening::Signal(s) => {
                    self.leg_ended(s);
                    return CallEvent::Ended(CallEnd::HungUp);
                }
                Happening::Forced(f) => {
                    self.forced = Some(f);
                    self.leg.hangup();
                    return CallEvent::Ended(CallEnd::Forced(f));
                }
            }
        }
    }

    async fn happening(&mut self) -> Happening {
        let open = self.forced.is_none();
        let leg_open = self.ended.is_none();
        let (deadline, events, leg) = (self.deadline, &mut self.media_events, &mut self.leg);
        let media = async {
            match events.as_mut() {
                Some(rx) => rx.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            m = media => match m {
                Some(MediaEvent::RtpTimeout { .. }) if open => Happening::Forced(ForcedEnd::RtpTimeout),
                m => Happening::Media(m),
            },
            s = next_signal(leg), if leg_open => Happening::Signal(s),
            _ = tokio::time::sleep_until(deadline), if open => Happening::Forced(ForcedEnd::MaxDuration),
            _ = self.hangup_all.cancelled(), if open => Happening::Forced(ForcedEnd::Shutdown),
            _ = self.hangup.cancelled(), if open => Happening::Forced(ForcedEnd::HangupRequested),
        }
    }

    /// Hands a re-INVITE's new SRTP keys to the media (see
    /// `callsmith_media::srtp::SrtpContexts::continue_from`).
    fn rekey(&self, keys: &callsmith_sip::SrtpKeys) {
        if let Err(e) = self.session.rekey_srtp(&super::srtp_params(keys)) {
            warn!(error = %e, "re-keying the call's SRTP failed");
        }
    }

    /// Notes the leg's end (`None`: the leg is gone without saying how).
    fn leg_ended(&mut self, s: Option<Signal>) {
        match s {
            Some(Signal::Ended(e)) => self.ended = Some(e),
            Some(Signal::Rekeyed(keys)) => self.rekey(&keys),
            Some(Signal::Dtmf(_)) => {}
            None => {
                self.ended.get_or_insert(EndInfo {
                    call_status: CallStatus::Answered,
                    sip_code: None,
                    reason: "leg closed".into(),
                    by: Party::Remote,
                });
            }
        }
    }

    /// Waits, at most `within`, for the leg to report its end (after we hung it up). Keys
    /// pressed meanwhile are of no use any more.
    pub(super) async fn wait_leg_end(&mut self, within: Duration) {
        let until = Instant::now() + within;
        while self.ended.is_none() {
            match tokio::time::timeout_at(until, next_signal(&mut self.leg)).await {
                Ok(s) => self.leg_ended(s),
                Err(_) => break,
            }
        }
    }

    /// Gives back the media session (the call is over).
    pub(super) fn into_session(self) -> CallMedia {
        self.session
    }
}
