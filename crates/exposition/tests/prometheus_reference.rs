//! The reader checked against Prometheus itself, sample for sample.
//!
//! A real Prometheus (the Debian package `prometheus`; scripts/test.sh installs it) scrapes
//! every corpus from a local HTTP server on a loopback port: every real Flink scrape of the
//! bundled captures (`examples/captures/*/metrics/*.prom`, served as text format 0.0.4),
//! every recording (`recording.om.gz` of the captures and of `tests/data`, served as
//! OpenMetrics), and hard cases, each its own target so that one refused line cannot hide
//! the others. Then every series Prometheus stored for a target is read back through its
//! API (a range selector over all time, at the time of the query) and compared with what
//! [`read_bytes`] gives for the same text: the same series (names, labels, values), the
//! same timestamps where the text has them, and Prometheus' own count of the samples it
//! parsed (`scrape_samples_scraped`).
//!
//! Where the two differ by design, the case says so and why ([`Expect`]); the test fails on
//! any other difference, and on a declared one that no longer happens. It also checks
//! that its comparison would see a broken parse: one sample dropped, one label value
//! changed.
//!
//! How Prometheus stores what it scraped, and what is undone here before comparing: the
//! target's `job` and `instance` labels are added (a scraped `job` or `instance` becomes
//! `exported_job`, `exported_instance`); a label with an empty value is no label; a sample
//! without a timestamp is stored at each scrape's time.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use exposition_text::{SampleLine, SampleSink, read_bytes};

/// The content type Prometheus reads as text format 0.0.4.
const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The content type Prometheus reads as OpenMetrics 1.0.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long Prometheus may take to start and to scrape every target once. A target's first
/// scrape comes at an offset within the scrape interval (15 s here).
const SCRAPED_WITHIN: Duration = Duration::from_secs(90);

/// The series Prometheus adds for every target, about the scrape itself.
const REPORT_SERIES: [&str; 5] = [
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
];

