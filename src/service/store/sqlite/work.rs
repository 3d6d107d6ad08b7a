//! Diagnoses on SQLite: claims (in [`crate::service::store::fairness`]'s order), retries,
//! completion with its notices, follow-ups of weak verdicts, recovery's requeue. Every
//! write of a row's groups or attempts writes its `claim_class` ([`claim_class`]).

use super::*;

impl SqliteStore {
    /// See [`crate::service::store::Store::claim_work`].
    pub fn claim_work(&self, now_ms: i64, deep_over: i64) -> Result<Option<WorkItem>, StoreError> {
        const ANY_DUE: &str = "SELECT w.id FROM work w WHERE w.state = 'pending' AND w.due_ms <= ?1
               AND NOT EXISTS (SELECT 1 FROM work r WHERE r.job_key = w.job_key AND r.state = 'running')
             LIMIT 1";
        let mut conn = self.conn();
        // Look before taking the write lock: most wakes find nothing due, and the lock
        // would stall the intake writer.
        if conn.prepare_cached(ANY_DUE)?.query_row(params![now_ms], |r| r.get::<_, i64>(0)).optional()?.is_none() {
            return Ok(None);
        }
        let starved_before = now_ms.saturating_sub(self.fairness.unknown_max_wait_ms);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let newest = deep_over < i64::MAX && {
            let due: i64 = tx
                .prepare_cached(
                    "SELECT COUNT(*) FROM (SELECT 1 FROM work WHERE state = 'pending' AND due_ms <= ?1 LIMIT ?2)",
                )?
                .query_row(params![now_ms, deep_over.saturating_add(1)], |r| r.get(0))?;
            is_deep(due, deep_over) && newest_first(self.deep_claims.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
        };
        let mut dead = Vec::new();
        let item = loop {
            let candidate: Option<(i64, String)> = tx
                .prepare_cached(CLAIM_ORDER)?
                .query_row(params![now_ms, starved_before, newest], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let Some((id, sender)) = candidate else { break None };
            match read_work(&tx, id)? {
                Ok(item) => {
                    tx.prepare_cached("UPDATE work SET state = 'running' WHERE id = ?1")?.execute(params![id])?;
                    tx.prepare_cached(TAKE_TURN)?.execute(params![sender])?;
                    break Some(item);
                }
                Err(why) if dead.len() < MAX_DEAD_PER_CLAIM => dead.push(dead_letter_work(&tx, id, &why, now_ms)?),
                Err(_) => break None,
            }
        };
        tx.commit()?;
        drop(conn);
        self.report_dead(dead);
        Ok(item)
    }

    /// See [`crate::service::store::Store::next_work_ms`].
    pub fn next_work_ms(&self) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT MIN(w.due_ms) FROM work w WHERE w.state = 'pending'
               AND NOT EXISTS (SELECT 1 FROM work r WHERE r.job_key = w.job_key AND r.state = 'running')",
            )?
            .query_row([], |r| r.get(0))?)
    }

    /// See [`crate::service::store::Store::retry_work`].
    pub fn retry_work(&self, item: &WorkItem, due_ms: i64, first_failure_ms: i64) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut dead = Vec::new();
        let now_ms = jiff::Timestamp::now().as_millisecond();
        requeue(&tx, item, Some((due_ms, first_failure_ms)), &mut dead, now_ms)?;
        tx.commit()?;
        drop(conn);
        self.report_dead(dead);
        Ok(())
    }

    /// See [`crate::service::store::Store::complete_rediagnosing`].
    pub fn complete(
        &self,
        item: &WorkItem,
        completion: Completion,
        rediagnose_at_ms: Option<i64>,
        recent_since_ms: Option<i64>,
    ) -> Result<Completed, StoreError> {
        let now_ms = completion.now_ms;
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let verdict_id = match &completion.verdict {
            Some((job, json)) => {
                tx.prepare_cached("INSERT INTO verdicts (job, created_ms, json) VALUES (?1, ?2, ?3)")?
                    .execute(params![job, now_ms, json])?;
                let id = tx.last_insert_rowid();
                // The job is known from now on: its next diagnoses go first.
                tx.prepare_cached(
                    "INSERT INTO known_jobs (job_key, verdict_ms) VALUES (?1, ?2)
                     ON CONFLICT(job_key) DO UPDATE SET verdict_ms = MAX(known_jobs.verdict_ms, excluded.verdict_ms)",
                )?
                .execute(params![item.job_key, now_ms])?;
                tx.prepare_cached("UPDATE work SET known = 1 WHERE job_key = ?1 AND known = 0")?
                    .execute(params![item.job_key])?;
                Some(id)
            }
            None => None,
        };
        let episode = item.episode_row();
        let mut last = last_verdicts(&tx, item.groups.keys().chain(std::iter::once(&episode)))?;
        if let Some(since) = recent_since_ms {
            last.1 = recent_members(&tx, since)?;
        }
        let plan = (completion.plan)(verdict_id, &last);
        if let (Some(id), Some(member)) = (verdict_id, &plan.member) {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO incident_members (verdict_id, created_ms, member) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![id, now_ms, member])?;
        }
        let mut added = 0;
        for n in plan.notices {
            added += tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO outbox (destination, group_key, idem_key, priority, rank, notice, state, next_ms, first_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?7)",
                )?
                .execute(params![
                    n.destination,
                    n.notice.thread_key(),
                    n.notice.idempotency_key,
                    priority(n.notice.kind),
                    rank(&n.notice),
                    serde_json::to_string(&n.notice)?,
                    now_ms
                ])?;
            if let Some(key) = n.remember_verdict {
                tx.prepare_cached(
                    "INSERT INTO group_state (destination, group_key, verdict_key, updated_ms) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT(destination, group_key) DO UPDATE SET verdict_key = excluded.verdict_key, updated_ms = excluded.updated_ms",
                )?
                .execute(params![n.destination, n.notice.thread_key(), key, now_ms])?;
            }
        }
        for r in plan.remember {
            tx.prepare_cached(
                "INSERT INTO group_state (destination, group_key, verdict_key, updated_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(destination, group_key) DO UPDATE SET verdict_key = excluded.verdict_key, updated_ms = excluded.updated_ms",
            )?
            .execute(params![r.destination, r.row, r.value, now_ms])?;
        }
        for group in item.groups.keys().chain(std::iter::once(&episode)) {
            tx.prepare_cached("UPDATE group_state SET updated_ms = ?2 WHERE group_key = ?1")?
                .execute(params![group, now_ms])?;
        }
        match rediagnose_at_ms {
            Some(due_ms) => rediagnose(&tx, item, due_ms, now_ms)?,
            None => {
                tx.prepare_cached("DELETE FROM work WHERE id = ?1")?.execute(params![item.id])?;
            }
        }
        tx.commit()?;
        Ok(Completed { verdict_id, notices: added })
    }
}

