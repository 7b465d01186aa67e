//! The process log: one line per event on stdout, text or JSON (`[log]`).
//!
//! The filter is `RUST_LOG` when set, else `log.filter`. rsipstack logs every SIP message it
//! sends or receives, whole, at INFO under its own targets (`rsipstack::transport::…`);
//! unless the filter names `rsipstack`, its targets are held at WARN. The whole messages
//! are then the DEBUG lines of `callsmith_sip::message` (see `callsmith_sip::logging`).
//! ANSI colours only when stdout is a terminal, never in JSON.

use std::io::IsTerminal;

use tracing_subscriber::{EnvFilter, fmt};

use crate::config::{LogConfig, LogFormat};

/// The level rsipstack's targets are held at when the filter does not name them.
const RSIPSTACK_DEFAULT: &str = "rsipstack=warn";

/// Installs the global subscriber.
pub fn init(cfg: &LogConfig) {
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let filter = from_env
        .and_then(|v| EnvFilter::try_new(directives(&v)).ok())
        .unwrap_or_else(|| EnvFilter::new(directives(&cfg.filter)));
    match cfg.format {
        LogFormat::Json => fmt()
            .json()
            .with_env_filter(filter)
            .with_current_span(true)
            .with_ansi(false)
            .init(),
        LogFormat::Text => fmt()
            .with_env_filter(filter)
            .with_ansi(std::io::stdout().is_terminal())
            .init(),
    }
}

/// The operator's filter directives, with rsipstack's targets held at WARN unless one of
/// the directives names them.
pub fn directives(filter: &str) -> String {
    let names_rsipstack = filter.split(',').any(|d| d.trim().starts_with("rsipstack"));
    match (names_rsipstack, filter.trim().is_empty()) {
        (true, _) => filter.to_string(),
        (false, true) => RSIPSTACK_DEFAULT.to_string(),
        (false, false) => format!("{filter},{RSIPSTACK_DEFAULT}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsipstack_is_held_at_warn_unless_named() {
        assert_eq!(directives("info"), "info,rsipstack=warn");
        assert_eq!(directives("debug"), "debug,rsipstack=warn");
        assert_eq!(
            directives("info,callsmith_sip=debug"),
            "info,callsmith_sip=debug,rsipstack=warn"
        );
        assert_eq!(directives(""), "rsipstack=warn");
        assert_eq!(directives("info,rsipstack=info"), "info,rsipstack=info");
        assert_eq!(
            directives("info, rsipstack::transport=debug"),
            "info, rsipstack::transport=debug"
        );
    }

    /// Whether an event of `target` at `level` passes the filter built from `filter`.
    macro_rules! passes {
        ($filter:expr, $target:literal, $level:ident) => {{
            use tracing_subscriber::layer::SubscriberExt;
            let subscriber =
                tracing_subscriber::registry().with(EnvFilter::new(directives($filter)));
            tracing::subscriber::with_default(subscriber, || {
                tracing::enabled!(target: $target, tracing::Level::$level)
            })
        }};
    }

    #[test]
    fn the_default_filter_shows_no_whole_message() {
        let default = LogConfig::default().filter;
        // rsipstack's whole-message lines, our own, and an ordinary call line.
        assert!(!passes!(&default, "rsipstack::transport::udp", INFO));
        assert!(!passes!(&default, "callsmith_sip::message", DEBUG));
        assert!(passes!(&default, "callsmith_sip::stack", INFO));
        // Asking for debug shows our whole messages, not rsipstack's.
        assert!(passes!("debug", "callsmith_sip::message", DEBUG));
        assert!(!passes!("debug", "rsipstack::transport::udp", INFO));
        assert!(passes!(
            "info,callsmith_sip::message=debug",
            "callsmith_sip::message",
            DEBUG
        ));
        // Naming rsipstack gives its lines back.
        assert!(passes!(
            "info,rsipstack=info",
            "rsipstack::transport::udp",
            INFO
        ));
    }
}