/// What the two readers should make of a corpus.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Both read it, to the same series and values.
    Same,
    /// Prometheus refuses the scrape and this reader reads it (the reason is the field):
    /// a form Prometheus 2 does not read, read here without losing a sample.
    OnlyOursReads(&'static str),
    /// This reader refuses what Prometheus stores (the reason is the field).
    OnlyPrometheusReads(&'static str),
    /// Both refuse it.
    BothRefuse,
}

/// One scrape target: a name, a content type, the body, and what is expected of it.
struct Corpus {
    name: String,
    content_type: &'static str,
    body: Vec<u8>,
    expect: Expect,
}

/// A series: its labels with `__name__`, sorted.
type Series = BTreeMap<String, String>;

/// What one reader made of a corpus: the samples of each series (timestamp, value), or
/// the reader's error.
type Reading = Result<BTreeMap<Series, Vec<(Option<i64>, f64)>>, String>;

/// Keeps every sample as Prometheus would store its series.
#[derive(Default)]
struct Keep(BTreeMap<Series, Vec<(Option<i64>, f64)>>);

impl SampleSink for Keep {
    fn sample(&mut self, line: &SampleLine<'_>, t_ms: Option<i64>) -> Result<(), String> {
        let mut series = Series::new();
        series.insert("__name__".to_owned(), line.name.to_string());
        for (name, value) in line.labels()? {
            if value.is_empty() {
                continue;
            }
            let name = match &*name {
                "job" | "instance" => format!("exported_{name}"),
                other => other.to_owned(),
            };
            series.insert(name, value.into_owned());
        }
        self.0.entry(series).or_default().push((t_ms, line.value));
        Ok(())
    }
}

fn ours(corpus: &Corpus) -> (Reading, u64) {
    let mut keep = Keep::default();
    match read_bytes(&corpus.body, &corpus.name, &mut keep) {
        Ok(summary) => (Ok(keep.0), summary.samples),
        Err(e) => (Err(e.to_string()), 0),
    }
}

#[test]
fn prometheus_stores_every_sample_this_reader_reads_from_the_captures_and_the_hard_cases() {
    let now_ms = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as i64;
    let mut corpora = captures();
    corpora.extend(hard_cases(now_ms));
    let readings: Vec<(Reading, u64)> = corpora.iter().map(ours).collect();
    // Prometheus stores no sample from the future of its clock (tests/data's recordings
    // are dated after this machine's): of those, only the count is compared, and they are
    // served once.
    let future: Vec<bool> = readings
        .iter()
        .map(|(r, _)| r.as_ref().is_ok_and(|r| r.values().flatten().any(|(t, _)| t.is_some_and(|t| t > now_ms))))
        .collect();
    let server = CorpusServer::start(&corpora, &future);
    let prometheus = Prometheus::start(&corpora, &server.address);
    let health = prometheus.wait_until_scraped(corpora.len());

    let scraped = prometheus.samples_scraped();
    let mut problems = Vec::new();
    let mut compared = 0;
    let mut first_same: Option<(Reading, Reading)> = None;
    for (i, corpus) in corpora.iter().enumerate() {
        let job = format!("c{i}");
        let (reading, our_count) = readings[i].clone();
        let future = future[i];
        let (up, last_error) = health.get(&job).cloned().unwrap_or((false, "not scraped".to_owned()));
        let timestamped = reading.as_ref().is_ok_and(|r| r.values().flatten().any(|(t, _)| t.is_some()));
        let theirs: Reading = match (up, future) {
            (false, _) => Err(last_error),
            (true, true) => Ok(BTreeMap::new()),
            (true, false) => Ok(prometheus.series_of(&job, timestamped)),
        };
        let scraped = scraped.get(&job).copied();
        let outcome = match (&reading, &theirs) {
            (Ok(_), Ok(_)) => {
                let mut differences = if future { Vec::new() } else { differences(&reading, &theirs) };
                if scraped != Some(our_count) {
                    differences.push(format!("Prometheus parsed {scraped:?} samples, this reader {our_count}"));
                }
                if differences.is_empty() {
                    compared += our_count;
                    if first_same.is_none() {
                        first_same = Some((reading.clone(), theirs.clone()));
                    }
                    Expect::Same
                } else {
                    problems.push(format!("{}: the readers differ: {}", corpus.name, differences.join("; ")));
                    continue;
                }
            }
            (Ok(_), Err(_)) => Expect::OnlyOursReads(""),
            (Err(_), Ok(_)) => Expect::OnlyPrometheusReads(""),
            (Err(_), Err(_)) => Expect::BothRefuse,
        };
        if !same_kind(outcome, corpus.expect) {
            problems.push(format!(
                "{}: expected {:?}, found {outcome:?} (this reader: {}; Prometheus: {})",
                corpus.name,
                corpus.expect,
                reading.as_ref().map_or_else(|e| e.clone(), |_| "read".to_owned()),
                theirs.as_ref().map_or_else(|e| e.clone(), |_| "stored".to_owned()),
            ));
        }
    }
    assert!(problems.is_empty(), "{} of {} corpora:\n{}", problems.len(), corpora.len(), problems.join("\n"));
    // The captures alone hold tens of thousands of samples; every one was compared.
    assert!(compared > 10_000, "only {compared} samples compared");

    // The comparison sees a broken parse: a sample dropped, a label value changed.
    let (reading, theirs) = first_same.expect("a corpus both readers read the same");
    let mut dropped = reading.clone().unwrap();
    let key = dropped.keys().next_back().unwrap().clone();
    dropped.remove(&key);
    assert!(!differences(&Ok(dropped), &theirs).is_empty(), "a dropped series went unseen");
    let mut changed = reading.unwrap();
    let (mut key, samples) = changed.pop_first().unwrap();
    key.insert("__name__".to_owned(), format!("{}_", key["__name__"]));
    changed.insert(key, samples);
    assert!(!differences(&Ok(changed), &theirs).is_empty(), "a changed name went unseen");
}

/// Whether an outcome is the expected one, reasons aside.
fn same_kind(a: Expect, b: Expect) -> bool {
    std::mem::discriminant(&a) == std::mem::discriminant(&b)
}

/// The differences between two readings of one corpus, one sentence each.
fn differences(ours: &Reading, theirs: &Reading) -> Vec<String> {
    let (Ok(ours), Ok(theirs)) = (ours, theirs) else { return vec!["one reading failed".to_owned()] };
    let mut out = Vec::new();
    let keys: BTreeSet<&Series> = ours.keys().chain(theirs.keys()).collect();
    for key in keys {
        match (ours.get(key), theirs.get(key)) {
            (Some(_), None) => out.push(format!("{key:?} only here")),
            (None, Some(_)) => out.push(format!("{key:?} only in Prometheus")),
            (Some(mine), Some(stored)) => {
                if let Some(d) = series_difference(mine, stored) {
                    out.push(format!("{key:?}: {d}"));
                }
            }
            (None, None) => unreachable!(),
        }
    }
    out.truncate(8);
    out
}

/// How the samples of one series differ: ours as read, Prometheus' as stored (every point
/// has a time). A sample without a timestamp is stored once per scrape, with its value.
fn series_difference(mine: &[(Option<i64>, f64)], stored: &[(Option<i64>, f64)]) -> Option<String> {
    let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    if mine.iter().all(|(t, _)| t.is_none()) {
        if mine.len() > 1 {
            return Some(format!("{} samples without a timestamp in one scrape", mine.len()));
        }
        let value = mine[0].1;
        return stored
            .iter()
            .find(|(_, v)| !same(*v, value))
            .map(|(_, v)| format!("value {value:?} read, {v:?} stored"));
    }
    let mut a: Vec<(i64, u64)> = mine.iter().map(|(t, v)| (t.unwrap_or(i64::MIN), canonical(*v))).collect();
    let mut b: Vec<(i64, u64)> = stored.iter().map(|(t, v)| (t.unwrap(), canonical(*v))).collect();
    a.sort_unstable();
    a.dedup();
    b.sort_unstable();
    b.dedup();
    if a == b {
        return None;
    }
    let first =
        a.iter().zip(&b).find(|(x, y)| x != y).map(|(x, y)| format!("first difference: {x:?} read, {y:?} stored"));
    Some(format!("{} samples read, {} stored; {}", a.len(), b.len(), first.unwrap_or_default()))
}

/// A value's bits, every NaN as one.
fn canonical(v: f64) -> u64 {
    if v.is_nan() { f64::NAN.to_bits() } else { v.to_bits() }
}

// ---------------------------------------------------------------------------------------
// The corpora
// ---------------------------------------------------------------------------------------

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every Flink scrape and every recording of the bundled captures and of `tests/data`.
fn captures() -> Vec<Corpus> {
    let mut files = Vec::new();
    for root in ["examples/captures", "tests/data/cases", "tests/data/reports"] {
        walk(&repository().join(root), &mut files);
    }
    files.sort();
    let mut corpora = Vec::new();
    for path in files {
        let name = path.strip_prefix(repository()).unwrap().display().to_string();
        let bytes = std::fs::read(&path).unwrap();
        let (content_type, body) = if name.ends_with(".om.gz") {
            let mut text = Vec::new();
            flate2::read::MultiGzDecoder::new(&bytes[..]).read_to_end(&mut text).unwrap();
            (OPENMETRICS, text)
        } else {
            (TEXT, bytes)
        };
        corpora.push(Corpus { name, content_type, body, expect: Expect::Same });
    }
    assert!(corpora.len() > 100, "{} capture files", corpora.len());
    corpora
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            walk(&path, out);
        } else if name.ends_with(".prom") || name == "recording.om.gz" {
            out.push(path);
        }
    }
}

