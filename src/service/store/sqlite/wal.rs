//! Reads a SQLite write-ahead log the way SQLite's recovery does, to find committed
//! transactions that recovery would drop without a word.
//!
//! The format is SQLite's (<https://www.sqlite.org/fileformat2.html#walformat>): a 32-byte
//! header (magic, format version, page size, checkpoint sequence, two salts, a checksum of
//! the first 24 bytes), then frames of a 24-byte header (page number, the database size in
//! pages for the frame that commits a transaction and 0 otherwise, the two salts, a
//! cumulative checksum of the frame header's first 8 bytes and the page) and one page.
//! Recovery reads frames until the first whose salts differ from the header's or whose
//! checksum is wrong, and keeps the transactions committed before it; the rest is dropped
//! silently. Frames of an older generation of the log (other salts) after the end are
//! normal: the log is rewritten from its start after a checkpoint, not truncated.
//!
//! Damage is what recovery cannot tell from an end:
//! * a frame that commits a transaction, with the current salts, *after* the first bad
//!   frame: a committed transaction was written after the damage, and is dropped;
//! * a file that ends inside a frame: the log was cut (truncated, copied while written, a
//!   full disk), and what was committed after the cut is gone. (An interrupted write of an
//!   uncommitted transaction can leave this too; the operator is told it *may* be a loss.)
//! * a damaged header while frames follow: every frame is ignored.
//!
//! A log cut exactly at a frame boundary looks like a log that ends there: no reader can
//! tell, and none is claimed to.

/// `WAL_HEADER_SIZE` of SQLite's `wal.c`.
pub const HEADER: usize = 32;
/// `WAL_FRAME_HDRSIZE` of SQLite's `wal.c`.
pub const FRAME_HEADER: usize = 24;
/// `WAL_MAGIC`: the low bit says whether checksums are computed on big-endian words.
const MAGIC: u32 = 0x377f_0682;
/// `WAL_MAX_VERSION`, the only format version there is.
const VERSION: u32 = 3_007_000;

/// What a scan of a log found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WalScan {
    /// Whole frames in the file.
    pub frames: usize,
    /// Frames recovery keeps (up to and including the last valid commit frame).
    pub kept_frames: usize,
    /// Transactions recovery keeps.
    pub kept_commits: usize,
    /// Committed transactions (with the current salts) after the first bad frame.
    pub dropped_commits: usize,
    /// Why committed transactions would be lost, for a person; `None` when none are.
    pub damage: Option<String>,
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// SQLite's `walChecksumBytes`: over 8-byte pairs of 32-bit words, continuing `s`.
fn checksum(data: &[u8], big_endian: bool, mut s: (u32, u32)) -> (u32, u32) {
    for pair in data.chunks_exact(8) {
        let word = |w: &[u8]| {
            let a = [w[0], w[1], w[2], w[3]];
            if big_endian { u32::from_be_bytes(a) } else { u32::from_le_bytes(a) }
        };
        s.0 = s.0.wrapping_add(word(&pair[..4])).wrapping_add(s.1);
        s.1 = s.1.wrapping_add(word(&pair[4..])).wrapping_add(s.0);
    }
    s
}

/// A page size as the header stores it (1 stands for 65536); `None` when not a power of
/// two from 512 to 65536.
fn page_size(raw: u32) -> Option<usize> {
    let size = if raw == 1 { 65_536 } else { raw as usize };
    (size.is_power_of_two() && (512..=65_536).contains(&size)).then_some(size)
}

