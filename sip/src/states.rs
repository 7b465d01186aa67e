//! One rsipstack dialog-state channel for the whole stack, routed to each leg's driver.
//!
//! rsipstack reports a dialog's states through a tokio unbounded sender handed over when the
//! dialog is created. A tokio channel allocates its first block of 32 slots up front, and a
//! [`DialogState`] is about 300 bytes, so a channel per leg cost every live call 9.7 KiB
//! before a single state was sent. Every dialog shares one sender instead; one routing task
//! reads the states and hands each to its leg through a queue that allocates per message
//! (a call sees a handful of states).
//!
//! A leg is known by its Call-ID and local tag, the two parts of a dialog id that never
//! change (the remote tag is learnt on the first response). States for an id nobody
//! registered yet are held and handed over on registration. A leg registers right after
//! its dialog is made, with no await between (an outbound leg before its INVITE is sent),
//! so what is not claimed within [`UNCLAIMED_TTL`] never will be: mostly a state that came
//! after its leg ended (the `Terminated` that follows our BYE). It is dropped when the next
//! unclaimed state arrives.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use parking_lot::Mutex;
use rsipstack::dialog::DialogId;
use rsipstack::dialog::dialog::{DialogState, DialogStateSender};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long states of an unregistered dialog are kept. Under load, this times the call
/// rate is how many such states are held, so it is kept short.
pub(crate) const UNCLAIMED_TTL: Duration = Duration::from_secs(2);

/// (Call-ID, local tag).
type LegKey = (String, String);

fn key_of(id: &DialogId) -> LegKey {
    (id.call_id.clone(), id.local_tag.clone())
}

#[derive(Default)]
struct Routes {
    legs: HashMap<LegKey, UnboundedSender<DialogState>>,
    /// States of dialogs not registered yet, with when the first arrived.
    unclaimed: HashMap<LegKey, (Instant, Vec<DialogState>)>,
}

impl Routes {
    fn deliver(&mut self, state: DialogState, now: Instant) {
        let key = key_of(state.id());
        if let Some(tx) = self.legs.get(&key) {
            // A closed queue means the leg is being torn down; its route goes with it.
            let _ = tx.unbounded_send(state);
            return;
        }
        self.unclaimed
            .retain(|_, (since, _)| now.duration_since(*since) < UNCLAIMED_TTL);
        self.unclaimed
            .entry(key)
            .or_insert_with(|| (now, Vec::new()))
            .1
            .push(state);
    }
}

/// The stack-wide state channel and the routes from it to the legs.
pub(crate) struct StateRouter {
    sender: DialogStateSender,
    routes: Arc<Mutex<Routes>>,
}

impl StateRouter {
    /// Starts the routing task; it ends with `cancel` or when every sender is gone.
    pub fn start(cancel: CancellationToken) -> StateRouter {
        let (sender, mut rx) = tokio::sync::mpsc::unbounded_channel::<DialogState>();
        let routes = Arc::new(Mutex::new(Routes::default()));
        let task_routes = routes.clone();
        tokio::spawn(async move {
            loop {
                let state = tokio::select! {
                    _ = cancel.cancelled() => break,
                    s = rx.recv() => match s { Some(s) => s, None => break },
                };
                task_routes.lock().deliver(state, Instant::now());
            }
        });
        StateRouter { sender, routes }
    }

    /// The sender to give rsipstack for a new dialog.
    pub fn sender(&self) -> DialogStateSender {
        self.sender.clone()
    }

    /// The states of the dialog `id`, from now on plus any that came before. The route
    /// is removed when the returned queue is dropped.
    pub fn register(&self, id: &DialogId) -> LegStates {
        let key = key_of(id);
        let (tx, rx) = unbounded();
        let mut routes = self.routes.lock();
        if let Some((_, early)) = routes.unclaimed.remove(&key) {
            for s in early {
                let _ = tx.unbounded_send(s);
            }
        }
        routes.legs.insert(key.clone(), tx);
        LegStates {
            rx,
            routes: self.routes.clone(),
            key,
        }
    }
}

/// One leg's dialog states, in the order rsipstack reported them.
pub(crate) struct LegStates {
    rx: UnboundedReceiver<DialogState>,
    routes: Arc<Mutex<Routes>>,
    key: LegKey,
}

impl LegStates {
    /// The next state. Cancel-safe: a state is never lost by dropping the future.
    pub async fn recv(&mut self) -> Option<DialogState> {
        self.rx.next().await
    }
}

impl Drop for LegStates {
    fn drop(&mut self) {
        self.routes.lock().legs.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsipstack::dialog::dialog::TerminatedReason;

    fn id(call: &str, local: &str, remote: &str) -> DialogId {
        DialogId {
            call_id: call.into(),
            local_tag: local.into(),
            remote_tag: remote.into(),
        }
    }

    fn label(s: &DialogState) -> String {
        match s {
            DialogState::Calling(id) => format!("calling {}", id.remote_tag),
            DialogState::Trying(id) => format!("trying {}", id.remote_tag),
            DialogState::Terminated(id, _) => format!("terminated {}", id.remote_tag),
            _ => "other".into(),
        }
    }

    async fn next(states: &mut LegStates) -> String {
        let s = tokio::time::timeout(Duration::from_secs(2), states.recv())
            .await
            .expect("a state in time")
            .expect("queue open");
        label(&s)
    }

    #[tokio::test]
    async fn states_reach_their_leg_in_order_even_before_it_registers() {
        let router = StateRouter::start(CancellationToken::new());
        let tx = router.sender();
        // Two dialogs of one Call-ID (a call to ourselves): told apart by the local tag.
        tx.send(DialogState::Calling(id("c1", "uac", ""))).unwrap();
        tx.send(DialogState::Trying(id("c1", "uac", "uas")))
            .unwrap();
        tx.send(DialogState::Calling(id("c1", "uas", "uac")))
            .unwrap();
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut uac = router.register(&id("c1", "uac", ""));
        let mut uas = router.register(&id("c1", "uas", "uac"));
        tx.send(DialogState::Terminated(
            id("c1", "uac", "uas"),
            TerminatedReason::UasBye,
        ))
        .unwrap();
        assert_eq!(next(&mut uac).await, "calling ");
        assert_eq!(next(&mut uac).await, "trying uas");
        assert_eq!(next(&mut uac).await, "terminated uas");
        assert_eq!(next(&mut uas).await, "calling uac");
        // Nothing of the other dialog leaked into this one.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), uas.recv())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_dropped_leg_takes_its_route_and_unclaimed_states_expire() {
        let router = StateRouter::start(CancellationToken::new());
        let leg = router.register(&id("c2", "a", ""));
        assert_eq!(router.routes.lock().legs.len(), 1);
        drop(leg);
        assert!(router.routes.lock().legs.is_empty());

        let t0 = Instant::now();
        let mut routes = Routes::default();
        routes.deliver(DialogState::Calling(id("old", "x", "")), t0);
        routes.deliver(DialogState::Calling(id("old", "x", "")), t0);
        assert_eq!(routes.unclaimed[&key_of(&id("old", "x", ""))].1.len(), 2);
        // A later state for another dialog sweeps out what waited past the TTL.
        routes.deliver(
            DialogState::Calling(id("new", "y", "")),
            t0 + UNCLAIMED_TTL + Duration::from_millis(1),
        );
        assert_eq!(routes.unclaimed.len(), 1);
        assert!(routes.unclaimed.contains_key(&key_of(&id("new", "y", ""))));
    }
}
