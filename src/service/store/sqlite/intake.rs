//! Webhook intake on SQLite: one writer thread commits many webhooks per transaction
//! (group commit), each webhook all or nothing, answered after the commit that holds it.

use super::*;

impl SqliteStore {
    /// See [`crate::service::store::Store::enqueue`].
    pub async fn enqueue(
        &self,
        intakes: Vec<Intake>,
        now_ms: i64,
        due_ms: i64,
        max_queue: usize,
    ) -> Result<Enqueued, StoreError> {
        let (done, wait) = oneshot::channel();
        let stopped = || StoreError::new(StoreErrorKind::Other, "the intake writer stopped");
        let max_queue = i64::try_from(max_queue).unwrap_or(i64::MAX);
        let intake = self.intake.lock().unwrap_or_else(|p| p.into_inner()).clone().ok_or_else(stopped)?;
        intake.send(Batch { intakes, now_ms, due_ms, max_queue, done }).await.map_err(|_| stopped())?;
        wait.await.map_err(|_| stopped())?
    }
}

/// Most webhooks committed in one intake transaction.
pub(super) const MAX_BATCH: usize = 512;

/// A webhook's intakes on their way to the writer thread.
pub(super) struct Batch {
    intakes: Vec<Intake>,
    now_ms: i64,
    due_ms: i64,
    max_queue: i64,
    done: oneshot::Sender<Result<Enqueued, StoreError>>,
}

/// How long the intake writer keeps looking for the next webhook, yielding its core between
/// looks, before it sleeps. Under load the next one comes within microseconds; going to
/// sleep and being woken by the sender (a futex wake, and an interrupt to another CPU in a
/// VM) cost more than the webhook's own commit. Measured on 2 cores: 3–6 µs of CPU less
/// per webhook at 30k/s; an idle service spends at most this once per batch.
pub(super) const WRITER_LINGER: std::time::Duration = std::time::Duration::from_micros(50);

/// The next webhook for the writer: looks for [`WRITER_LINGER`], then sleeps until one
/// comes. `None` once the store is dropped.
pub(super) fn next_webhook(rx: &mut mpsc::Receiver<Batch>) -> Option<Batch> {
    let since = std::time::Instant::now();
    loop {
        match rx.try_recv() {
            Ok(b) => return Some(b),
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
            Err(mpsc::error::TryRecvError::Empty) if since.elapsed() < WRITER_LINGER => std::thread::yield_now(),
            Err(mpsc::error::TryRecvError::Empty) => return rx.blocking_recv(),
        }
    }
}

/// The group-commit loop: takes every batch waiting, commits them in one transaction
/// ([`commit_batches`]), then answers each.
///
/// One thread, one connection: the answers wait for the commit (with synchronous=FULL,
/// its sync of the WAL), and the webhooks that arrive meanwhile make the next batch. (A
/// second thread syncing while the writer went on measured slower on 2 cores: one more
/// hand-off between threads per batch.)
pub(super) fn intake_writer(conn: Connection, mut rx: mpsc::Receiver<Batch>, metrics: &Metrics, fairness: Fairness) {
    while let Some(first) = next_webhook(&mut rx) {
        let mut batches = vec![first];
        while batches.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(b) => batches.push(b),
                Err(_) => break,
            }
        }
        let mut dead = Vec::new();
        match commit_batches(&conn, &batches, fairness, &mut dead) {
            Ok(results) => {
                metrics.store_intake_commits.inc();
                report_dead(metrics, dead);
                for (b, r) in batches.into_iter().zip(results) {
                    let _ = b.done.send(r);
                }
            }
            Err(e) => {
                for b in batches {
                    let _ = b.done.send(Err(e.clone()));
                }
            }
        }
    }
}

/// One transaction for many webhooks. The outer error fails them all (the commit failed,
/// or SQLite rolled the transaction back); an inner one fails that webhook alone.
pub(super) fn commit_batches(
    conn: &Connection,
    batches: &[Batch],
    fairness: Fairness,
    dead: &mut Vec<DeadLetter>,
) -> Result<Vec<Result<Enqueued, StoreError>>, StoreError> {
    let tx = Immediate::begin(conn)?;
    let count_work = |tx: &Connection| -> Result<i64, StoreError> {
        Ok(tx.prepare_cached("SELECT COUNT(*) FROM work")?.query_row([], |r| r.get(0))?)
    };
    let mut depth = count_work(&tx)?;
    let mut unknown = UnknownWaiting::new(fairness);
    let mut results = Vec::with_capacity(batches.len());
    for b in batches {
        let mut own_dead = Vec::new();
        let result = apply_webhook(&tx, b, depth, &mut unknown, &mut own_dead);
        // After a disk-full or I/O error SQLite may roll the whole transaction back; what
        // follows would commit statement by statement. Nothing of the batch holds then.
        if tx.is_autocommit() {
            return Err(result.err().unwrap_or_else(|| {
                StoreError::new(StoreErrorKind::Other, "SQLite rolled the intake transaction back")
            }));
        }
        match &result {
            Ok(Enqueued::Stored { depth: d, .. }) => {
                depth = *d;
                dead.append(&mut own_dead);
            }
            Ok(Enqueued::QueueFull { .. }) => {}
            Ok(Enqueued::TooManyUnknown { .. }) => {}
            // Undone by its savepoint, or a single statement that failed whole.
            Err(_) => {
                depth = count_work(&tx)?;
                unknown = UnknownWaiting::new(fairness);
            }
        }
        results.push(result);
    }
    tx.commit()?;
    Ok(results)
}

