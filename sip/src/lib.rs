//! callsmith-sip