/// The hard cases, each its own scrape. Timestamps are near `now_ms`, where Prometheus'
/// head block takes them.
fn hard_cases(now_ms: i64) -> Vec<Corpus> {
    let t = now_ms - 30_000;
    let (s, ms) = (t / 1000, t % 1000);
    let text = |name: &str, body: String, expect| Corpus {
        name: format!("hard case {name}"),
        content_type: TEXT,
        body: body.into_bytes(),
        expect,
    };
    let om = |name: &str, body: String, expect| Corpus {
        name: format!("hard case {name} (OpenMetrics)"),
        content_type: OPENMETRICS,
        body: body.into_bytes(),
        expect,
    };
    use Expect::*;
    vec![
        text("escapes", r#"e{quote="a\"b",backslash="c\\d",newline="e\nf",all="\\\"\n\\n",end="\\"} 1"#.to_owned() + "\n", Same),
        text("punctuation in values", r#"p{comma="a,b",eq="c=d",close="e}f",open="{g",hash="h # i",qc="\",\"",sp=" x "} 2"#.to_owned() + "\n", Same),
        text(
            "flink's trailing comma and exponent",
            "flink_taskmanager_Status_JVM_Memory_Heap_Used{host=\"127_0_0_1\",tm_id=\"127_0_0_1:46717_23536e\",} 1.5156E10\n".to_owned(),
            Same,
        ),
        text(
            "values",
            "v{k=\"nan\"} NaN\nv{k=\"inf\"} +Inf\nv{k=\"ninf\"} -Inf\nv{k=\"nz\"} -0\nv{k=\"tiny\"} 5e-324\nv{k=\"e\"} 1.5156e+10\n\
             v{k=\"max\"} 1.7976931348623157e308\nv{k=\"plus\"} +3\nv{k=\"dot\"} .5\nv{k=\"int\"} 42\nv{k=\"neg\"} -1.25E-3\n"
                .to_owned(),
            Same,
        ),
        text("names with colons", "job:rate5m:sum{a=\"b\"} 4\n:leading 5\nx:y: 6\n".to_owned(), Same),
        text("empty label sets", "bare 7\nempty{} 8\n".to_owned(), Same),
        text("an empty label value", "ev{a=\"\",b=\"c\"} 9\n".to_owned(), Same),
        text("utf-8 in a value", "u{v=\"é ü 日本 🚀\"} 10\n".to_owned(), Same),
        text("a timestamp in milliseconds", format!("ts{{a=\"b\"}} 11 {t}\nts{{a=\"c\"}} 12 {}\n", t + 1), Same),
        text(
            "help, type and other comments",
            "# HELP c_total Help with \\\\ and \\n and \"quotes\"\n# TYPE c_total counter\nc_total 13\n# just a comment\n#TYPE not_a_type gauge\n\n# TYPE g gauge\ng 14\n# HELP h\n# TYPE h untyped\nh 15\n"
                .to_owned(),
            Same,
        ),
        text("blanks between tokens", "sp  {a=\"b\",c=\"d\"}   16\ntab\t17\n".to_owned(), Same),
        text(
            "crlf line endings",
            "crlf{a=\"b\"} 18\r\ncrlf{a=\"c\"} 19\r\n".to_owned(),
            OnlyOursReads("lines end with \\n in the format; Prometheus reads the \\r into the value and refuses it"),
        ),
        text("no newline at the end", "last 20".to_owned(), Same),
        text("many series", (0..500).map(|k| format!("many{{k=\"{k}\"}} {k}\n")).collect(), Same),
        // Refused by both.
        text("a duplicate label name", "dup{a=\"1\",a=\"2\"} 1\n".to_owned(), BothRefuse),
        text("a dot in a bare name", "my.metric 1\n".to_owned(), BothRefuse),
        text("a value that is no number", "bad{a=\"b\"} abc\n".to_owned(), BothRefuse),
        text("an unclosed label set", "open{a=\"b\" 1\n".to_owned(), BothRefuse),
        text("text after the timestamp", format!("after 1 {t} 3\n"), BothRefuse),
        // Read here, refused by Prometheus 2 (a scrape refused whole: nothing stored).
        text(
            "an unknown escape",
            "esc{a=\"x\\ty\"} 1\n".to_owned(),
            OnlyPrometheusReads(
                "the format says a backslash in a value is written \\\\; Prometheus keeps \\t as two characters, this reader refuses the line and names it",
            ),
        ),
        text(
            "a decimal timestamp",
            format!("dts 1 {s}.{ms:03}\n"),
            OnlyOursReads("a decimal timestamp is seconds (OpenMetrics' unit); the text format's grammar has integers only"),
        ),
        text(
            "an exemplar",
            "ex_bucket{le=\"1\"} 3 # {trace_id=\"abc\"} 0.5\n".to_owned(),
            OnlyOursReads("exemplars are OpenMetrics; in text format 0.0.4 Prometheus refuses them, this reader ignores them"),
        ),
        text(
            "a prometheus 3 quoted name",
            "{\"my.metric\", \"a.b\"=\"x\"} 1\n".to_owned(),
            OnlyOursReads("names in quotes are Prometheus 3's UTF-8 form; Prometheus 2.42 refuses them"),
        ),
        text(
            "a promtool tsdb dump line",
            format!("{{__name__=\"dumped\", a=\"b\"}} 1 {t}\n"),
            OnlyOursReads("promtool's dump form names the metric as a label; no scrape writes it"),
        ),
        // OpenMetrics.
        om(
            "timestamps in seconds",
            (0..20).map(|k| format!("oms{{k=\"{k}\"}} {k} {s}.{:03}\n", (ms + 37 * k) % 1000)).collect::<String>() + "# EOF\n",
            Same,
        ),
        om(
            "types, help, unit and an exemplar",
            format!(
                "# TYPE omc counter\n# HELP omc A counter.\nomc_total{{a=\"b\"}} 3 # {{trace_id=\"abc\"}} 0.5\nomc_created{{a=\"b\"}} 1.5e9\n# TYPE omd_seconds gauge\n# UNIT omd_seconds seconds\nomd_seconds 1.5\n# TYPE omg gauge\nomg NaN {s}.{ms:03}\n# EOF\n"
            ),
            Same,
        ),
        om("escapes", r#"ome{quote="a\"b",backslash="c\\d",newline="e\nf"} 1"#.to_owned() + "\n# EOF\n", Same),
        om(
            "flink's trailing comma",
            "omt{a=\"b\",} 1\n# EOF\n".to_owned(),
            OnlyOursReads("OpenMetrics' grammar has no comma before '}'; Flink writes it in text format, where it is allowed"),
        ),
    ]
}

// ---------------------------------------------------------------------------------------
// The HTTP server the corpora are scraped from
// ---------------------------------------------------------------------------------------

/// Serves corpus `i` at `/c{i}` on a loopback port until dropped.
struct CorpusServer {
    address: String,
    stop: Arc<AtomicBool>,
}

impl CorpusServer {
    /// Corpus `i` is served whole once and empty after that when `once[i]`.
    fn start(corpora: &[Corpus], once: &[bool]) -> CorpusServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let bodies: Arc<Vec<Body>> = Arc::new(
            corpora
                .iter()
                .zip(once)
                .map(|(c, &once)| (c.content_type, c.body.clone(), once, AtomicBool::new(false)))
                .collect(),
        );
        let stopping = stop.clone();
        std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let bodies = bodies.clone();
                        std::thread::spawn(move || answer(stream, &bodies));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        CorpusServer { address, stop }
    }
}

impl Drop for CorpusServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A corpus as served: its content type, its text, whether it is served once, and whether
/// it was served already.
type Body = (&'static str, Vec<u8>, bool, AtomicBool);

/// Answers one scrape: the corpus its path names, then closes the connection. A corpus
/// served once (the recordings dated in the future, up to 267,000 lines) is empty after
/// its first scrape: Prometheus is spared parsing it again every scrape interval while the
/// test reads, and its count of the first scrape's samples stays.
fn answer(mut stream: TcpStream, bodies: &[Body]) {
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let request = String::from_utf8_lossy(&request);
    let path = request.split_whitespace().nth(1).unwrap_or("");
    let found = path.strip_prefix("/c").and_then(|i| i.parse::<usize>().ok()).and_then(|i| bodies.get(i));
    let _ = match found {
        Some((content_type, body, once, served)) => {
            let body: &[u8] = if *once && served.swap(true, Ordering::Relaxed) { b"# EOF\n" } else { body };
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .and_then(|()| stream.write_all(body))
        }
        None => stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    };
}

// ---------------------------------------------------------------------------------------
// Prometheus
// ---------------------------------------------------------------------------------------

/// A Prometheus on a free loopback port scraping every corpus, stopped when dropped.
struct Prometheus {
    address: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(corpora: &[Corpus], target: &str) -> Prometheus {
        let binary = which("prometheus");
        let dir = tempfile::tempdir().unwrap();
        // Recordings hold samples days old: out-of-order ingestion lets the head take them
        // after the scrapes of now. honor_timestamps is Prometheus' default.
        let mut config = String::from(
            "global:\n  scrape_interval: 15s\n  scrape_timeout: 10s\nstorage:\n  tsdb:\n    out_of_order_time_window: 3650d\nscrape_configs:\n",
        );
        for i in 0..corpora.len() {
            config.push_str(&format!(
                "  - job_name: c{i}\n    metrics_path: /c{i}\n    static_configs:\n      - targets: ['{target}']\n"
            ));
        }
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let address = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={address}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Prometheus { address, child, _dir: dir }
    }

    /// Waits until every target was scraped once; returns each job's health and last error.
    fn wait_until_scraped(&self, targets: usize) -> BTreeMap<String, (bool, String)> {
        let deadline = Instant::now() + SCRAPED_WITHIN;
        loop {
            if let Some(answer) = get(&self.address, "/api/v1/targets?state=active") {
                let json: serde_json::Value = serde_json::from_str(&answer).unwrap();
                let active = json["data"]["activeTargets"].as_array().cloned().unwrap_or_default();
                let health: BTreeMap<String, (bool, String)> = active
                    .iter()
                    .filter(|t| t["health"] != "unknown")
                    .map(|t| {
                        let job = t["scrapePool"].as_str().unwrap().to_owned();
                        (job, (t["health"] == "up", t["lastError"].as_str().unwrap_or("").to_owned()))
                    })
                    .collect();
                if health.len() == targets {
                    return health;
                }
            }
            let log = std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default();
            assert!(Instant::now() < deadline, "Prometheus did not scrape every target in time:\n{log}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Every series stored for `job` but the scrape's own report, with all its samples.
    /// With `timestamped`, every sample of every series (a range selector over ten years);
    /// else the newest sample of each (an instant query: a sample without a timestamp is
    /// stored at each scrape with the same value, and the answer is smaller).
    fn series_of(&self, job: &str, timestamped: bool) -> BTreeMap<Series, Vec<(Option<i64>, f64)>> {
        let mut out = BTreeMap::new();
        let range = if timestamped { "[3650d]" } else { "" };
        for series in self.query(&format!("{{job=\"{job}\"}}{range}")) {
            let mut labels: Series = serde_json::from_value(series["metric"].clone()).unwrap();
            let name = labels.get("__name__").cloned().unwrap_or_default();
            if labels.len() == 3 && REPORT_SERIES.contains(&name.as_str()) {
                continue;
            }
            labels.remove("job");
            labels.remove("instance");
            let points = match series["values"].as_array() {
                Some(points) => points.iter().map(|p| (Some(point_time(&p[0])), value(&p[1]))).collect(),
                None => vec![(Some(point_time(&series["value"][0])), value(&series["value"][1]))],
            };
            out.insert(labels, points);
        }
        out
    }

    /// The samples Prometheus parsed in its first scrape of each job.
    fn samples_scraped(&self) -> BTreeMap<String, u64> {
        let answer = self.query("scrape_samples_scraped[3650d]");
        answer
            .iter()
            .map(|s| (s["metric"]["job"].as_str().unwrap().to_owned(), value(&s["values"][0][1]) as u64))
            .collect()
    }

    /// The result of an instant query at the time of asking.
    fn query(&self, promql: &str) -> Vec<serde_json::Value> {
        let answer = get(&self.address, &format!("/api/v1/query?query={}", percent_encode(promql)))
            .unwrap_or_else(|| panic!("{promql}: no answer"));
        let json: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(json["status"], "success", "{promql}: {answer}");
        json["data"]["result"].as_array().unwrap().clone()
    }
}

/// A point's time (seconds with three decimals in the JSON) in Unix milliseconds.
fn point_time(t: &serde_json::Value) -> i64 {
    (t.as_f64().unwrap() * 1000.0).round() as i64
}

/// A point's value: Prometheus writes it as a string (`"NaN"`, `"+Inf"`, shortest decimal).
fn value(v: &serde_json::Value) -> f64 {
    let text = v.as_str().unwrap();
    text.parse().unwrap_or_else(|_| panic!("value {text:?}"))
}

fn which(binary: &str) -> PathBuf {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|dir| Path::new(dir).join(binary))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("`{binary}` is not installed: apt-get install -y prometheus (scripts/test.sh does)"))
}

/// A GET over plain HTTP/1.0; the body of a 2xx answer, None otherwise or when the server
/// is not up yet.
fn get(address: &str, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).ok()?;
    let answer = String::from_utf8(answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.split_whitespace().nth(1).filter(|s| s.starts_with('2'))?;
    Some(body.to_owned())
}

/// `text` with every byte but the unreserved ones of RFC 3986 percent-encoded.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