/// `BEGIN IMMEDIATE` … `COMMIT` through cached statements (rusqlite's `Transaction` parses
/// both anew every time); rolled back when dropped uncommitted.
pub(super) struct Immediate<'c> {
    conn: &'c Connection,
}

impl<'c> Immediate<'c> {
    fn begin(conn: &'c Connection) -> Result<Immediate<'c>, StoreError> {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Immediate { conn })
    }

    fn commit(self) -> Result<(), StoreError> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }
}

impl std::ops::Deref for Immediate<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Immediate<'_> {
    fn drop(&mut self) {
        // After a COMMIT (or SQLite's own rollback) there is no transaction left.
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// What one webhook does to one job's pending diagnosis: read once, then every intake of
/// the job in the webhook merged in memory, then at most one write.
pub(super) struct Edit<'i> {
    intake: &'i Intake,
    /// The pending row to update; `None`: a new diagnosis.
    row: Option<i64>,
    /// An undecodable pending row to move to the dead letters before the new one.
    replaces: Option<(i64, String)>,
    groups: BTreeMap<String, GroupInfo>,
    labels: String,
    /// Whether the row read differs from what the webhook leaves.
    changed: bool,
    due_ms: i64,
    /// Whether the job is known (the row's, the intake's or the store's `known_jobs`).
    known: bool,
    /// The row's failed attempts (0 for a new one): with the groups, its claim class.
    attempts: i64,
}

impl Edit<'_> {
    /// The statements [`write`] runs for it.
    fn statements(&self) -> usize {
        match (self.row, &self.replaces) {
            (Some(_), _) => usize::from(self.changed),
            (None, None) => 1,
            (None, Some(_)) => 3,
        }
    }
}

/// One webhook's intakes, all or nothing: every job's pending row is read and the queue
/// bound checked before anything is written; a webhook whose writes take more than one
/// statement runs them under a savepoint (most take one, or none: a savepoint journals
/// every page it touches).
pub(super) fn apply_webhook(
    tx: &Connection,
    b: &Batch,
    depth: i64,
    unknown: &mut UnknownWaiting,
    dead: &mut Vec<DeadLetter>,
) -> Result<Enqueued, StoreError> {
    let mut edits: Vec<Edit<'_>> = Vec::with_capacity(b.intakes.len());
    for i in &b.intakes {
        let at = match edits.iter().position(|e| e.intake.job_key == i.job_key) {
            Some(at) => at,
            None => {
                edits.push(read_pending(tx, i, b)?);
                edits.len() - 1
            }
        };
        merge(&mut edits[at], i)?;
    }
    let created = edits.iter().filter(|e| e.row.is_none()).count();
    // The bound is about diagnosis work: a new row for a resolved group needs none.
    let diagnoses = edits.iter().filter(|e| e.row.is_none() && e.intake.firing).count();
    if diagnoses > 0 && depth + diagnoses as i64 > b.max_queue {
        return Ok(Enqueued::QueueFull { depth });
    }
    // New unknown diagnoses count against their sender's cap and the unknown share.
    let mut new_unknown: BTreeMap<&str, i64> = BTreeMap::new();
    for e in edits.iter().filter(|e| e.row.is_none() && e.intake.firing && !e.known) {
        *new_unknown.entry(e.intake.sender.as_str()).or_default() += 1;
    }
    if let Some(refused) = admit(unknown, tx, &new_unknown, b.max_queue)? {
        return Ok(refused);
    }
    let savepoint = edits.iter().map(Edit::statements).sum::<usize>() > 1;
    if savepoint {
        tx.prepare_cached("SAVEPOINT intake")?.execute([])?;
    }
    let mut own_dead = Vec::new();
    let written = edits.into_iter().try_for_each(|e| write(tx, e, b, &mut own_dead));
    if savepoint {
        if written.is_err() && !tx.is_autocommit() {
            tx.prepare_cached("ROLLBACK TO intake")?.execute([])?;
        }
        if !tx.is_autocommit() {
            tx.prepare_cached("RELEASE intake")?.execute([])?;
        }
    }
    written?;
    unknown.stored(&new_unknown);
    dead.append(&mut own_dead);
    Ok(Enqueued::Stored { jobs: b.intakes.len(), created, depth: depth + created as i64 })
}

