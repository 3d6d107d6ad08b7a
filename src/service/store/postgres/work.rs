//! Diagnoses on PostgreSQL: claims under leases (`FOR UPDATE SKIP LOCKED`, in
//! [`crate::service::store::fairness`]'s order), reaping of expired ones, retries,
//! completion with its notices, follow-ups of weak verdicts. Every write of a row's groups
//! or attempts writes its `claim_class` ([`claim_class`]).

use super::*;

impl PgStore {
    /// See [`crate::service::store::Store::claim_work`]. Running work whose lease expired is put back first.
    pub async fn claim_work(&self, now_ms: i64, deep_over: i64) -> Result<Option<WorkItem>, StoreError> {
        // Known jobs (and unknown ones due before $2, starved) first, then by claim class,
        // then the sender whose turn came least recently (round robin), then the earliest
        // due (the newest, for first diagnoses, when $3).
        const CANDIDATE: &str = "SELECT w.id, w.sender FROM work w LEFT JOIN sender_turns t ON t.sender = w.sender
             WHERE w.state = 'pending' AND w.due_ms <= $1
               AND NOT EXISTS (SELECT 1 FROM work r WHERE r.job_key = w.job_key AND r.state = 'running')
             ORDER BY (w.known OR w.due_ms <= $2) DESC, w.claim_class, COALESCE(t.turn, 0),
               CASE WHEN $3 AND w.claim_class = 0 THEN -w.due_ms ELSE w.due_ms END,
               CASE WHEN $3 AND w.claim_class = 0 THEN -w.id ELSE w.id END
             LIMIT 1 FOR UPDATE OF w SKIP LOCKED";
        const DUE: &str =
            "SELECT COUNT(*) FROM (SELECT 1 FROM work WHERE state = 'pending' AND due_ms <= $1 LIMIT $2) d";
        const TAKE_TURN: &str = "INSERT INTO sender_turns (sender, turn) VALUES ($1, nextval('sender_turn'))
             ON CONFLICT (sender) DO UPDATE SET turn = excluded.turn";
        let mut client = self.client().await?;
        let now_ms = self.db(now_ms);
        // Due times are the database's: so is how long an unknown job has waited.
        let starved_before = now_ms.saturating_sub(self.inner.fairness.unknown_max_wait_ms);
        let tx = client.transaction().await?;
        let mut dead = Vec::new();
        reap_work(&tx, now_ms, &mut dead).await?;
        // The alternation is over every replica's claims: one sequence.
        let newest = deep_over < i64::MAX && {
            let due: i64 =
                tx.query_one(&tx.prepare_cached(DUE).await?, &[&now_ms, &deep_over.saturating_add(1)]).await?.get(0);
            is_deep(due, deep_over) && {
                // From 0, as on SQLite: the first claim under a deep queue takes the oldest.
                let sql = "SELECT nextval('claim_turn') - 1";
                let turn: i64 = tx.query_one(&tx.prepare_cached(sql).await?, &[]).await?.get(0);
                newest_first(turn)
            }
        };
        let item = loop {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&now_ms, &starved_before, &newest];
            let Some(row) = tx.query_opt(&tx.prepare_cached(CANDIDATE).await?, &params).await? else {
                break None;
            };
            let (id, sender): (i64, String) = (row.get(0), row.get(1));
            match read_work(&tx, id).await? {
                Ok(item) => {
                    let sql = "UPDATE work SET state = 'running', owner = $2, lease_until_ms = $3 WHERE id = $1";
                    let (stmt, until) = (tx.prepare_cached(sql).await?, self.lease_until(now_ms));
                    match tx.execute(&stmt, &[&id, &self.inner.owner, &until]).await {
                        Ok(_) => {
                            tx.execute(&tx.prepare_cached(TAKE_TURN).await?, &[&sender]).await?;
                            break Some(item);
                        }
                        // Another replica runs the job already (a race the index settles).
                        Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => return Ok(None),
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(why) if dead.len() < MAX_DEAD_PER_CLAIM => {
                    dead.push(dead_letter_work(&tx, id, &why, now_ms).await?)
                }
                Err(_) => break None,
            }
        };
        tx.commit().await?;
        report_dead(&self.inner.metrics, dead);
        // Times the service compares with its own clock.
        Ok(item.map(|item| WorkItem {
            created_ms: self.local(item.created_ms),
            first_failure_ms: item.first_failure_ms.map(|t| self.local(t)),
            ..item
        }))
    }

    /// See [`crate::service::store::Store::next_work_ms`]; an expired lease counts as due.
    pub async fn next_work_ms(&self) -> Result<Option<i64>, StoreError> {
        let client = self.client().await?;
        let sql = "SELECT LEAST(
               (SELECT MIN(w.due_ms) FROM work w WHERE w.state = 'pending'
                  AND NOT EXISTS (SELECT 1 FROM work r WHERE r.job_key = w.job_key AND r.state = 'running')),
               (SELECT MIN(lease_until_ms) FROM work WHERE state = 'running'))";
        let due: Option<i64> = client.query_one(&client.prepare_cached(sql).await?, &[]).await?.get(0);
        Ok(due.map(|t| self.local(t)))
    }

