//! One series' samples, compressed the way Prometheus' head chunks are (Gorilla: the
//! delta of deltas of timestamps, values relative to the previous value), so a recording
//! of 1,000 vertices × 128 subtasks × 60 samples fits in a few bytes per sample instead of
//! sixteen. Lossless: every timestamp and every value's bits (NaN payloads, -0.0) come back
//! exactly as pushed.
//!
//! Each sample is one header byte and what it announces:
//! * bits 0–1, the value: `0` the same bits as the previous value; `1` an integer-valued
//!   double, the zigzag varint of its difference from the previous one (counters, and most
//!   of Flink's `…TimeMsPerSecond` gauges); `2` the XOR with the previous bits, its nonzero
//!   bytes only (a byte with the count of leading zero bytes and of bytes kept, then those
//!   bytes);
//! * bits 2–7, the timestamp: the zigzag of the delta of deltas when below 63 (a regular
//!   scrape is 0), else 63 and its zigzag varint after the header.

/// Header value of the timestamp bits meaning "a varint follows".
const DOD_ESCAPE: u8 = 63;
const SAME: u8 = 0;
const INT_DELTA: u8 = 1;
const XOR: u8 = 2;
/// Largest integer a double holds exactly (2^53).
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

/// Decoder (and encoder) state: the previous sample and the previous timestamp delta.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    t: i64,
    dt: i64,
    bits: u64,
}

/// An append-only, compressed list of `(t_ms, value)` samples.
#[derive(Debug, Clone, Default)]
pub struct Chunk {
    bytes: Vec<u8>,
    len: u32,
    last: State,
    min_t: i64,
    max_t: i64,
    sorted: bool,
}

/// `v` as an integer when the double is one exactly (and converting back gives the same
/// bits: not -0.0, NaN or infinities).
fn as_int(bits: u64) -> Option<i64> {
    let v = f64::from_bits(bits);
    if v.abs() > EXACT_INT || v.fract() != 0.0 {
        return None;
    }
    let i = v as i64;
    ((i as f64).to_bits() == bits).then_some(i)
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = bytes[*pos];
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

impl Chunk {
    /// An empty chunk.
    pub fn new() -> Self {
        Chunk { sorted: true, ..Chunk::default() }
    }

    /// Appends one sample. A timestamp older than the newest one marks the chunk unsorted
    /// (see [`Chunk::sort`]).
    pub fn push(&mut self, t_ms: i64, value: f64) {
        if self.len == 0 {
            self.sorted = true;
            self.min_t = t_ms;
            self.max_t = t_ms;
        } else {
            self.sorted &= t_ms >= self.last.t;
            self.min_t = self.min_t.min(t_ms);
            self.max_t = self.max_t.max(t_ms);
        }
        let dt = t_ms.wrapping_sub(self.last.t);
        let dod = zigzag(dt.wrapping_sub(self.last.dt));
        let bits = value.to_bits();
        let (kind, payload) = if bits == self.last.bits {
            (SAME, None)
        } else if let (Some(v), Some(prev)) = (as_int(bits), as_int(self.last.bits)) {
            (INT_DELTA, Some(zigzag(v - prev)))
        } else {
            (XOR, None)
        };
        let t_bits = if dod < u64::from(DOD_ESCAPE) { dod as u8 } else { DOD_ESCAPE };
        self.bytes.push(kind | (t_bits << 2));
        if t_bits == DOD_ESCAPE {
            put_varint(&mut self.bytes, dod);
        }
        match (kind, payload) {
            (INT_DELTA, Some(delta)) => put_varint(&mut self.bytes, delta),
            (XOR, _) => {
                let x = bits ^ self.last.bits;
                let lead = x.leading_zeros() / 8;
                let trail = x.trailing_zeros() / 8;
                let kept = 8 - lead - trail;
                self.bytes.push((lead as u8) << 4 | kept as u8);
                let shifted = x >> (8 * trail);
                self.bytes.extend_from_slice(&shifted.to_le_bytes()[..kept as usize]);
            }
            _ => {}
        }
        // The first delta is measured from the first sample, not from time 0.
        self.last = State { t: t_ms, dt: if self.len == 0 { 0 } else { dt }, bits };
        self.len += 1;
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when the chunk holds no sample.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The oldest and the newest timestamp, None when empty.
    pub fn bounds(&self) -> Option<(i64, i64)> {
        (self.len > 0).then_some((self.min_t, self.max_t))
    }

    /// The samples in push order.
    pub fn iter(&self) -> ChunkIter<'_> {
        ChunkIter { bytes: &self.bytes, pos: 0, state: State::default() }
    }

    /// Sorts the samples by time if they were pushed out of order (stable: for equal
    /// timestamps the later push stays later), and gives back unused capacity.
    pub fn sort(&mut self) {
        if !self.sorted {
            let mut pairs: Vec<(i64, f64)> = self.iter().collect();
            pairs.sort_by_key(|p| p.0);
            let mut sorted = Chunk::new();
            for (t, v) in pairs {
                sorted.push(t, v);
            }
            *self = sorted;
        }
        self.bytes.shrink_to_fit();
    }

    /// Bytes held for the samples.
    pub fn encoded_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The newest sample at or before `t_ms` (samples sorted).
    pub fn last_at_or_before(&self, t_ms: i64) -> Option<(i64, f64)> {
        if self.len > 0 && self.max_t <= t_ms {
            return Some((self.last.t, f64::from_bits(self.last.bits)));
        }
        self.iter().take_while(|&(t, _)| t <= t_ms).last()
    }

    /// Fills `ts` and `vs` with the samples inside `(start_ms, end_ms]` (samples sorted).
    pub fn range_into(&self, start_ms: i64, end_ms: i64, ts: &mut Vec<i64>, vs: &mut Vec<f64>) {
        ts.clear();
        vs.clear();
        if self.len == 0 || self.max_t <= start_ms || self.min_t > end_ms {
            return;
        }
        for (t, v) in self.iter().skip_while(|&(t, _)| t <= start_ms).take_while(|&(t, _)| t <= end_ms) {
            ts.push(t);
            vs.push(v);
        }
    }
}

/// Decodes a [`Chunk`] front to back.
#[derive(Debug, Clone)]
pub struct ChunkIter<'a> {
    bytes: &'a [u8],
    pos: usize,
    state: State,
}

