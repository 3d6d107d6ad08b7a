//! The outbox on SQLite: claims per (destination, group), folding of "could not
//! diagnose" notices, delivery outcomes, the groups' state.

use super::*;

impl SqliteStore {
    /// See [`crate::service::store::Store::claim_delivery`].
    pub fn claim_delivery(
        &self,
        destination: &str,
        now_ms: i64,
        window_ms: i64,
    ) -> Result<Option<OutboxRow>, StoreError> {
        // "Could not diagnose" waits (up to ?3 ms) while any diagnosis is queued or running
        // (its group's, or a burst's draining): their failures fold in.
        // It also waits while one is being sent to the destination or was sent within the
        // last ?4 ms (folded rows are not sent: their last_error says so); a verdict or a
        // resolution does not wait behind a waiting one of its group.
        const CANDIDATE: &str = "SELECT o.id FROM outbox o
             WHERE o.destination = ?1 AND o.state = 'pending' AND o.next_ms <= ?2
               AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.destination = o.destination
                 AND e.group_key = o.group_key AND e.state IN ('pending', 'sending') AND e.id < o.id
                 AND (o.priority = 1 OR e.priority = 0 OR e.state = 'sending'))
               AND (o.priority = 0 OR ((o.first_ms <= ?2 - ?3
                   OR NOT EXISTS (SELECT 1 FROM work WHERE state IN ('pending', 'running')))
                 AND NOT EXISTS (SELECT 1 FROM outbox s WHERE s.destination = o.destination AND s.priority = 1
                   AND (s.state = 'sending' OR (s.state = 'sent' AND s.last_error IS NULL AND s.done_ms > ?2 - ?4)))))
             ORDER BY o.priority, o.rank, o.id LIMIT 1";
        let mut conn = self.conn();
        // Look before taking the write lock (see `claim_work`).
        let due = conn
            .prepare_cached(CANDIDATE)?
            .query_row(params![destination, now_ms, FOLD_WAIT_MAX_MS, window_ms], |r| r.get::<_, i64>(0));
        if due.optional()?.is_none() {
            return Ok(None);
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut dead = Vec::new();
        let row = loop {
            let candidate: Option<i64> = tx
                .prepare_cached(CANDIDATE)?
                .query_row(params![destination, now_ms, FOLD_WAIT_MAX_MS, window_ms], |r| r.get(0))
                .optional()?;
            let Some(id) = candidate else { break None };
            match read_outbox(&tx, id)? {
                Ok(mut row) => {
                    tx.prepare_cached("UPDATE outbox SET state = 'sending', attempts = attempts + 1 WHERE id = ?1")?
                        .execute(params![id])?;
                    row.attempts += 1;
                    fold_siblings(&tx, &mut row, now_ms)?;
                    row.group_state = group_state(&tx, destination, row.notice.thread_key(), &mut dead, now_ms)?;
                    break Some(row);
                }
                Err(why) if dead.len() < MAX_DEAD_PER_CLAIM => dead.push(dead_letter_outbox(&tx, id, &why, now_ms)?),
                Err(_) => break None,
            }
        };
        tx.commit()?;
        drop(conn);
        self.report_dead(dead);
        Ok(row)
    }