    /// Whether this replica still holds running work `id` (locks the row).
    pub(super) async fn holds_work(&self, tx: &Transaction<'_>, id: i64) -> Result<bool, StoreError> {
        let sql = "SELECT 1 FROM work WHERE id = $1 AND state = 'running' AND owner = $2 FOR UPDATE";
        let held = tx.query_opt(&tx.prepare_cached(sql).await?, &[&id, &self.inner.owner]).await?.is_some();
        if !held {
            tracing::warn!(
                work = id,
                "the lease on a diagnosis expired and another replica took it; this outcome is dropped"
            );
        }
        Ok(held)
    }

    /// See [`crate::service::store::Store::retry_work`].
    pub async fn retry_work(&self, item: &WorkItem, due_ms: i64, first_failure_ms: i64) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if !self.holds_work(&tx, item.id).await? {
            return Ok(());
        }
        let mut dead = Vec::new();
        let now_ms = self.inner.clock.db_now_ms();
        let retry = (self.db(due_ms), self.db(first_failure_ms));
        requeue(&tx, item, Some(retry), &mut dead, now_ms).await?;
        tx.commit().await?;
        report_dead(&self.inner.metrics, dead);
        Ok(())
    }

    /// See [`crate::service::store::Store::complete_rediagnosing`]. The item's groups are locked first
    /// (sorted, so two completions never deadlock): the last verdicts read are the last ones.
    pub async fn complete(
        &self,
        item: &WorkItem,
        completion: Completion,
        rediagnose_at_ms: Option<i64>,
        recent_since_ms: Option<i64>,
    ) -> Result<Completed, StoreError> {
        let mut client = self.client().await?;
        let now_ms = self.db(completion.now_ms);
        let rediagnose_at_ms = rediagnose_at_ms.map(|t| self.db(t));
        let tx = client.transaction().await?;
        if !self.holds_work(&tx, item.id).await? {
            return Ok(Completed { verdict_id: None, notices: 0 });
        }
        let lock = tx.prepare_cached("SELECT pg_advisory_xact_lock($1, hashtext($2))").await?;
        // The job's episode row with its groups (sorted: the episode row starts with a unit
        // separator, before every groupKey), so that two completions of one job's groups on
        // two replicas read and write what the destinations were told one after the other.
        let episode = item.episode_row();
        let mut rows: Vec<&String> = item.groups.keys().chain(std::iter::once(&episode)).collect();
        rows.sort();
        for row in &rows {
            tx.execute(&lock, &[&GROUP_LOCK_CLASS, row]).await?;
        }
        let verdict_id: Option<i64> = match &completion.verdict {
            Some((job, json)) => {
                let sql = "INSERT INTO verdicts (job, created_ms, json) VALUES ($1, $2, $3) RETURNING id";
                let id = tx.query_one(&tx.prepare_cached(sql).await?, &[job, &now_ms, json]).await?.get(0);
                // The job is known from now on: its next diagnoses go first.
                let known = "INSERT INTO known_jobs (job_key, verdict_ms) VALUES ($1, $2)
                     ON CONFLICT (job_key) DO UPDATE SET verdict_ms = GREATEST(known_jobs.verdict_ms, excluded.verdict_ms)";
                tx.execute(&tx.prepare_cached(known).await?, &[&item.job_key, &now_ms]).await?;
                let sql = "UPDATE work SET known = TRUE WHERE job_key = $1 AND NOT known";
                tx.execute(&tx.prepare_cached(sql).await?, &[&item.job_key]).await?;
                Some(id)
            }
            None => None,
        };
        let mut last = last_verdicts(&tx, rows.iter().copied()).await?;
        if let Some(since) = recent_since_ms {
            tx.execute(&lock, &[&INCIDENT_LOCK_CLASS, &"incidents"]).await?;
            last.1 = recent_members(&tx, self, since).await?;
        }
        let plan = (completion.plan)(verdict_id, &last);
        if let (Some(id), Some(member)) = (verdict_id, &plan.member) {
            let sql = "INSERT INTO incident_members (verdict_id, created_ms, member) VALUES ($1, $2, $3)
                 ON CONFLICT (verdict_id) DO UPDATE SET member = excluded.member";
            tx.execute(&tx.prepare_cached(sql).await?, &[&id, &now_ms, member]).await?;
        }
        let insert = tx
            .prepare_cached(
                "INSERT INTO outbox (destination, group_key, idem_key, priority, rank, notice, state, next_ms, first_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $7) ON CONFLICT (destination, idem_key) DO NOTHING",
            )
            .await?;
        let remember = tx
            .prepare_cached(
                "INSERT INTO group_state (destination, group_key, verdict_key, updated_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (destination, group_key) DO UPDATE SET verdict_key = excluded.verdict_key, updated_ms = excluded.updated_ms",
            )
            .await?;
        let mut added = 0;
        for n in plan.notices {
            let json = serde_json::to_string(&n.notice)?;
            let (prio, rank) = (priority(n.notice.kind), rank(&n.notice));
            let (d, g) = (&n.destination, &n.notice.thread_key().to_string());
            added +=
                tx.execute(&insert, &[d, g, &n.notice.idempotency_key, &prio, &rank, &json, &now_ms]).await? as usize;
            if let Some(key) = &n.remember_verdict {
                tx.execute(&remember, &[d, g, key, &now_ms]).await?;
            }
        }
        for r in &plan.remember {
            tx.execute(&remember, &[&r.destination, &r.row, &r.value, &now_ms]).await?;
        }
        let touch = tx.prepare_cached("UPDATE group_state SET updated_ms = $2 WHERE group_key = $1").await?;
        for group in &rows {
            tx.execute(&touch, &[group, &now_ms]).await?;
        }
        match rediagnose_at_ms {
            Some(due_ms) => rediagnose(&tx, item, due_ms, now_ms).await?,
            None => {
                tx.execute(&tx.prepare_cached("DELETE FROM work WHERE id = $1").await?, &[&item.id]).await?;
            }
        }
        tx.commit().await?;
        Ok(Completed { verdict_id, notices: added })
    }
}

