//! Reading a Prometheus answer's body: its chunks go to the parser as they arrive, which
//! builds the typed series from them (a blocking thread reading a channel), so the raw
//! body is never held whole. The answer is read up to `prometheus.max_answer_bytes` and
//! its bytes are taken from the process' [`AnswerBudget`] as they come (all at once when
//! the `Content-Length` says how many), held until it is parsed.

use std::io::{BufReader, Read};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::collect::answer_budget::{AnswerBudget, Exhausted, Held};
use crate::collect::collector::TooLarge;
use crate::collect::prometheus::{Answer, PromError, parse_answer_reader, without_url};

/// Chunks read ahead of the parser. A chunk is one network read (hyper's read buffer, at
/// most some 400 KB), and every byte in the channel is in the budget already; a few keep
/// the network and the parser both busy.
const CHUNKS_AHEAD: usize = 8;

/// Bytes the parser reads from the channel at a time (serde_json reads byte by byte from
/// a reader; a buffer makes that cheap).
const PARSE_BUFFER: usize = 64 * 1024;

/// How one answer is read.
pub(crate) struct Reading<'a> {
    /// The backend, as messages name it.
    pub base: &'a str,
    /// `prometheus.max_answer_bytes`.
    pub limit: usize,
    pub budget: &'a AnswerBudget,
    /// Until when the answer may wait for budget: the end of its request's timeout.
    pub until: Instant,
}

impl Reading<'_> {
    fn too_large(&self, size: String) -> PromError {
        let limit = self.limit;
        let mut e = PromError::new(
            format!(
                "{}: the answer is {size}, over prometheus.max_answer_bytes ({limit} bytes, {:.0} MiB): the query selects too much",
                self.base,
                limit as f64 / 1_048_576.0
            ),
            None,
            false,
        );
        // The collector asks again in smaller pieces, as for a backend's own limit.
        e.too_large = Some(TooLarge::Series);
        e
    }

    fn exhausted(&self, e: Exhausted) -> PromError {
        let (when, by) = if e.stuck {
            ("", "held by other answers all waiting for more")
        } else {
            (" in time", "held by the other answers being read")
        };
        let mut err = PromError::new(
            format!(
                "{}: no memory for the answer{when}: after {} bytes of it, {} more did not fit in prometheus.max_answer_bytes_in_flight ({} bytes, {:.0} MiB), {by}",
                self.base,
                e.held,
                e.asked,
                e.total,
                e.total as f64 / 1_048_576.0
            ),
            None,
            false,
        );
        // Smaller pieces need less at once: the collector asks for them.
        err.too_large = Some(TooLarge::Series);
        err
    }

    async fn take(&self, held: &Held, n: usize) -> Result<(), PromError> {
        held.take(n, self.until.saturating_duration_since(Instant::now())).await.map_err(|e| self.exhausted(e))
    }

    /// The bytes the `Content-Length` announces, taken at once; None without one.
    async fn declared(&self, resp: &reqwest::Response, held: &Held) -> Result<Option<usize>, PromError> {
        let Some(len) = resp.content_length() else { return Ok(None) };
        if len > self.limit as u64 {
            return Err(self.too_large(format!("{len} bytes (Content-Length)")));
        }
        self.take(held, len as usize).await?;
        Ok(Some(len as usize))
    }

    /// The body's next chunk, counted against the limit and, unless the
    /// `Content-Length` announced it (`declared`), taken from the budget.
    async fn next_chunk(
        &self,
        resp: &mut reqwest::Response,
        held: &Held,
        declared: bool,
        read: &mut usize,
    ) -> Result<Option<Bytes>, PromError> {
        let chunk = resp
            .chunk()
            .await
            .map_err(|e| PromError::new(format!("{}: {}", self.base, without_url(&e)), None, true))?;
        let Some(chunk) = chunk else { return Ok(None) };
        *read += chunk.len();
        if *read > self.limit {
            return Err(self.too_large(format!("more than {} bytes", self.limit)));
        }
        if !declared {
            self.take(held, chunk.len()).await?;
        }
        Ok(Some(chunk))
    }

    /// A success answer, parsed into typed series as its chunks arrive. An error of the
    /// reading (over the limit, no budget, the connection lost) comes before the parser's
    /// (which then only saw the body end early).
    pub async fn answer(&self, mut resp: reqwest::Response) -> Result<Answer, PromError> {
        let held = self.budget.hold();
        let declared = self.declared(&resp, &held).await?.is_some();
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(CHUNKS_AHEAD);
        let what = self.base.to_string();
        // The parser holds the bytes too: they come back when it is done with them.
        let parser_held = held.clone();
        let parser = tokio::task::spawn_blocking(move || {
            let _held = parser_held;
            parse_answer_reader(
                BufReader::with_capacity(PARSE_BUFFER, ChannelReader { rx, chunk: Bytes::new() }),
                &what,
            )
        });
        let mut read = 0;
        let fed = loop {
            match self.next_chunk(&mut resp, &held, declared, &mut read).await {
                Ok(Some(chunk)) => {
                    // A closed channel means the parser stopped (a bad answer): its error
                    // says why.
                    if tx.send(chunk).await.is_err() {
                        break Ok(());
                    }
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        drop((tx, held, resp));
        let parsed = parser.await.unwrap_or_else(|e| {
            Err(PromError::new(format!("{}: the answer's parser stopped: {e}", self.base), None, false))
        });
        fed.and(parsed)
    }

    /// An error answer's body, whole (to quote its error), with the budget it holds.
    pub async fn body(&self, mut resp: reqwest::Response) -> Result<(Vec<u8>, Arc<Held>), PromError> {
        let held = self.budget.hold();
        let declared = self.declared(&resp, &held).await?.is_some();
        let (mut body, mut read) = (Vec::new(), 0);
        while let Some(chunk) = self.next_chunk(&mut resp, &held, declared, &mut read).await? {
            body.extend_from_slice(&chunk);
        }
        Ok((body, held))
    }
}

/// The body's chunks as a [`Read`], for the parser's thread: waits for the next chunk,
/// and ends when the sender is gone (the whole body sent, or the reading given up).
struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    chunk: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.chunk.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.chunk = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}
