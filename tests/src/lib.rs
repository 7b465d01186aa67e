//! End-to-end test helpers