/// The follow-up of a weak verdict (see [`crate::service::store::Store::complete_rediagnosing`]): the
/// finished row is pending again at `due_ms` with its firing groups marked, or those groups
/// join the job's pending diagnosis.
pub(super) async fn rediagnose(
    tx: &Transaction<'_>,
    item: &WorkItem,
    due_ms: i64,
    now_ms: i64,
) -> Result<(), StoreError> {
    let groups: BTreeMap<String, GroupInfo> = item
        .groups
        .iter()
        .filter(|(_, g)| g.firing)
        .map(|(k, g)| (k.clone(), GroupInfo { rediagnosis: true, ..g.clone() }))
        .collect();
    let sql = "SELECT id FROM work WHERE state = 'pending' AND job_key = $1 FOR UPDATE";
    let pending: Option<i64> = tx.query_opt(&tx.prepare_cached(sql).await?, &[&item.job_key]).await?.map(|r| r.get(0));
    let pending = match pending {
        Some(id) => Some(read_work(tx, id).await?),
        None => None,
    };
    match pending {
        _ if groups.is_empty() => {}
        Some(Ok(newer)) => {
            let mut merged = groups;
            merged.extend(newer.groups);
            let class = claim_class(&merged, newer.attempts);
            let sql = "UPDATE work SET groups = $2, claim_class = $3 WHERE id = $1";
            tx.execute(&tx.prepare_cached(sql).await?, &[&newer.id, &serde_json::to_string(&merged)?, &class]).await?;
        }
        // The pending row goes to the dead letters at its claim; no follow-up beside it.
        Some(Err(_)) => {}
        None => {
            let sql = "UPDATE work SET state = 'pending', owner = NULL, groups = $2, due_ms = $3, created_ms = $4,
                   attempts = 0, first_failure_ms = NULL, claim_class = $5 WHERE id = $1";
            let class = claim_class(&groups, 0);
            let groups = serde_json::to_string(&groups)?;
            tx.execute(&tx.prepare_cached(sql).await?, &[&item.id, &groups, &due_ms, &now_ms, &class]).await?;
            return Ok(());
        }
    }
    tx.execute(&tx.prepare_cached("DELETE FROM work WHERE id = $1").await?, &[&item.id]).await?;
    Ok(())
}

