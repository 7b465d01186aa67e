//! callsmith-scenarios
