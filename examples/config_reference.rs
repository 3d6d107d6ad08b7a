//! Prints the configuration reference derived from the types (`src/config/reference.rs`):
//! `cargo run --example config_reference > docs/config-reference.md`.

fn main() {
    print!("{}", culprit::config::reference::markdown());
}