/// The next diagnosis to claim (`?1` now, `?2` before when a due unknown job counts as
/// starved, `?3` whether first diagnoses go newest first): of a job with none running,
/// known jobs (and starved unknown ones) first, then by claim class, then the sender whose
/// turn came least recently (round robin), then the earliest due (the newest, for first
/// diagnoses, when `?3`).
pub(super) const CLAIM_ORDER: &str = "SELECT w.id, w.sender FROM work w LEFT JOIN sender_turns t ON t.sender = w.sender
     WHERE w.state = 'pending' AND w.due_ms <= ?1
       AND NOT EXISTS (SELECT 1 FROM work r WHERE r.job_key = w.job_key AND r.state = 'running')
     ORDER BY (w.known = 1 OR w.due_ms <= ?2) DESC, w.claim_class, COALESCE(t.turn, 0),
       CASE WHEN ?3 AND w.claim_class = 0 THEN -w.due_ms ELSE w.due_ms END,
       CASE WHEN ?3 AND w.claim_class = 0 THEN -w.id ELSE w.id END
     LIMIT 1";

/// A sender's turn is taken: it goes to the back of the round robin.
pub(super) const TAKE_TURN: &str = "INSERT INTO sender_turns (sender, turn)
     VALUES (?1, (SELECT COALESCE(MAX(turn), 0) + 1 FROM sender_turns))
     ON CONFLICT(sender) DO UPDATE SET turn = excluded.turn";