impl Iterator for ChunkIter<'_> {
    type Item = (i64, f64);

    fn next(&mut self) -> Option<(i64, f64)> {
        let first = self.pos == 0;
        let header = *self.bytes.get(self.pos)?;
        self.pos += 1;
        let t_bits = header >> 2;
        let dod = if t_bits == DOD_ESCAPE { get_varint(self.bytes, &mut self.pos) } else { u64::from(t_bits) };
        let dt = self.state.dt.wrapping_add(unzigzag(dod));
        let t = self.state.t.wrapping_add(dt);
        let bits = match header & 3 {
            SAME => self.state.bits,
            INT_DELTA => {
                let prev = as_int(self.state.bits).expect("an integer delta follows an integer value");
                ((prev + unzigzag(get_varint(self.bytes, &mut self.pos))) as f64).to_bits()
            }
            _ => {
                let shape = self.bytes[self.pos];
                self.pos += 1;
                let (lead, kept) = (u32::from(shape >> 4), usize::from(shape & 0x0f));
                let trail = 8 - lead - kept as u32;
                let mut le = [0u8; 8];
                le[..kept].copy_from_slice(&self.bytes[self.pos..self.pos + kept]);
                self.pos += kept;
                let x = u64::from_le_bytes(le).checked_shl(8 * trail).unwrap_or(0);
                self.state.bits ^ x
            }
        };
        self.state = State { t, dt: if first { 0 } else { dt }, bits };
        Some((t, f64::from_bits(bits)))
    }
}

/// Walks a sorted chunk forward for instant lookups at increasing times (a range query's
/// steps) without decoding from the start at every step.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    iter: ChunkIter<'a>,
    current: Option<(i64, f64)>,
    next: Option<(i64, f64)>,
}

impl<'a> Cursor<'a> {
    pub fn new(chunk: &'a Chunk) -> Self {
        let mut iter = chunk.iter();
        let next = iter.next();
        Cursor { iter, current: None, next }
    }

    /// The newest sample at or before `t_ms`; `t_ms` must not decrease between calls.
    pub fn at_or_before(&mut self, t_ms: i64) -> Option<(i64, f64)> {
        while let Some(n) = self.next.filter(|n| n.0 <= t_ms) {
            self.current = Some(n);
            self.next = self.iter.next();
        }
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn roundtrip(samples: &[(i64, f64)]) -> Vec<(i64, f64)> {
        let mut c = Chunk::new();
        for &(t, v) in samples {
            c.push(t, v);
        }
        assert_eq!(c.len(), samples.len());
        c.iter().collect()
    }

    fn same_bits(a: &[(i64, f64)], b: &[(i64, f64)]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.0 == y.0 && x.1.to_bits() == y.1.to_bits())
    }

