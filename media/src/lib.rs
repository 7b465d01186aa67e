//! callsmith-media
