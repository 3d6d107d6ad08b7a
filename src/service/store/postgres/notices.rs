//! The outbox on PostgreSQL: claims per (destination, group) under fenced leases,
//! folding of "could not diagnose" notices, delivery outcomes, the groups' state.

use super::*;

impl PgStore {
    /// See [`crate::service::store::Store::claim_delivery`]. Sends whose lease expired are pending again
    /// and unsure first.
    pub async fn claim_delivery(
        &self,
        destination: &str,
        now_ms: i64,
        window_ms: i64,
    ) -> Result<Option<OutboxRow>, StoreError> {
        // "Could not diagnose" waits (up to $3 ms) while any diagnosis is queued or running
        // (its group's, or a burst's draining): their failures fold in.
        // It also waits while one is being sent to the destination or was sent within the
        // last $4 ms (folded rows are not sent: their last_error says so); a verdict or a
        // resolution does not wait behind a waiting one of its group.
        const CANDIDATE: &str = "SELECT o.id FROM outbox o
             WHERE o.destination = $1 AND o.state = 'pending' AND o.next_ms <= $2
               AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.destination = o.destination
                 AND e.group_key = o.group_key AND e.state IN ('pending', 'sending') AND e.id < o.id
                 AND (o.priority = 1 OR e.priority = 0 OR e.state = 'sending'))
               AND (o.priority = 0 OR ((o.first_ms <= $2 - $3
                   OR NOT EXISTS (SELECT 1 FROM work WHERE state IN ('pending', 'running')))
                 AND NOT EXISTS (SELECT 1 FROM outbox s WHERE s.destination = o.destination AND s.priority = 1
                   AND (s.state = 'sending' OR (s.state = 'sent' AND s.last_error IS NULL AND s.done_ms > $2 - $4)))))
             ORDER BY o.priority, o.rank, o.id LIMIT 1 FOR UPDATE SKIP LOCKED";
        let mut client = self.client().await?;
        let now_ms = self.db(now_ms);
        let tx = client.transaction().await?;
        let reap = "UPDATE outbox SET state = 'pending', unsure = TRUE, owner = NULL,
               next_ms = GREATEST(next_ms, $2 + $3)
             WHERE destination = $1 AND state = 'sending' AND lease_until_ms < $2";
        let stmt = tx.prepare_cached(reap).await?;
        let reaped = tx.execute(&stmt, &[&destination, &now_ms, &REAPED_SEND_GRACE_MS]).await?;
        if reaped > 0 {
            tracing::warn!(
                destination,
                sends = reaped,
                "sends of a replica whose lease expired are checked or sent again"
            );
        }
        let mut dead = Vec::new();
        let row = loop {
            let candidate = tx.prepare_cached(CANDIDATE).await?;
            let Some(c) = tx.query_opt(&candidate, &[&destination, &now_ms, &FOLD_WAIT_MAX_MS, &window_ms]).await?
            else {
                break None;
            };
            let id: i64 = c.get(0);
            match read_outbox(&tx, id).await? {
                Ok(mut row) => {
                    let sql =
                        "UPDATE outbox SET state = 'sending', attempts = attempts + 1, owner = $2, lease_until_ms = $3,
                         lease_token = lease_token + 1 WHERE id = $1 RETURNING lease_token";
                    let (stmt, until) = (tx.prepare_cached(sql).await?, self.lease_until(now_ms));
                    row.token = tx.query_one(&stmt, &[&id, &self.inner.owner, &until]).await?.get(0);
                    row.attempts += 1;
                    fold_siblings(&tx, &mut row, now_ms).await?;
                    row.group_state = group_state(&tx, destination, row.notice.thread_key(), &mut dead, now_ms).await?;
                    break Some(row);
                }
                Err(why) if dead.len() < MAX_DEAD_PER_CLAIM => {
                    dead.push(dead_letter_outbox(&tx, id, destination, &why, now_ms).await?)
                }
                Err(_) => break None,
            }
        };
        tx.commit().await?;
        report_dead(&self.inner.metrics, dead);
        Ok(row.map(|row| OutboxRow { first_ms: self.local(row.first_ms), ..row }))
    }

    /// See [`crate::service::store::Store::next_delivery_ms`]; an expired lease counts as due.
    pub async fn next_delivery_ms(&self, destination: &str, window_ms: i64) -> Result<Option<i64>, StoreError> {
        let client = self.client().await?;
        // A "could not diagnose" is due once the window after the last one sent is over.
        let sql = "SELECT LEAST(
               (SELECT MIN(CASE WHEN o.priority = 0 THEN o.next_ms ELSE GREATEST(o.next_ms, COALESCE((SELECT
                    MAX(s.done_ms) FROM outbox s WHERE s.destination = o.destination AND s.priority = 1
                      AND s.state = 'sent' AND s.last_error IS NULL), 0) + $2) END)
                FROM outbox o WHERE o.destination = $1 AND o.state = 'pending'
                  AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.destination = o.destination
                    AND e.group_key = o.group_key AND e.state IN ('pending', 'sending') AND e.id < o.id
                    AND (o.priority = 1 OR e.priority = 0 OR e.state = 'sending'))
                  AND (o.priority = 0 OR (
                    NOT EXISTS (SELECT 1 FROM work WHERE state IN ('pending', 'running'))
                    AND NOT EXISTS (SELECT 1 FROM outbox s WHERE s.destination = o.destination AND s.priority = 1
                      AND s.state = 'sending')))),
               (SELECT MIN(lease_until_ms) FROM outbox WHERE destination = $1 AND state = 'sending'))";
        let due: Option<i64> =
            client.query_one(&client.prepare_cached(sql).await?, &[&destination, &window_ms]).await?.get(0);
        Ok(due.map(|t| self.local(t)))
    }

    /// See [`crate::service::store::Store::delivered`]: stored under the claim's token only. A send whose
    /// lease expired is still recorded while no replica has claimed it again (its token is
    /// the same): it is then not sent twice.
    pub async fn delivered(
        &self,
        row: &OutboxRow,
        state: Option<&serde_json::Value>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let (id, destination, group_key) = (row.id, row.destination.as_str(), row.notice.thread_key());
        let mut client = self.client().await?;
        let now_ms = self.db(now_ms);
        let tx = client.transaction().await?;
        let sql = "UPDATE outbox SET state = 'sent', unsure = FALSE, last_error = NULL, done_ms = $2, owner = NULL
             WHERE id = $1 AND lease_token = $4 AND ((state = 'sending' AND owner = $3) OR state = 'pending')";
        let stmt = tx.prepare_cached(sql).await?;
        let updated = tx.execute(&stmt, &[&id, &now_ms, &self.inner.owner, &row.token]).await?;
        if updated == 0 {
            tracing::warn!(
                destination,
                outbox = id,
                "another replica took this send over after the lease expired; this outcome is not stored (the send may arrive twice)"
            );
        }
        if let (Some(state), 1..) = (state, updated) {
            let sql = "INSERT INTO group_state (destination, group_key, state, updated_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (destination, group_key) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms";
            let state = serde_json::to_string(state)?;
            tx.execute(&tx.prepare_cached(sql).await?, &[&destination, &group_key, &state, &now_ms]).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// See [`crate::service::store::Store::retry_delivery`] (under the claim's token).
    pub async fn retry_delivery(
        &self,
        row: &OutboxRow,
        next_ms: i64,
        error: &str,
        unsure: bool,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        let next_ms = self.db(next_ms);
        let sql = "UPDATE outbox SET state = 'pending', next_ms = $2, last_error = $3, unsure = $4, owner = NULL
             WHERE id = $1 AND state = 'sending' AND owner = $5 AND lease_token = $6";
        let args: [&(dyn tokio_postgres::types::ToSql + Sync); 6] =
            [&row.id, &next_ms, &error, &unsure, &self.inner.owner, &row.token];
        client.execute(&client.prepare_cached(sql).await?, &args).await?;
        Ok(())
    }

    /// See [`crate::service::store::Store::fail_delivery`] (under the claim's token).
    pub async fn fail_delivery(&self, row: &OutboxRow, error: &str, now_ms: i64) -> Result<(), StoreError> {
        let client = self.client().await?;
        let now_ms = self.db(now_ms);
        let sql = "UPDATE outbox SET state = 'failed', last_error = $2, done_ms = $3, owner = NULL
             WHERE id = $1 AND state = 'sending' AND owner = $4 AND lease_token = $5";
        let args: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&row.id, &error, &now_ms, &self.inner.owner, &row.token];
        client.execute(&client.prepare_cached(sql).await?, &args).await?;
        Ok(())
    }

    /// See [`crate::service::store::Store::fence`]: whether this replica still holds the send under its
    /// token with its lease not expired, by the database's clock; if so the lease is
    /// renewed to at least `margin_ms` from now (the send's own timeout), so that it
    /// cannot expire while the send is on the wire unless renewals stop (a pause, the
    /// database unreachable) for that long.
    pub async fn fence(&self, row: &OutboxRow, now_ms: i64, margin_ms: i64) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let now_ms = self.db(now_ms);
        let until = now_ms + self.inner.lease_ms.max(margin_ms);
        let sql = "UPDATE outbox SET lease_until_ms = GREATEST(lease_until_ms, $4)
             WHERE id = $1 AND state = 'sending' AND owner = $2 AND lease_token = $3 AND lease_until_ms > $5";
        let args: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&row.id, &self.inner.owner, &row.token, &until, &now_ms];
        Ok(client.execute(&client.prepare_cached(sql).await?, &args).await? == 1)
    }

    /// See [`crate::service::store::Store::reserve_pace`]: one statement, so that replicas
    /// reserving at once get one slot each (the row lock orders them), by the database's
    /// clock (`clock_timestamp()`: replicas' clocks may differ, the database's is one).
    pub async fn reserve_pace(&self, scope: &str, interval_ms: i64) -> Result<i64, StoreError> {
        let client = self.client().await?;
        let sql = "WITH now AS (SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT AS ms)
             INSERT INTO pace_slots AS p (scope, next_ms) SELECT $1, now.ms + $2 FROM now
             ON CONFLICT (scope) DO UPDATE SET next_ms = GREATEST(p.next_ms, EXCLUDED.next_ms - $2) + $2
             RETURNING p.next_ms - $2 - (SELECT ms FROM now)";
        let row = client.query_one(&client.prepare_cached(sql).await?, &[&scope, &interval_ms]).await?;
        Ok(row.get::<_, i64>(0).max(0))
    }
}

