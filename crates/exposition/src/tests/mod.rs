//! The reader's and the writer's unit tests, by what they read.

use std::borrow::Cow;
use std::io;

use crate::line::parse_sample;
use crate::*;

mod labels;
mod reading;
mod timestamps;
mod writer;

/// One sample as read: name, labels, value, timestamp.
type Owned = (String, Vec<(String, String)>, f64, Option<i64>);

/// One sample to write: name, labels, value, timestamp.
type ToWrite<'a> = (&'a str, Vec<(&'a str, &'a str)>, f64, Option<i64>);

/// Everything the reader handed over, owned.
#[derive(Debug, Default)]
struct Collect {
    samples: Vec<Owned>,
    types: Vec<(String, MetricType)>,
}

impl SampleSink for Collect {
    fn sample(&mut self, line: &SampleLine<'_>, t_ms: Option<i64>) -> Result<(), String> {
        let labels = line.labels()?.into_iter().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        self.samples.push((line.name.to_string(), labels, line.value, t_ms));
        Ok(())
    }

    fn metric_type(&mut self, family: &str, kind: MetricType) {
        self.types.push((family.to_owned(), kind));
    }
}

fn read(text: &str) -> Result<(Collect, ReadSummary), ReadError> {
    let mut sink = Collect::default();
    let summary = read_bytes(text.as_bytes(), "test.prom", &mut sink)?;
    Ok((sink, summary))
}

fn read_ok(text: &str) -> Collect {
    read(text).unwrap_or_else(|e| panic!("{e}")).0
}

/// Reads `text`, expects an error on `line`, and returns its message.
fn error_at(text: &str, line: u64) -> String {
    let error = read(text).expect_err("the input should not read");
    assert_eq!(error.line, Some(line), "{error}");
    assert_eq!(error.source_name, "test.prom");
    let shown = error.to_string();
    assert!(shown.starts_with(&format!("test.prom:{line}: ")), "{shown}");
    assert!(!shown.contains('\n'), "{shown}");
    error.message
}

fn pairs(labels: &[(&str, &str)]) -> Vec<(String, String)> {
    labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}