/// Decodes a work row; `Ok(Err(why))` when the row is there but cannot be decoded.
pub(super) fn read_work(tx: &Connection, id: i64) -> Result<Result<WorkItem, String>, StoreError> {
    let mut stmt = tx.prepare_cached(
        "SELECT job_key, job, labels, groups, created_ms, attempts, first_failure_ms, known FROM work WHERE id = ?1",
    )?;
    Ok(stmt.query_row(params![id], |r| {
        Ok((|| -> Result<WorkItem, String> {
            let text = |i: usize| r.get::<_, String>(i).map_err(|e| e.to_string());
            Ok(WorkItem {
                id,
                job_key: text(0)?,
                job: text(1)?,
                labels: serde_json::from_str(&text(2)?).map_err(|e| format!("labels: {e}"))?,
                groups: serde_json::from_str(&text(3)?).map_err(|e| format!("groups: {e}"))?,
                created_ms: r.get(4).map_err(|e| e.to_string())?,
                attempts: r.get(5).map_err(|e| e.to_string())?,
                first_failure_ms: r.get(6).map_err(|e| e.to_string())?,
                known: r.get(7).map_err(|e| e.to_string())?,
            })
        })())
    })?)
}

/// The last verdict key of every (destination, group) for these groups.
pub(super) fn last_verdicts<'a>(
    tx: &Connection,
    groups: impl Iterator<Item = &'a String>,
) -> Result<LastVerdicts, StoreError> {
    let mut out = BTreeMap::new();
    let mut stmt = tx.prepare_cached(
        "SELECT destination, verdict_key FROM group_state WHERE group_key = ?1 AND verdict_key IS NOT NULL",
    )?;
    for g in groups {
        let rows = stmt.query_map(params![g], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        // A key that is not text is as good as none: the verdict is posted again.
        for (destination, key) in rows.flatten() {
            out.insert((destination, g.clone()), key);
        }
    }
    Ok(LastVerdicts(out, Vec::new()))
}

/// The incident rows of the verdicts stored since `since_ms`, oldest first.
pub(super) fn recent_members(tx: &Connection, since_ms: i64) -> Result<Vec<RecentMember>, StoreError> {
    let mut stmt = tx.prepare_cached(
        "SELECT verdict_id, created_ms, member FROM incident_members WHERE created_ms >= ?1 ORDER BY created_ms, verdict_id",
    )?;
    let rows = stmt.query_map(params![since_ms], |r| {
        Ok(RecentMember { verdict_id: r.get(0)?, created_ms: r.get(1)?, member: r.get(2)? })
    })?;
    // A row that is not what was written is as good as none: it counts in no incident.
    Ok(rows.flatten().collect())
}

/// The follow-up of a weak verdict (see [`crate::service::store::Store::complete_rediagnosing`]): the
/// finished row is pending again at `due_ms` with its firing groups marked, or those groups
/// join the job's pending diagnosis.
pub(super) fn rediagnose(tx: &Connection, item: &WorkItem, due_ms: i64, now_ms: i64) -> Result<(), StoreError> {
    let groups: BTreeMap<String, GroupInfo> = item
        .groups
        .iter()
        .filter(|(_, g)| g.firing)
        .map(|(k, g)| (k.clone(), GroupInfo { rediagnosis: true, ..g.clone() }))
        .collect();
    let pending: Option<i64> = tx
        .prepare_cached("SELECT id FROM work WHERE state = 'pending' AND job_key = ?1")?
        .query_row(params![item.job_key], |r| r.get(0))
        .optional()?;
    match pending.map(|id| read_work(tx, id)).transpose()? {
        _ if groups.is_empty() => {}
        Some(Ok(newer)) => {
            let mut merged = groups;
            merged.extend(newer.groups);
            tx.prepare_cached("UPDATE work SET groups = ?2, claim_class = ?3 WHERE id = ?1")?.execute(params![
                newer.id,
                serde_json::to_string(&merged)?,
                claim_class(&merged, newer.attempts)
            ])?;
        }
        // The pending row goes to the dead letters at its claim; no follow-up beside it.
        Some(Err(_)) => {}
        None => {
            tx.prepare_cached(
                "UPDATE work SET state = 'pending', groups = ?2, due_ms = ?3, created_ms = ?4, attempts = 0,
                   first_failure_ms = NULL, claim_class = ?5 WHERE id = ?1",
            )?
            .execute(params![
                item.id,
                serde_json::to_string(&groups)?,
                due_ms,
                now_ms,
                claim_class(&groups, 0)
            ])?;
            return Ok(());
        }
    }
    tx.prepare_cached("DELETE FROM work WHERE id = ?1")?.execute(params![item.id])?;
    Ok(())
}

/// Puts running work back to pending (due at `retry.0`, first failure `retry.1`, one more
/// attempt), or merges it into the job's newer pending row.
pub(super) fn requeue(
    tx: &Connection,
    item: &WorkItem,
    retry: Option<(i64, i64)>,
    dead: &mut Vec<DeadLetter>,
    now_ms: i64,
) -> Result<(), StoreError> {
    let newer: Option<i64> = tx
        .prepare_cached("SELECT id FROM work WHERE state = 'pending' AND job_key = ?1")?
        .query_row(params![item.job_key], |r| r.get(0))
        .optional()?;
    let attempts = item.attempts + i64::from(retry.is_some());
    let first_failure = retry.map(|r| r.1).or(item.first_failure_ms);
    let newer = match newer.map(|id| read_work(tx, id)).transpose()? {
        Some(Ok(newer)) => Some(newer),
        Some(Err(why)) => {
            let id = newer.expect("read from an id");
            dead.push(dead_letter_work(tx, id, &why, now_ms)?);
            None
        }
        None => None,
    };
    match newer {
        Some(newer) => {
            let mut merged = item.groups.clone();
            merged.extend(newer.groups);
            let due = retry.map_or(i64::MAX, |r| r.0);
            tx.prepare_cached(
                "UPDATE work SET groups = ?2, attempts = ?3, first_failure_ms = ?4, due_ms = MIN(due_ms, ?5),
                   claim_class = ?6 WHERE id = ?1",
            )?
            .execute(params![
                newer.id,
                serde_json::to_string(&merged)?,
                attempts,
                first_failure,
                due,
                claim_class(&merged, attempts)
            ])?;
            tx.prepare_cached("DELETE FROM work WHERE id = ?1")?.execute(params![item.id])?;
        }
        None => {
            let sql = match retry {
                Some(_) => {
                    "UPDATE work SET state = 'pending', due_ms = ?2, attempts = ?3, first_failure_ms = ?4, claim_class = ?5
                     WHERE id = ?1"
                }
                None => {
                    "UPDATE work SET state = 'pending', due_ms = MIN(due_ms, ?2), attempts = ?3, first_failure_ms = ?4,
                       claim_class = ?5 WHERE id = ?1"
                }
            };
            let due = retry.map_or(now_ms, |r| r.0);
            let class = claim_class(&item.groups, attempts);
            tx.prepare_cached(sql)?.execute(params![item.id, due, attempts, first_failure, class])?;
        }
    }
    Ok(())
}