/// Folds the destination's other pending "could not diagnose" notices, of any alert
/// group, into a claimed one ([`super::fold_could_not_diagnose`]): the claimed row carries
/// them from now on (its notice is rewritten), and they are done.
pub(super) async fn fold_siblings(tx: &Transaction<'_>, row: &mut OutboxRow, now_ms: i64) -> Result<(), StoreError> {
    if row.notice.kind != NoticeKind::CouldNotDiagnose {
        return Ok(());
    }
    let sql = "SELECT id, notice FROM outbox WHERE destination = $1 AND state = 'pending'
                 AND priority = 1 AND id <> $2 ORDER BY id FOR UPDATE";
    let rows = tx.query(&tx.prepare_cached(sql).await?, &[&row.destination, &row.id]).await?;
    let mut others = Vec::new();
    let mut ids: Vec<i64> = Vec::new();
    for r in rows {
        // An undecodable row is left for the claim that moves it aside.
        if let Ok(n) = serde_json::from_str::<Notice>(r.get(1)) {
            others.push(n);
            ids.push(r.get(0));
        }
    }
    if ids.is_empty() {
        return Ok(());
    }
    crate::service::store::fold_could_not_diagnose(&mut row.notice, &others);
    let sql = "UPDATE outbox SET notice = $2 WHERE id = $1";
    tx.execute(&tx.prepare_cached(sql).await?, &[&row.id, &serde_json::to_string(&row.notice)?]).await?;
    let why = format!("folded into notice {}", row.id);
    let sql = "UPDATE outbox SET state = 'sent', last_error = $2, done_ms = $3 WHERE id = ANY($1)";
    tx.execute(&tx.prepare_cached(sql).await?, &[&ids, &why, &now_ms]).await?;
    tracing::info!(destination = %row.destination, group = ?row.notice.group_key, folded = ids.len(),
        "could-not-diagnose notices folded into one");
    Ok(())
}