/// Scans a whole log (the bytes of `<db>-wal`). An empty file is a log with nothing in it.
pub fn scan(wal: &[u8]) -> WalScan {
    if wal.is_empty() {
        return WalScan::default();
    }
    if wal.len() < HEADER {
        return WalScan {
            damage: Some(format!("the WAL is {} bytes, shorter than its {HEADER}-byte header: it was cut", wal.len())),
            ..WalScan::default()
        };
    }
    let magic = be32(wal, 0);
    let big_endian = magic & 1 == 1;
    let size = page_size(be32(wal, 8));
    let header_ok = magic & !1 == MAGIC
        && be32(wal, 4) == VERSION
        && checksum(&wal[..24], big_endian, (0, 0)) == (be32(wal, 24), be32(wal, 28));
    let Some(size) = size.filter(|_| header_ok) else {
        return WalScan {
            damage: (wal.len() > HEADER).then(|| {
                format!("the WAL header is damaged: SQLite ignores all {} bytes of frames after it", wal.len() - HEADER)
            }),
            ..WalScan::default()
        };
    };
    let salts = (be32(wal, 16), be32(wal, 20));
    let frame_len = FRAME_HEADER + size;
    let frames = (wal.len() - HEADER) / frame_len;
    let tail = (wal.len() - HEADER) % frame_len;
    let mut scan = WalScan { frames, ..WalScan::default() };
    let mut sum = (be32(wal, 24), be32(wal, 28));
    let mut first_bad = None;
    for i in 0..frames {
        let frame = &wal[HEADER + i * frame_len..HEADER + (i + 1) * frame_len];
        let own_salts = (be32(frame, 8), be32(frame, 12));
        let commit = be32(frame, 4) != 0;
        match first_bad {
            None => {
                sum = checksum(&frame[FRAME_HEADER..], big_endian, checksum(&frame[..8], big_endian, sum));
                if own_salts != salts || sum != (be32(frame, 16), be32(frame, 20)) {
                    first_bad = Some(i);
                } else if commit {
                    scan.kept_frames = i + 1;
                    scan.kept_commits += 1;
                }
            }
            Some(_) => scan.dropped_commits += usize::from(commit && own_salts == salts),
        }
    }
    if let Some(bad) = first_bad.filter(|_| scan.dropped_commits > 0) {
        scan.damage = Some(format!(
            "frame {} of {frames} of the WAL is damaged (its checksum or salt is wrong), and {} committed transaction(s) follow it: SQLite keeps the {} before it and drops those",
            bad + 1,
            scan.dropped_commits,
            scan.kept_commits
        ));
    } else if tail != 0 && first_bad.is_none() {
        scan.damage = Some(format!(
            "the WAL ends {tail} bytes into a frame of {frame_len}: it was cut (truncated, copied while written, or the disk filled), and transactions committed after the cut may be lost; SQLite keeps the {} before it",
            scan.kept_commits
        ));
    }
    scan
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real log: a database in WAL mode with `commits` transactions of one row each
    /// (automatic checkpoints off), its `-wal` read while the connection is still open,
    /// as a crash leaves it.
    fn real_wal(commits: usize) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        conn.execute_batch("CREATE TABLE t (x TEXT)").unwrap();
        for i in 0..commits {
            conn.execute("INSERT INTO t VALUES (?1)", [format!("row {i}")]).unwrap();
        }
        std::fs::read(dir.path().join("t.db-wal")).unwrap()
    }

    #[test]
    fn a_whole_log_keeps_every_transaction_and_is_not_damage() {
        // CREATE TABLE and 10 inserts: 11 transactions.
        let scan = scan(&real_wal(10));
        assert_eq!((scan.kept_commits, scan.dropped_commits, scan.damage.as_deref()), (11, 0, None));
        assert_eq!(scan.kept_frames, scan.frames);
    }

    #[test]
    fn an_empty_log_is_nothing_to_recover_and_not_damage() {
        assert_eq!(scan(&[]), WalScan::default());
    }

    #[test]
    fn bytes_flipped_in_the_middle_of_the_log_are_damage_naming_the_transactions_dropped() {
        let mut wal = real_wal(10);
        let frame_len = FRAME_HEADER + 4096;
        let frames = (wal.len() - HEADER) / frame_len;
        // Into the page of the middle frame: its checksum no longer matches.
        let at = HEADER + (frames / 2) * frame_len + FRAME_HEADER + 100;
        wal[at..at + 4].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let scan = scan(&wal);
        // 11 transactions: CREATE TABLE writes two pages (frames 1-2, committed by 2), each
        // insert one (frames 3-12, each committing). Frame 7 damaged: the 5 commits of
        // frames 2-6 are kept, frame 7's own is lost, and the 5 of frames 8-12 follow it.
        assert_eq!((scan.frames, scan.kept_commits, scan.dropped_commits), (12, 5, 5), "{scan:?}");
        assert!(scan.damage.unwrap().contains("committed transaction(s) follow it"));
    }

    #[test]
    fn a_log_cut_in_half_is_damage() {
        let wal = real_wal(10);
        let scan = scan(&wal[..wal.len() / 2 + 7]);
        assert!(scan.damage.unwrap().contains("it was cut"));
    }

    #[test]
    fn a_damaged_header_with_frames_after_it_is_damage() {
        let mut wal = real_wal(3);
        wal[9] ^= 0xff;
        assert!(scan(&wal).damage.unwrap().contains("header is damaged"));
    }

    #[test]
    fn frames_of_an_older_generation_after_the_end_are_not_damage() {
        // The log after a checkpoint and a restart: new salts over the first frames, the
        // old generation's frames after them.
        let old = real_wal(10);
        let new = real_wal(1);
        let mut wal = old.clone();
        wal[..new.len()].copy_from_slice(&new);
        let scan = scan(&wal);
        assert_eq!((scan.kept_commits, scan.damage.as_deref()), (2, None), "{scan:?}");
    }
}