/// Running work whose lease expired runs again (merged into the job's pending row).
pub(super) async fn reap_work(tx: &Transaction<'_>, now_ms: i64, dead: &mut Vec<DeadLetter>) -> Result<(), StoreError> {
    let sql = "SELECT id FROM work WHERE state = 'running' AND lease_until_ms < $1 FOR UPDATE SKIP LOCKED";
    let expired: Vec<i64> =
        tx.query(&tx.prepare_cached(sql).await?, &[&now_ms]).await?.iter().map(|r| r.get(0)).collect();
    for id in expired {
        match read_work(tx, id).await? {
            Ok(item) => {
                tracing::warn!(job = ?item.job, "the replica running a diagnosis stopped renewing its lease; it runs again");
                requeue(tx, &item, None, dead, now_ms).await?
            }
            Err(why) => dead.push(dead_letter_work(tx, id, &why, now_ms).await?),
        }
    }
    Ok(())
}

/// Puts running work back to pending (due at `retry.0`, first failure `retry.1`, one more
/// attempt), or merges it into the job's newer pending row.
pub(super) async fn requeue(
    tx: &Transaction<'_>,
    item: &WorkItem,
    retry: Option<(i64, i64)>,
    dead: &mut Vec<DeadLetter>,
    now_ms: i64,
) -> Result<(), StoreError> {
    let sql = "SELECT id FROM work WHERE state = 'pending' AND job_key = $1 FOR UPDATE";
    let newer: Option<i64> = tx.query_opt(&tx.prepare_cached(sql).await?, &[&item.job_key]).await?.map(|r| r.get(0));
    let attempts = item.attempts + i64::from(retry.is_some());
    let first_failure = retry.map(|r| r.1).or(item.first_failure_ms);
    let newer = match newer {
        Some(id) => match read_work(tx, id).await? {
            Ok(newer) => Some(newer),
            Err(why) => {
                dead.push(dead_letter_work(tx, id, &why, now_ms).await?);
                None
            }
        },
        None => None,
    };
    match newer {
        Some(newer) => {
            let mut merged = item.groups.clone();
            merged.extend(newer.groups);
            let due = retry.map_or(i64::MAX, |r| r.0);
            let sql = "UPDATE work SET groups = $2, attempts = $3, first_failure_ms = $4, due_ms = LEAST(due_ms, $5),
                   claim_class = $6 WHERE id = $1";
            let class = claim_class(&merged, attempts);
            let merged = serde_json::to_string(&merged)?;
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] =
                [&newer.id, &merged, &attempts, &first_failure, &due, &class];
            tx.execute(&tx.prepare_cached(sql).await?, &params).await?;
            tx.execute(&tx.prepare_cached("DELETE FROM work WHERE id = $1").await?, &[&item.id]).await?;
        }
        None => {
            let sql = match retry {
                Some(_) => {
                    "UPDATE work SET state = 'pending', owner = NULL, due_ms = $2, attempts = $3, first_failure_ms = $4,
                       claim_class = $5 WHERE id = $1"
                }
                None => {
                    "UPDATE work SET state = 'pending', owner = NULL, due_ms = LEAST(due_ms, $2), attempts = $3,
                       first_failure_ms = $4, claim_class = $5 WHERE id = $1"
                }
            };
            let due = retry.map_or(now_ms, |r| r.0);
            let class = claim_class(&item.groups, attempts);
            tx.execute(&tx.prepare_cached(sql).await?, &[&item.id, &due, &attempts, &first_failure, &class]).await?;
        }
    }
    Ok(())
}