/// Decodes an outbox row (without its group state); `Ok(Err(why))` when it cannot be.
pub(super) async fn read_outbox(tx: &Transaction<'_>, id: i64) -> Result<Result<OutboxRow, String>, StoreError> {
    let sql = "SELECT destination, notice, unsure, attempts, first_ms FROM outbox WHERE id = $1";
    let r = tx.query_one(&tx.prepare_cached(sql).await?, &[&id]).await?;
    Ok(serde_json::from_str::<Notice>(r.get(1)).map_err(|e| format!("notice: {e}")).map(|notice| OutboxRow {
        id,
        destination: r.get(0),
        notice,
        unsure: r.get(2),
        attempts: r.get(3),
        first_ms: r.get(4),
        group_state: None,
        token: 0,
    }))
}

/// The destination's state for a group; an undecodable one is moved aside (the group
/// starts afresh: a new Slack message instead of a reply).
pub(super) async fn group_state(
    tx: &Transaction<'_>,
    destination: &str,
    group_key: &str,
    dead: &mut Vec<DeadLetter>,
    now_ms: i64,
) -> Result<Option<serde_json::Value>, StoreError> {
    let sql = "SELECT state, row_to_json(g)::text FROM group_state g WHERE destination = $1 AND group_key = $2";
    let Some(row) = tx.query_opt(&tx.prepare_cached(sql).await?, &[&destination, &group_key]).await? else {
        return Ok(None);
    };
    let Some(state) = row.get::<_, Option<String>>(0) else { return Ok(None) };
    let why = match serde_json::from_str(&state) {
        Ok(v) => return Ok(Some(v)),
        Err(e) => format!("state: {e}"),
    };
    let payload = serde_json::from_str(row.get(1)).unwrap_or(serde_json::Value::Null);
    dead.push(insert_dead_letter(tx, "group_state", 0, Some(destination), &why, &payload, now_ms).await?);
    let sql = "UPDATE group_state SET state = NULL WHERE destination = $1 AND group_key = $2";
    tx.execute(&tx.prepare_cached(sql).await?, &[&destination, &group_key]).await?;
    Ok(None)
}

impl PgStore {
    /// See [`crate::service::store::Store::verdict_notice`].
    pub async fn verdict_notice(&self, destination: &str, verdict_id: i64) -> Result<Option<Notice>, StoreError> {
        let client = self.client().await?;
        let sql = "SELECT notice FROM outbox WHERE destination = $1 AND notice LIKE $2 ORDER BY id LIMIT $3";
        let pattern = crate::service::store::verdict_pattern(verdict_id);
        let rows = client
            .query(
                &client.prepare_cached(sql).await?,
                &[&destination, &pattern, &crate::service::store::VERDICT_NOTICES_READ],
            )
            .await?;
        let texts: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        Ok(crate::service::store::first_verdict_notice(&texts, verdict_id))
    }
}