    /// See [`crate::service::store::Store::next_delivery_ms`].
    pub fn next_delivery_ms(&self, destination: &str, window_ms: i64) -> Result<Option<i64>, StoreError> {
        // A "could not diagnose" is due once the window after the last one sent is over.
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT MIN(CASE WHEN o.priority = 0 THEN o.next_ms ELSE MAX(o.next_ms, COALESCE((SELECT MAX(s.done_ms)
                     FROM outbox s WHERE s.destination = o.destination AND s.priority = 1 AND s.state = 'sent'
                       AND s.last_error IS NULL), 0) + ?2) END)
                 FROM outbox o WHERE o.destination = ?1 AND o.state = 'pending'
                   AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.destination = o.destination
                     AND e.group_key = o.group_key AND e.state IN ('pending', 'sending') AND e.id < o.id
                     AND (o.priority = 1 OR e.priority = 0 OR e.state = 'sending'))
                   AND (o.priority = 0 OR (
                     NOT EXISTS (SELECT 1 FROM work WHERE state IN ('pending', 'running'))
                     AND NOT EXISTS (SELECT 1 FROM outbox s WHERE s.destination = o.destination AND s.priority = 1
                       AND s.state = 'sending')))",
            )?
            .query_row(params![destination, window_ms], |r| r.get(0))?)
    }

    /// See [`crate::service::store::Store::delivered`].
    pub fn delivered(
        &self,
        id: i64,
        destination: &str,
        group_key: &str,
        state: Option<&serde_json::Value>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.prepare_cached(
            "UPDATE outbox SET state = 'sent', unsure = 0, last_error = NULL, done_ms = ?2 WHERE id = ?1",
        )?
        .execute(params![id, now_ms])?;
        if let Some(state) = state {
            tx.prepare_cached(
                "INSERT INTO group_state (destination, group_key, state, updated_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(destination, group_key) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms",
            )?
            .execute(params![destination, group_key, serde_json::to_string(state)?, now_ms])?;
        }
        tx.commit()?;
        Ok(())
    }

    /// See [`crate::service::store::Store::retry_delivery`].
    pub fn retry_delivery(&self, id: i64, next_ms: i64, error: &str, unsure: bool) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached(
                "UPDATE outbox SET state = 'pending', next_ms = ?2, last_error = ?3, unsure = ?4 WHERE id = ?1",
            )?
            .execute(params![id, next_ms, error, unsure])?;
        Ok(())
    }

    /// See [`crate::service::store::Store::fail_delivery`].
    pub fn fail_delivery(&self, id: i64, error: &str, now_ms: i64) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached("UPDATE outbox SET state = 'failed', last_error = ?2, done_ms = ?3 WHERE id = ?1")?
            .execute(params![id, error, now_ms])?;
        Ok(())
    }
}

/// Decodes an outbox row (without its group state); `Ok(Err(why))` when it cannot be.
pub(super) fn read_outbox(tx: &Connection, id: i64) -> Result<Result<OutboxRow, String>, StoreError> {
    let mut stmt =
        tx.prepare_cached("SELECT destination, notice, unsure, attempts, first_ms FROM outbox WHERE id = ?1")?;
    Ok(stmt.query_row(params![id], |r| {
        Ok((|| -> Result<OutboxRow, String> {
            let notice: String = r.get(1).map_err(|e| format!("notice: {e}"))?;
            Ok(OutboxRow {
                id,
                destination: r.get(0).map_err(|e| e.to_string())?,
                notice: serde_json::from_str::<Notice>(&notice).map_err(|e| format!("notice: {e}"))?,
                unsure: r.get(2).map_err(|e| e.to_string())?,
                attempts: r.get(3).map_err(|e| e.to_string())?,
                first_ms: r.get(4).map_err(|e| e.to_string())?,
                group_state: None,
                token: 0,
            })
        })())
    })?)
}

