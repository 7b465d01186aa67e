//! The media worker's tick allocates nothing, for a wideband (G.722, 16 kHz) session as for
//! a narrowband (G.711) one: a counting global allocator watches the worker thread while
//! two G.722 sessions and two PCMU sessions send prompts to each other, with speech
//! detection on, a caller audio tap being read and a recording running on each receiver.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use callsmith_media::codec::RtpCodec;
use callsmith_media::prompt::Prompt;
use callsmith_media::recording::RecordingTarget;
use callsmith_media::{AudioRate, MediaConfig, MediaEngine, MediaSession};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{ALLOCATIONS, Counting};

/// The watched thread's id (0: none yet).
static WATCHED: AtomicI32 = AtomicI32::new(0);

fn watched() -> bool {
    let watched = WATCHED.load(Ordering::Relaxed);
    // SAFETY: gettid has no preconditions.
    watched != 0 && unsafe { libc::gettid() } == watched
}

#[global_allocator]
static GLOBAL: Counting = Counting(watched);

/// The thread id of this process's thread named `name`.
fn thread_named(name: &str) -> i32 {
    for task in std::fs::read_dir("/proc/self/task").expect("/proc") {
        let task = task.unwrap().path();
        let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            return task.file_name().unwrap().to_str().unwrap().parse().unwrap();
        }
    }
    panic!("no thread named {name}");
}

fn tone(freq: f64, rate: AudioRate, ms: usize) -> Arc<Prompt> {
    let hz = rate.hz() as f64;
    let pcm = (0..ms * rate.samples_per_ms())
        .map(|i| ((i as f64 * 2.0 * std::f64::consts::PI * freq / hz).sin() * 8000.0) as i16)
        .collect();
    Arc::new(Prompt::from_pcm_at(pcm, rate))
}

/// `caller` plays a tone to `bot`, which detects speech, taps and records it.
fn pair(engine: &MediaEngine, codec: RtpCodec, n: usize) -> (MediaSession, MediaSession) {
    let caller = engine.open_session(None).unwrap();
    let bot = engine.open_session(None).unwrap();
    caller.set_remote(bot.local_addr(), codec, None).unwrap();
    bot.set_remote(caller.local_addr(), codec, None).unwrap();
    let store = Arc::new(object_store::memory::InMemory::new());
    bot.start_recording(RecordingTarget {
        store,
        path: format!("rec/{n}.wav").as_str().into(),
    })
    .unwrap();
    bot.watch_speech(true).unwrap();
    let mut tap = bot.tap_caller_audio(50).unwrap();
    tokio::spawn(async move { while tap.recv().await.is_some() {} });
    let rate = codec.audio_rate();
    drop(caller.play(tone(700.0, rate, 10_000), false).unwrap());
    drop(bot.play(tone(1100.0, rate, 10_000), false).unwrap());
    (caller, bot)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_tick_allocates_nothing_at_either_rate() {
    let engine = MediaEngine::new(MediaConfig {
        rtp_port_min: 43000,
        rtp_port_max: 43999,
        ..MediaConfig::default()
    })
    .expect("engine");
    let wide = pair(&engine, RtpCodec::G722, 0);
    let narrow = pair(&engine, RtpCodec::Pcmu, 1);
    assert_eq!(wide.1.audio_rate(), AudioRate::Wide);
    // Warm-up: first-tick buffers, the tap's channel blocks, speech onset events.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    WATCHED.store(thread_named("media-worker-0"), Ordering::SeqCst);
    ALLOCATIONS.store(0, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let n = ALLOCATIONS.load(Ordering::SeqCst);
    WATCHED.store(0, Ordering::SeqCst);
    let stats = wide.1.stats().await.unwrap();
    assert!(stats.packets_received > 100, "{stats:?}");
    assert_eq!(stats.tap_frames_dropped, 0);
    assert_eq!(n, 0, "allocations on the worker over 75 ticks");
    drop((wide, narrow));
}
