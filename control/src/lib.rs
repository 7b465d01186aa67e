//! callsmith-control
