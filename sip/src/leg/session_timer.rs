//! RFC 4028 session timers: the negotiated interval and refresher, and the deadlines they set.

use std::time::{Duration, Instant};

/// RFC 4028 session timer negotiated for a leg.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionTimer {
    pub interval: u32,
    /// True when this side must send the refreshes.
    pub we_refresh: bool,
}

impl SessionTimer {
    /// Parse `Session-Expires: 1800;refresher=uac`. `we_are_uas` tells which side we are.
    pub fn from_header(value: &str, we_are_uas: bool) -> Option<SessionTimer> {
        let mut parts = value.split(';');
        let interval: u32 = parts.next()?.trim().parse().ok()?;
        let refresher = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("refresher"))
            .map(|(_, v)| v.trim().to_ascii_lowercase());
        let we_refresh = match refresher.as_deref() {
            Some("uas") => we_are_uas,
            Some("uac") => !we_are_uas,
            // No refresher chosen by the UAC: a UAS answering picks "uac" (the peer).
            _ => !we_are_uas,
        };
        Some(SessionTimer {
            interval: interval.max(1),
            we_refresh,
        })
    }

    pub fn header_value(&self, we_are_uas: bool) -> String {
        let refresher = if self.we_refresh == we_are_uas {
            "uas"
        } else {
            "uac"
        };
        format!("{};refresher={refresher}", self.interval)
    }

    /// From `now`: when to send the refresh (half the interval, RFC 4028 §10) if we are the
    /// refresher, else when to give up on a session the peer should have refreshed (the
    /// interval minus min(32 s, interval/3), §10). Exactly one of the two is set.
    pub fn deadlines(&self, now: Instant) -> SessionDeadlines {
        let interval = Duration::from_secs(self.interval as u64);
        if self.we_refresh {
            SessionDeadlines {
                refresh_at: Some(now + interval / 2),
                expire_at: None,
            }
        } else {
            let margin = Duration::from_secs((self.interval as u64 / 3).min(32));
            SessionDeadlines {
                refresh_at: None,
                expire_at: Some(now + interval - margin),
            }
        }
    }
}

/// The session timer's next deadlines (armed only once the call is answered).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SessionDeadlines {
    /// Send a refresh then.
    pub refresh_at: Option<Instant>,
    /// The session expired then: BYE.
    pub expire_at: Option<Instant>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_timer_roles() {
        let st = SessionTimer::from_header("1800;refresher=uac", true).unwrap();
        assert_eq!(
            st,
            SessionTimer {
                interval: 1800,
                we_refresh: false
            }
        );
        assert_eq!(st.header_value(true), "1800;refresher=uac");
        let st = SessionTimer::from_header("90;refresher=uas", true).unwrap();
        assert!(st.we_refresh);
        assert_eq!(st.header_value(true), "90;refresher=uas");
        let st = SessionTimer::from_header("120", true).unwrap();
        assert!(!st.we_refresh);
        let st = SessionTimer::from_header("600;refresher=uac", false).unwrap();
        assert!(st.we_refresh);
        assert_eq!(st.header_value(false), "600;refresher=uac");
        assert!(SessionTimer::from_header("soon", true).is_none());
    }

    #[test]
    fn session_timer_deadlines() {
        let t0 = Instant::now();
        let ours = SessionTimer {
            interval: 90,
            we_refresh: true,
        };
        assert_eq!(
            ours.deadlines(t0),
            SessionDeadlines {
                refresh_at: Some(t0 + Duration::from_secs(45)),
                expire_at: None
            }
        );
        let theirs = SessionTimer {
            interval: 1800,
            we_refresh: false,
        };
        assert_eq!(
            theirs.deadlines(t0).expire_at,
            Some(t0 + Duration::from_secs(1800 - 32))
        );
        let short = SessionTimer {
            interval: 60,
            we_refresh: false,
        };
        assert_eq!(
            short.deadlines(t0).expire_at,
            Some(t0 + Duration::from_secs(40))
        );
    }
}
