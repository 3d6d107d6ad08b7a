//! Reading exposition text from files and readers: the IO around the
//! [`exposition_text`] crate, which reads Prometheus text exposition (format 0.0.4) and
//! OpenMetrics 1.0 text without ever dropping a sample silently, and writes OpenMetrics.
//!
//! Everything of the crate is re-exported here, so `crate::collect::exposition::X` names
//! it; this module adds what does IO: [`read_path`] opens a file, [`read_from`] reads any
//! reader, plain or gzip (detected by its magic bytes, not by the name), through a 1 MiB
//! buffer, and hands each line to an [`exposition_text::Reader`].

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

pub use exposition_text::*;

/// Size of the read buffer: large, because recordings run to gigabytes.
const READ_BUFFER_BYTES: usize = 1 << 20;

/// The first two bytes of a gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Reads a file (plain, or gzip detected by its magic bytes 1f 8b, not by the extension)
/// and hands every sample to `sink`, in file order.
///
/// Errors name the file as `path.display()` shows it.
///
/// # Errors
///
/// A [`ReadError`] without a line when the file cannot be opened; otherwise as
/// [`read_from`].
pub fn read_path(path: &Path, sink: &mut impl SampleSink) -> Result<ReadSummary, ReadError> {
    let source = path.display().to_string();
    let file = File::open(path).map_err(|e| ReadError::new(&source, None, format!("cannot open: {e}")))?;
    read_from(file, &source, sink)
}

/// Same as [`read_path`] over any reader (plain, or gzip detected by its magic bytes);
/// `source` names the input in errors. The reader is wrapped in a 1 MiB buffer.
///
/// # Errors
///
/// A [`ReadError`] naming `source` and the 1-based line for: a line that is not a blank
/// line, a comment or a well-formed sample; invalid UTF-8; a `# TYPE` line with a missing
/// or unknown kind; anything but blank lines after `# EOF`; a timestamp whose unit
/// contradicts the input's first one; an I/O or gzip failure (at the line being read); an
/// error returned by the sink (see [`Reader::line`]).
pub fn read_from(mut reader: impl Read, source: &str, sink: &mut impl SampleSink) -> Result<ReadSummary, ReadError> {
    // Peek at the first two bytes without assuming a single read returns both.
    let mut magic = [0u8; 2];
    let mut got = 0;
    while got < magic.len() {
        match reader.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::new(source, Some(1), format!("cannot read: {e}"))),
        }
    }
    let head = &magic[..got];
    let input = head.chain(reader);
    if head == GZIP_MAGIC {
        let decoder = flate2::read::MultiGzDecoder::new(input);
        read_lines(BufReader::with_capacity(READ_BUFFER_BYTES, decoder), source, "cannot read the gzip stream", sink)
    } else {
        read_lines(BufReader::with_capacity(READ_BUFFER_BYTES, input), source, "cannot read", sink)
    }
}

/// The line loop: one reused buffer, one line at a time, each handed to the reader.
fn read_lines<R: BufRead, S: SampleSink + ?Sized>(
    mut input: R,
    source: &str,
    io_context: &str,
    sink: &mut S,
) -> Result<ReadSummary, ReadError> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut reader = Reader::new(source);
    loop {
        buf.clear();
        let read = input.read_until(b'\n', &mut buf).map_err(|e| reader.error_reading(format!("{io_context}: {e}")))?;
        if read == 0 {
            return Ok(reader.finish());
        }
        reader.line(&buf, sink)?;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// One sample as read: name, labels, value, timestamp.
    type Owned = (String, Vec<(String, String)>, f64, Option<i64>);

    /// Every sample the reader handed over, owned.
    #[derive(Debug, Default)]
    struct Collect {
        samples: Vec<Owned>,
    }

    impl SampleSink for Collect {
        fn sample(&mut self, line: &SampleLine<'_>, t_ms: Option<i64>) -> Result<(), String> {
            let labels = line.labels()?.into_iter().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
            self.samples.push((line.name.to_string(), labels, line.value, t_ms));
            Ok(())
        }
    }

    #[test]
    fn lines_read_through_a_reader_give_what_the_same_text_gives_in_memory() {
        // The same samples and summary, and the same error naming its line.
        let text = b"# TYPE a gauge\r\na{b=\"c\"} 1 1000\r\n\r\na 2\r\n# EOF\r\n";
        let (mut from_reader, mut in_memory) = (Collect::default(), Collect::default());
        let summary = read_from(&text[..], "x.prom", &mut from_reader).unwrap();
        assert_eq!(summary, read_bytes(text, "x.prom", &mut in_memory).unwrap());
        assert_eq!(from_reader.samples, in_memory.samples);
        let bad = b"a 1\na{b=\"\xff\"} 2\n";
        let error = read_from(&bad[..], "x.prom", &mut Collect::default()).unwrap_err();
        assert_eq!(error.to_string(), "x.prom:2: the line is not valid UTF-8 (invalid byte at column 6)");
    }

    fn gzip(text: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(text).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn gzip_input_is_detected_by_its_magic_bytes_not_by_the_extension() {
        let dir = tempfile::tempdir().unwrap();
        let text = b"a 1 1000.5\nb{c=\"d\"} 2 1001\n# EOF\n";
        let gz_named_prom = dir.path().join("looks-plain.prom");
        std::fs::write(&gz_named_prom, gzip(text)).unwrap();
        let plain_named_gz = dir.path().join("looks-compressed.om.gz");
        std::fs::write(&plain_named_gz, text).unwrap();
        for path in [&gz_named_prom, &plain_named_gz] {
            let mut sink = Collect::default();
            let summary = read_path(path, &mut sink).unwrap();
            assert_eq!(summary.samples, 2);
            assert_eq!(summary.format, Format::OpenMetrics);
            assert_eq!(sink.samples[1].3, Some(1_001_000));
        }
    }

    #[test]
    fn concatenated_gzip_members_are_read_as_one_input() {
        let mut bytes = gzip(b"a 1\n");
        bytes.extend(gzip(b"a 2\n# EOF\n"));
        let mut sink = Collect::default();
        let summary = read_from(bytes.as_slice(), "two.gz", &mut sink).unwrap();
        assert_eq!(summary.samples, 2);
    }

    #[test]
    fn a_truncated_gzip_is_an_error_naming_the_line_being_read() {
        let text: String = (0..5000).map(|k| format!("a{{k=\"{k}\"}} {k} {k}.5\n")).collect();
        let bytes = gzip(text.as_bytes());
        let truncated = &bytes[..bytes.len() / 2];
        let mut sink = Collect::default();
        let error = read_from(truncated, "cut.om.gz", &mut sink).unwrap_err();
        let line = error.line.expect("a line number");
        assert!(line > 1 && line <= 5000, "{error}");
        assert_eq!(sink.samples.len() as u64, line - 1, "{error}");
        assert!(error.to_string().starts_with(&format!("cut.om.gz:{line}: cannot read the gzip stream: ")), "{error}");
    }

    #[test]
    fn a_missing_file_is_a_one_sentence_error_without_a_line() {
        let error = read_path(Path::new("missing.om.gz"), &mut Collect::default()).unwrap_err();
        assert_eq!(error.line, None);
        assert!(error.to_string().starts_with("missing.om.gz: cannot open: "), "{error}");
    }
}