    #[test]
    fn every_value_comes_back_with_its_exact_bits() {
        let weird = [
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::from_bits(0x7ff8_0000_0000_0001),
            f64::INFINITY,
            f64::NEG_INFINITY,
            1.5156e10,
            16.666666666666668,
            EXACT_INT,
            EXACT_INT * 2.0,
            -EXACT_INT,
            i64::MAX as f64,
            f64::MIN_POSITIVE,
            5e-324,
            1.0,
            1.0,
        ];
        let samples: Vec<(i64, f64)> = weird.iter().enumerate().map(|(i, &v)| (i as i64 * 5_000, v)).collect();
        assert!(same_bits(&roundtrip(&samples), &samples));
    }

    #[test]
    fn a_regular_scrape_of_a_counter_takes_two_bytes_a_sample() {
        let mut c = Chunk::new();
        // 60 scrapes 5 s apart of a counter growing 50 a scrape.
        for k in 0..60 {
            c.push(1_795_000_000_000 + k * 5_000, 1_000_000.0 + 50.0 * k as f64);
        }
        let first = c.iter().next().unwrap();
        assert_eq!(first, (1_795_000_000_000, 1_000_000.0));
        // The first sample: header, varint of zigzag(1.795e12) (6 bytes), varint of
        // zigzag(1e6) = 2e6 (3 bytes): 10. The second: header, varint of zigzag(5000) =
        // 10000 (2 bytes), varint of zigzag(50) = 100 (1 byte): 4. The other 58: a header
        // (delta of deltas 0) and the one-byte delta: 2 each.
        assert_eq!(c.encoded_bytes(), 10 + 4 + 58 * 2);
    }

    #[test]
    fn out_of_order_samples_sort_stably() {
        let mut c = Chunk::new();
        for (t, v) in [(30, 3.0), (10, 1.0), (20, 2.0), (10, 1.5)] {
            c.push(t, v);
        }
        assert_eq!(c.bounds(), Some((10, 30)));
        c.sort();
        assert_eq!(c.iter().collect::<Vec<_>>(), vec![(10, 1.0), (10, 1.5), (20, 2.0), (30, 3.0)]);
    }

    #[test]
    fn lookups_take_the_left_open_range_and_the_newest_sample_at_a_time() {
        let mut c = Chunk::new();
        for k in 0..10 {
            c.push(k * 10, k as f64);
        }
        let (mut ts, mut vs) = (Vec::new(), Vec::new());
        c.range_into(20, 50, &mut ts, &mut vs);
        assert_eq!(ts, vec![30, 40, 50]);
        assert_eq!(vs, vec![3.0, 4.0, 5.0]);
        assert_eq!(c.last_at_or_before(45), Some((40, 4.0)));
        assert_eq!(c.last_at_or_before(-1), None);
        assert_eq!(c.last_at_or_before(1_000), Some((90, 9.0)));
        let mut cursor = Cursor::new(&c);
        assert_eq!(cursor.at_or_before(-5), None);
        assert_eq!(cursor.at_or_before(0), Some((0, 0.0)));
        assert_eq!(cursor.at_or_before(55), Some((50, 5.0)));
        assert_eq!(cursor.at_or_before(500), Some((90, 9.0)));
    }

    proptest! {
        #[test]
        fn any_samples_roundtrip(samples in proptest::collection::vec((any::<i64>(), any::<u64>()), 0..50)) {
            let samples: Vec<(i64, f64)> = samples.into_iter().map(|(t, b)| (t, f64::from_bits(b))).collect();
            prop_assert!(same_bits(&roundtrip(&samples), &samples));
        }

        #[test]
        fn scrape_like_samples_roundtrip(start in -1_000_000_000_000i64..2_000_000_000_000, jitter in proptest::collection::vec((-3i64..3, -1_000i64..1_000, 0u8..4), 1..80)) {
            let mut t = start;
            let mut v = 0.0;
            let mut samples = Vec::new();
            for (dj, dv, kind) in jitter {
                t += 5_000 + dj;
                v = match kind { 0 => v, 1 => v + dv as f64, 2 => dv as f64 / 3.0, _ => f64::NAN };
                samples.push((t, v));
            }
            prop_assert!(same_bits(&roundtrip(&samples), &samples));
        }
    }
}
