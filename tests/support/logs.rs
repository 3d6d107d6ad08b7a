//! The logs of a whole test binary, captured in memory: a global subscriber with culprit's
//! log format (`cli::logging::SafeFields`) **without** the redaction of configured secrets,
//! so that a secret in what the code logs cannot hide behind the formatter; `debug` level.

#![allow(dead_code)]

use std::sync::{Arc, LazyLock, Mutex};

#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

static BUFFER: LazyLock<LogBuffer> = LazyLock::new(|| {
    let buffer = LogBuffer::default();
    let out = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("debug,hyper=info,reqwest=info,h2=info,rustls=info"))
        .with_writer(move || out.clone())
        .with_ansi(false)
        .fmt_fields(culprit::cli::logging::SafeFields::new(culprit::model::secret::Redactor::new()))
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    buffer
});

/// Starts capturing (once per binary; later calls do nothing).
pub fn capture() {
    LazyLock::force(&BUFFER);
}

/// Everything logged so far.
pub fn text() -> String {
    String::from_utf8_lossy(&BUFFER.0.lock().unwrap()).into_owned()
}