/// Folds the destination's other pending "could not diagnose" notices, of any alert
/// group, into a claimed one ([`super::fold_could_not_diagnose`]): the claimed row carries
/// them from now on (its notice is rewritten), and they are done.
pub(super) fn fold_siblings(tx: &Connection, row: &mut OutboxRow, now_ms: i64) -> Result<(), StoreError> {
    if row.notice.kind != NoticeKind::CouldNotDiagnose {
        return Ok(());
    }
    let mut others = Vec::new();
    let mut ids = Vec::new();
    {
        let mut stmt = tx.prepare_cached(
            "SELECT id, notice FROM outbox WHERE destination = ?1 AND state = 'pending'
               AND priority = 1 AND id <> ?2 ORDER BY id",
        )?;
        let rows = stmt.query_map(params![row.destination, row.id], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, rusqlite::types::Value>(1)?))
        })?;
        for r in rows {
            let (id, notice) = r?;
            // An undecodable row is left for the claim that moves it aside.
            if let rusqlite::types::Value::Text(t) = notice
                && let Ok(n) = serde_json::from_str::<Notice>(&t)
            {
                others.push(n);
                ids.push(id);
            }
        }
    }
    if ids.is_empty() {
        return Ok(());
    }
    crate::service::store::fold_could_not_diagnose(&mut row.notice, &others);
    tx.prepare_cached("UPDATE outbox SET notice = ?2 WHERE id = ?1")?
        .execute(params![row.id, serde_json::to_string(&row.notice)?])?;
    let why = format!("folded into notice {}", row.id);
    for id in &ids {
        tx.prepare_cached("UPDATE outbox SET state = 'sent', last_error = ?2, done_ms = ?3 WHERE id = ?1")?
            .execute(params![id, why, now_ms])?;
    }
    tracing::info!(destination = %row.destination, group = ?row.notice.group_key, folded = ids.len(),
        "could-not-diagnose notices folded into one");
    Ok(())
}

impl SqliteStore {
    /// See [`crate::service::store::Store::thread_state`]. An undecodable state reads as
    /// none here (the claim of that thread's next notice moves it aside).
    pub fn thread_state(&self, destination: &str, thread: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let text: Option<Option<String>> = self
            .conn()
            .prepare_cached("SELECT state FROM group_state WHERE destination = ?1 AND group_key = ?2")?
            .query_row(params![destination, thread], |r| r.get::<_, Option<String>>(0))
            .optional()?;
        Ok(text.flatten().and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// See [`crate::service::store::Store::verdict_notice`].
    pub fn verdict_notice(&self, destination: &str, verdict_id: i64) -> Result<Option<Notice>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT notice FROM outbox WHERE destination = ?1 AND notice LIKE ?2 ORDER BY id LIMIT ?3",
        )?;
        let rows = stmt
            .query_map(
                params![
                    destination,
                    crate::service::store::verdict_pattern(verdict_id),
                    crate::service::store::VERDICT_NOTICES_READ
                ],
                |r| r.get::<_, String>(0),
            )?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(crate::service::store::first_verdict_notice(&rows, verdict_id))
    }
}

/// The destination's state for a group; an undecodable one is moved aside (the group
/// starts afresh: a new Slack message instead of a reply).
pub(super) fn group_state(
    tx: &Connection,
    destination: &str,
    group_key: &str,
    dead: &mut Vec<DeadLetter>,
    now_ms: i64,
) -> Result<Option<serde_json::Value>, StoreError> {
    let raw: Option<rusqlite::types::Value> = tx
        .prepare_cached("SELECT state FROM group_state WHERE destination = ?1 AND group_key = ?2")?
        .query_row(params![destination, group_key], |r| r.get(0))
        .optional()?;
    let why = match raw {
        None | Some(rusqlite::types::Value::Null) => return Ok(None),
        Some(rusqlite::types::Value::Text(t)) => match serde_json::from_str(&t) {
            Ok(v) => return Ok(Some(v)),
            Err(e) => format!("state: {e}"),
        },
        Some(other) => format!("state: a {:?} value where JSON text belongs", other.data_type()),
    };
    let payload = tx.query_row(
        "SELECT destination, group_key, verdict_key, state FROM group_state WHERE destination = ?1 AND group_key = ?2",
        params![destination, group_key],
        |r| row_as_json(r, &["destination", "group_key", "verdict_key", "state"]),
    )?;
    dead.push(insert_dead_letter(tx, "group_state", 0, Some(destination), &why, &payload, now_ms)?);
    tx.execute(
        "UPDATE group_state SET state = NULL WHERE destination = ?1 AND group_key = ?2",
        params![destination, group_key],
    )?;
    Ok(None)
}
