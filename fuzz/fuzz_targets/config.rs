//! The configuration loader: TOML → typed config → validation, and on success what
//! `check-config` prints and what `serve` checks before it listens. On failure the message
//! must name the source. Must never panic.
#![no_main]

use culprit::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::from_toml(text, "fuzz.toml") {
        Ok(config) => {
            let _ = config.server.exposure_problem();
            let _ = config.redactor();
            let _ = culprit::cli::check::describe(&config);
            let _ = culprit::notify::describe(&config.notify);
        }
        Err(e) => {
            let message = e.to_string();
            assert!(message.starts_with("fuzz.toml: "), "{message}");
        }
    }
});