/// Decodes a work row; `Ok(Err(why))` when the row is there but cannot be decoded.
pub(super) async fn read_work(tx: &Transaction<'_>, id: i64) -> Result<Result<WorkItem, String>, StoreError> {
    let sql =
        "SELECT job_key, job, labels, groups, created_ms, attempts, first_failure_ms, known FROM work WHERE id = $1";
    let r = tx.query_one(&tx.prepare_cached(sql).await?, &[&id]).await?;
    Ok((|| -> Result<WorkItem, String> {
        Ok(WorkItem {
            id,
            job_key: r.get(0),
            job: r.get(1),
            labels: serde_json::from_str(r.get(2)).map_err(|e| format!("labels: {e}"))?,
            groups: serde_json::from_str(r.get(3)).map_err(|e| format!("groups: {e}"))?,
            created_ms: r.get(4),
            attempts: r.get(5),
            first_failure_ms: r.get(6),
            known: r.get(7),
        })
    })())
}

/// The incident rows of the verdicts stored since `since_ms` (this replica's clock), oldest
/// first, with their times on this replica's clock.
pub(super) async fn recent_members(
    client: &impl deadpool_postgres::GenericClient,
    store: &PgStore,
    since_ms: i64,
) -> Result<Vec<RecentMember>, StoreError> {
    let sql = "SELECT verdict_id, created_ms, member FROM incident_members WHERE created_ms >= $1
         ORDER BY created_ms, verdict_id";
    let rows = client.query(&client.prepare_cached(sql).await?, &[&store.db(since_ms)]).await?;
    Ok(rows
        .iter()
        .map(|r| RecentMember { verdict_id: r.get(0), created_ms: store.local(r.get(1)), member: r.get(2) })
        .collect())
}

/// The last verdict key of every (destination, group) for these groups.
pub(super) async fn last_verdicts<'a>(
    tx: &Transaction<'_>,
    groups: impl Iterator<Item = &'a String>,
) -> Result<LastVerdicts, StoreError> {
    let mut out = BTreeMap::new();
    let stmt = tx
        .prepare_cached(
            "SELECT destination, verdict_key FROM group_state WHERE group_key = $1 AND verdict_key IS NOT NULL",
        )
        .await?;
    for g in groups {
        for r in tx.query(&stmt, &[g]).await? {
            out.insert((r.get::<_, String>(0), g.clone()), r.get::<_, String>(1));
        }
    }
    Ok(LastVerdicts(out, Vec::new()))
}
