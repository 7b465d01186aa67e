use super::*;

const LIMITS: HttpSettings = HttpSettings {
    header_read_timeout: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(60),
    body_read_timeout: Duration::from_secs(20),
    body_min_rate: 1000,
    send_timeout: Duration::from_secs(30),
    max_connections_per_address: 2,
};

#[test]
fn phases_and_their_deadlines() {
    let t0 = Instant::now();
    let s = Duration::from_secs(1);
    let idle = Phase::Idle { since: t0 };
    assert_eq!(idle.deadline(LIMITS), Some(t0 + 60 * s));
    // The first byte starts the head clock; later bytes of the head do not reset it.
    let head = idle.on_read(t0 + 5 * s);
    assert_eq!(head.deadline(LIMITS), Some(t0 + 15 * s));
    assert_eq!(head.on_read(t0 + 9 * s), head);
    // A request under way is timed by its body and its writes, not by its phase.
    let busy = head.on_request();
    assert_eq!(busy.deadline(LIMITS), None);
    assert_eq!(busy.on_read(t0 + 100 * s), busy);
    // Pipelined requests: idle again only when the last response is done.
    let two = busy.on_request();
    assert_eq!(two.on_response_done(t0 + 200 * s), busy);
    let idle_again = busy.on_response_done(t0 + 300 * s);
    assert_eq!(idle_again.deadline(LIMITS), Some(t0 + 360 * s));
}

#[test]
fn a_blocked_write_has_a_deadline_in_every_phase() {
    let t0 = Instant::now();
    let s = Duration::from_secs(1);
    let blocked = |phase| ConnState {
        phase,
        write_blocked_since: Some(t0),
    };
    assert_eq!(
        blocked(Phase::Busy { requests: 1 }).deadline(LIMITS),
        Some(t0 + 30 * s)
    );
    // The earlier of the two wins.
    assert_eq!(
        blocked(Phase::Head { since: t0 }).deadline(LIMITS),
        Some(t0 + 10 * s)
    );
    let flowing = ConnState {
        phase: Phase::Busy { requests: 1 },
        write_blocked_since: None,
    };
    assert_eq!(flowing.deadline(LIMITS), None);
}

#[test]
fn body_waits_are_bounded_each_and_together() {
    let t0 = Instant::now();
    let s = Duration::from_secs(1);
    let mut c = BodyClock::default();
    // Nothing received: the first wait may last the body timeout.
    assert_eq!(c.on_pending(t0, LIMITS), t0 + 20 * s);
    // A later poll of the same wait does not move its start.
    assert_eq!(c.on_pending(t0 + 5 * s, LIMITS), t0 + 20 * s);
    // 100,000 bytes after 10 s of waiting earn 100 s more in total, but each wait is
    // still at most 20 s.
    c.on_data(100_000, t0 + 10 * s);
    assert_eq!(c.waited, 10 * s);
    assert_eq!(c.on_pending(t0 + 11 * s, LIMITS), t0 + 31 * s);
    // Bytes read without a wait cost nothing.
    c.on_data(0, t0 + 12 * s);
    c.on_data(1_000, t0 + 12 * s);
    assert_eq!(c.waited, 11 * s);
    // A trickle: 11 s waited of the 20 + 101 allowed; after seven more waits of 15 s
    // (each within the gap) only 5 s remain, however short the gaps have been.
    let mut t = t0 + 13 * s;
    for _ in 0..7 {
        c.on_pending(t, LIMITS);
        t += 15 * s;
        c.on_data(0, t);
    }
    assert_eq!(c.waited, 116 * s);
    assert_eq!(c.on_pending(t, LIMITS), t + 5 * s);
    // Without a rate floor only the gap applies.
    let no_rate = HttpSettings {
        body_min_rate: 0,
        ..LIMITS
    };
    let mut c = BodyClock {
        waited: 1000 * s,
        ..BodyClock::default()
    };
    assert_eq!(c.on_pending(t0, no_rate), t0 + 20 * s);
}

#[test]
fn connections_are_capped_per_ipv4_address_and_ipv6_64() {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let sources = Sources::new(2);
    let a1 = sources.admit(ip("192.0.2.1")).unwrap();
    let _a2 = sources.admit(ip("::ffff:192.0.2.1")).unwrap();
    assert!(sources.admit(ip("192.0.2.1")).is_none());
    assert!(sources.admit(ip("192.0.2.2")).is_some());
    drop(a1);
    let _a3 = sources.admit(ip("192.0.2.1")).unwrap();
    assert!(sources.admit(ip("192.0.2.1")).is_none());
    // One IPv6 /64 is one source; another /64 is another.
    let _b1 = sources.admit(ip("2001:db8:1:2::1")).unwrap();
    let _b2 = sources.admit(ip("2001:db8:1:2:ffff::9")).unwrap();
    assert!(sources.admit(ip("2001:db8:1:2::3")).is_none());
    assert!(sources.admit(ip("2001:db8:1:3::1")).is_some());
    // Freed places leave no entry behind.
    let sources = Sources::new(1);
    drop(sources.admit(ip("192.0.2.9")));
    assert!(sources.open.lock().is_empty());
    // A cap of 0 admits everything.
    let open = Sources::new(0);
    let held: Vec<_> = (0..500).map(|_| open.admit(ip("192.0.2.1"))).collect();
    assert!(held.iter().all(Option::is_some));
}
