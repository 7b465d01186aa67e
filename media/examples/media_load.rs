//! The media load benchmark (source: bench/src/bin/media_load.rs), buildable
//! with the media crate alone: `cargo run --release -p callsmith-media --example media_load`.

#[path = "../../bench/src/bin/media_load.rs"]
mod media_load;

fn main() {
    media_load::main();
}