/// Reads the pending diagnosis of an intake's job.
pub(super) fn read_pending<'i>(tx: &Connection, i: &'i Intake, b: &Batch) -> Result<Edit<'i>, StoreError> {
    let found: Option<(i64, rusqlite::types::Value, String, bool, i64)> = tx
        .prepare_cached(
            "SELECT id, groups, labels, known, attempts FROM work WHERE state = 'pending' AND job_key = ?1",
        )?
        .query_row(params![i.job_key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .optional()?;
    let known = i.known || found.as_ref().is_some_and(|f| f.3) || is_known(tx, &i.job_key)?;
    let new = |replaces| Edit {
        intake: i,
        row: None,
        replaces,
        groups: BTreeMap::new(),
        labels: String::new(),
        changed: true,
        due_ms: b.due_ms,
        known,
        attempts: 0,
    };
    let Some((id, groups, labels, was_known, attempts)) = found else { return Ok(new(None)) };
    let decoded = match &groups {
        rusqlite::types::Value::Text(t) => {
            serde_json::from_str::<BTreeMap<String, GroupInfo>>(t).map_err(|e| format!("groups: {e}"))
        }
        other => Err(format!("groups: a {:?} value where JSON text belongs", other.data_type())),
    };
    Ok(match decoded {
        Ok(groups) => {
            // A weak verdict's follow-up waits longer than the coalescing window: a
            // webhook brings it forward (a retry keeps its backoff).
            let follow_up = groups.values().all(|g| g.rediagnosis);
            let due_ms = if follow_up { b.due_ms } else { i64::MAX };
            Edit {
                intake: i,
                row: Some(id),
                replaces: None,
                groups,
                labels,
                changed: known != was_known,
                due_ms,
                known,
                attempts,
            }
        }
        Err(why) => new(Some((id, why))),
    })
}

/// Merges an intake into its job's edit: its group's entry, and its labels.
pub(super) fn merge(e: &mut Edit<'_>, i: &Intake) -> Result<(), StoreError> {
    let info = GroupInfo {
        firing: i.firing,
        firing_set: i.firing_set.clone(),
        labels: i.labels.clone(),
        rediagnosis: false,
        links: i.links.clone(),
    };
    if e.groups.get(&i.group_key) != Some(&info) {
        e.groups.insert(i.group_key.clone(), info);
        e.changed = true;
    }
    let labels = serde_json::to_string(&i.labels)?;
    if labels != e.labels {
        e.labels = labels;
        e.changed = true;
    }
    Ok(())
}

/// Writes an edit: nothing when it changes nothing.
pub(super) fn write(tx: &Connection, e: Edit<'_>, b: &Batch, dead: &mut Vec<DeadLetter>) -> Result<(), StoreError> {
    match e.row {
        Some(_) if !e.changed => {}
        Some(id) => {
            tx.prepare_cached(
                "UPDATE work SET groups = ?2, labels = ?3, due_ms = MIN(due_ms, ?4), known = ?5, claim_class = ?6
                 WHERE id = ?1",
            )?
            .execute(params![
                id,
                serde_json::to_string(&e.groups)?,
                e.labels,
                e.due_ms,
                e.known,
                claim_class(&e.groups, e.attempts)
            ])?;
        }
        None => {
            if let Some((id, why)) = &e.replaces {
                dead.push(dead_letter_work(tx, *id, why, b.now_ms)?);
            }
            tx.prepare_cached(
                "INSERT INTO work (job_key, job, labels, groups, due_ms, created_ms, state, sender, known, claim_class)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?8, ?9)",
            )?
            .execute(params![
                e.intake.job_key,
                e.intake.job,
                e.labels,
                serde_json::to_string(&e.groups)?,
                e.due_ms,
                b.now_ms,
                e.intake.sender,
                e.known,
                claim_class(&e.groups, 0)
            ])?;
        }
    }
    Ok(())
}

/// Whether the store has given `job_key` a verdict (and has not pruned it since).
pub(super) fn is_known(tx: &Connection, job_key: &str) -> Result<bool, StoreError> {
    Ok(tx
        .prepare_cached("SELECT 1 FROM known_jobs WHERE job_key = ?1")?
        .query_row(params![job_key], |_| Ok(()))
        .optional()?
        .is_some())
}

/// `None` when a webhook's new unknown diagnoses (per sender) fit ([`UnknownWaiting`]);
/// else the refusal. What the decision needs is counted in the table first, once per
/// intake transaction.
pub(super) fn admit(
    unknown: &mut UnknownWaiting,
    tx: &Connection,
    new: &BTreeMap<&str, i64>,
    max_queue: i64,
) -> Result<Option<Enqueued>, StoreError> {
    if new.is_empty() {
        return Ok(None);
    }
    if !unknown.has_total() {
        unknown.set_total(tx.prepare_cached("SELECT COUNT(*) FROM work WHERE known = 0")?.query_row([], |r| r.get(0))?);
    }
    let uncounted: Vec<&str> = new.keys().copied().filter(|s| !unknown.has_sender(s)).collect();
    for sender in uncounted {
        let waiting: i64 = tx
            .prepare_cached("SELECT COUNT(*) FROM work WHERE known = 0 AND sender = ?1")?
            .query_row(params![sender], |r| r.get(0))?;
        unknown.set_sender(sender, waiting);
    }
    Ok(unknown.refusal(new, max_queue))
}
