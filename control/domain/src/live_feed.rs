//! What a running test call is doing, as it happens: the engine publishes each call's
//! events (the brick being run, variables, prompts, transcripts, turn latencies, the end)
//! to a [`LiveFeed`], and `GET /v1/communication/{id}/live` streams them. A subscriber that
//! comes late first gets what the call published so far (up to [`REPLAY`] events), so a
//! console that opens the stream after placing the call sees it from its first brick.
//!
//! Feeds exist for test calls (`is_test`: browser calls and scenario test dispatches) on
//! the node running them; production calls publish nothing and cost nothing here. The feeds
//! are per process: on PostgreSQL another node serves a call's feed by relaying the stream
//! of the node running it (`callsmith_control::live_relay`).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

/// Events kept for late subscribers, per call.
pub const REPLAY: usize = 512;
/// Events a slow subscriber may fall behind by before it misses some.
const BACKLOG: usize = 256;

/// One event: its name (the SSE `event:` field) and its JSON body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveEvent {
    pub name: &'static str,
    pub data: Value,
}

impl LiveEvent {
    /// The name of the event that ends every feed.
    pub const ENDED: &'static str = "ended";
}

#[derive(Debug)]
struct Feed {
    replay: Vec<LiveEvent>,
    tx: broadcast::Sender<LiveEvent>,
    /// Registration number (a sid registered again replaces the older feed).
    number: u64,
}

/// The live feeds of this process, by communication sid.
#[derive(Debug, Default)]
pub struct LiveFeeds {
    feeds: Mutex<HashMap<String, Feed>>,
    next: std::sync::atomic::AtomicU64,
}

/// A subscription: what was published before it, then what comes.
#[derive(Debug)]
pub struct Subscription {
    pub replay: Vec<LiveEvent>,
    pub rx: broadcast::Receiver<LiveEvent>,
}

impl LiveFeeds {
    /// Opens the feed of a call; it closes when the returned publisher is dropped.
    pub fn open(self: &Arc<Self>, communication_sid: &str) -> LiveFeed {
        let number = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, _) = broadcast::channel(BACKLOG);
        self.feeds.lock().insert(
            communication_sid.to_string(),
            Feed {
                replay: Vec::new(),
                tx,
                number,
            },
        );
        LiveFeed {
            registry: self.clone(),
            sid: communication_sid.to_string(),
            number,
        }
    }

    /// Subscribes to a call's feed; `None` when the call has none on this node.
    pub fn subscribe(&self, communication_sid: &str) -> Option<Subscription> {
        let feeds = self.feeds.lock();
        let feed = feeds.get(communication_sid)?;
        Some(Subscription {
            replay: feed.replay.clone(),
            rx: feed.tx.subscribe(),
        })
    }

    /// Calls with an open feed.
    pub fn len(&self) -> usize {
        self.feeds.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The publishing side of one call's feed.
#[derive(Debug)]
pub struct LiveFeed {
    registry: Arc<LiveFeeds>,
    sid: String,
    number: u64,
}

impl LiveFeed {
    /// Publishes one event to the call's subscribers (and keeps it for late ones).
    pub fn publish(&self, name: &'static str, data: Value) {
        let event = LiveEvent { name, data };
        let mut feeds = self.registry.feeds.lock();
        let Some(feed) = feeds.get_mut(&self.sid).filter(|f| f.number == self.number) else {
            return;
        };
        if feed.replay.len() < REPLAY {
            feed.replay.push(event.clone());
        }
        let _ = feed.tx.send(event);
    }

    /// Publishes the call's end and closes the feed.
    pub fn end(self, data: Value) {
        self.publish(LiveEvent::ENDED, data);
    }
}

impl Drop for LiveFeed {
    fn drop(&mut self) {
        let mut feeds = self.registry.feeds.lock();
        if feeds
            .get(&self.sid)
            .is_some_and(|f| f.number == self.number)
        {
            feeds.remove(&self.sid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn late_subscribers_get_the_replay_then_the_rest_and_the_end_closes() {
        let live = Arc::new(LiveFeeds::default());
        assert!(live.subscribe("com_1").is_none());
        let feed = live.open("com_1");
        feed.publish("brick", json!({"brick_id": "s"}));
        let mut sub = live.subscribe("com_1").unwrap();
        assert_eq!(sub.replay.len(), 1);
        assert_eq!(sub.replay[0].name, "brick");
        feed.publish("variable", json!({"name": "x"}));
        feed.end(json!({"status": "completed"}));
        assert_eq!(sub.rx.recv().await.unwrap().name, "variable");
        assert_eq!(sub.rx.recv().await.unwrap().name, LiveEvent::ENDED);
        assert!(
            sub.rx.recv().await.is_err(),
            "the feed closes after its end"
        );
        assert!(live.is_empty());
    }

    #[test]
    fn the_replay_is_bounded_and_a_new_feed_replaces_an_old_one() {
        let live = Arc::new(LiveFeeds::default());
        let old = live.open("com_1");
        for i in 0..REPLAY + 10 {
            old.publish("trace", json!(i));
        }
        assert_eq!(live.subscribe("com_1").unwrap().replay.len(), REPLAY);
        let new = live.open("com_1");
        old.publish("trace", json!("stale"));
        assert!(live.subscribe("com_1").unwrap().replay.is_empty());
        drop(old);
        assert_eq!(live.len(), 1, "dropping the old feed leaves the new one");
        drop(new);
        assert!(live.is_empty());
    }
}
