use super::*;

const S: i64 = 1_000_000;

#[test]
fn start_slots_give_exactly_cps_in_the_long_run() {
    // cps 2, polled every 130 ms (late against the 500 ms slots), slack 200 ms.
    let (mut next, mut starts) = (0, Vec::new());
    let mut t = 0;
    while t < 10 * S {
        let s = start_slots(next, t, 2, 200_000);
        if s.available > 0 {
            starts.push(t);
            next = s.next_after(1);
        }
        t += 130_000;
    }
    // 10 s at 2/s: 20 starts (the first at 0), never two within one slot interval minus the slack.
    assert_eq!(starts.len(), 20, "{starts:?}");
    for w in starts.windows(3) {
        assert!(w[2] - w[0] >= S - 200_000, "{w:?}");
    }
}

#[test]
fn consent_needs_a_yes_value() {
    for v in ["true", "YES", " 1 "] {
        assert!(consent_granted(Some(v)), "{v}");
    }
    for v in [
        None,
        Some(""),
        Some("no"),
        Some("false"),
        Some("0"),
        Some("maybe"),
    ] {
        assert!(!consent_granted(v), "{v:?}");
    }
}

#[test]
fn claimable_slots_reach_one_lookahead_ahead_and_one_slack_back() {
    let limits = |slack_us, lookahead_us| AgentLimits {
        cps: 10,
        cpl: 0,
        slack_us,
        lookahead_us,
    };
    // Next slot now, polled every 200 ms: this poll claims the slots of the next 200 ms,
    // each at its own time, 100 ms apart.
    let s = claimable_slots(10 * S, 10 * S, &limits(200_000, 200_000));
    assert_eq!(s.available, 3);
    let times: Vec<i64> = (0..s.available).map(|k| s.next_after(k)).collect();
    assert_eq!(times, vec![10 * S, 10 * S + 100_000, 10 * S + 200_000]);
    // The next poll, 210 ms later, goes on from the first slot left.
    let s2 = claimable_slots(s.next_after(3), 10 * S + 210_000, &limits(200_000, 200_000));
    assert_eq!(s2.base_us, 10 * S + 300_000);
    assert_eq!(s2.available, 2);
    // After idling, the slack still only reaches back from now, not from the horizon.
    let idle = claimable_slots(0, 60 * S, &limits(250_000, 200_000));
    assert_eq!(idle.base_us, 60 * S - 250_000);
    assert_eq!(idle.available, 5);
    // Without lookahead it is start_slots itself.
    assert_eq!(
        claimable_slots(0, 60 * S, &limits(250_000, 0)),
        start_slots(0, 60 * S, 10, 250_000)
    );
}

#[test]
fn start_slots_do_not_bank_beyond_the_slack() {
    // Idle for a minute: only the slack's worth of slots (plus the current one).
    let s = start_slots(0, 60 * S, 10, 250_000);
    assert_eq!(s.available, 3);
    assert_eq!(s.base_us, 60 * S - 250_000);
    assert_eq!(s.next_after(3), 60 * S + 50_000);
    // A slot in the future: nothing yet.
    assert_eq!(start_slots(S + 1, S, 10, 0).available, 0);
}
