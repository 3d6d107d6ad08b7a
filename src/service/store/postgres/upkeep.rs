//! Depths, pruning and the health row on PostgreSQL.

use super::*;

impl PgStore {
    /// See [`crate::service::store::Store::depths`].
    pub async fn depths(&self) -> Result<Depths, StoreError> {
        let client = self.client().await?;
        let sql = "SELECT (SELECT COUNT(*) FROM work),
                (SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'sending')),
                (SELECT COUNT(*) FROM dead_letter)";
        let r = client.query_one(&client.prepare_cached(sql).await?, &[]).await?;
        Ok(Depths { work: r.get(0), outbox: r.get(1), dead_letters: r.get(2) })
    }

    /// See [`crate::service::store::Store::prune`].
    pub async fn prune(&self, p: Prune) -> Result<Pruned, StoreError> {
        let mut client = self.client().await?;
        let cutoff = self.db(p.now_ms) - p.older_than_ms;
        let tx = client.transaction().await?;
        let n = |sql: &'static str, arg: i64| {
            let tx = &tx;
            async move { Ok::<usize, StoreError>(tx.execute(sql, &[&arg]).await? as usize) }
        };
        let mut pruned = Pruned {
            outbox: n("DELETE FROM outbox WHERE state IN ('sent', 'failed') AND done_ms < $1", cutoff).await?,
            ..Pruned::default()
        };
        pruned.outbox += n(
            "DELETE FROM outbox WHERE state IN ('sent', 'failed') AND id NOT IN (
               SELECT id FROM outbox WHERE state IN ('sent', 'failed') ORDER BY done_ms DESC, id DESC LIMIT $1)",
            p.keep_rows,
        )
        .await?;
        // A group's state goes once nothing was heard of the group for the whole period
        // and nothing of it waits: a later alert for it starts afresh.
        pruned.group_state = n(
            "DELETE FROM group_state WHERE updated_ms < $1 AND NOT EXISTS (SELECT 1 FROM outbox o
               WHERE o.destination = group_state.destination AND o.group_key = group_state.group_key
                 AND o.state IN ('pending', 'sending'))",
            cutoff,
        )
        .await?;
        pruned.verdicts = n("DELETE FROM verdicts WHERE created_ms < $1", cutoff).await?;
        pruned.verdicts +=
            n("DELETE FROM verdicts WHERE id <= (SELECT MAX(id) FROM verdicts) - $1", p.verdicts_kept).await?;
        // A verdict's incident row goes with it.
        n("DELETE FROM incident_members WHERE created_ms < $1", cutoff).await?;
        n("DELETE FROM incident_members WHERE verdict_id < (SELECT COALESCE(MIN(id), 0) FROM verdicts) - $1", 0)
            .await?;
        // A pacing slot long past paces nothing.
        n("DELETE FROM pace_slots WHERE next_ms < $1", cutoff).await?;
        // A job not given a verdict for the whole period is unknown again.
        pruned.known_jobs = n("DELETE FROM known_jobs WHERE verdict_ms < $1", cutoff).await?;
        pruned.known_jobs += n(
            "DELETE FROM known_jobs WHERE job_key NOT IN (
               SELECT job_key FROM known_jobs ORDER BY verdict_ms DESC LIMIT $1)",
            p.keep_rows,
        )
        .await?;
        tx.execute("DELETE FROM sender_turns WHERE sender NOT IN (SELECT sender FROM work)", &[]).await?;
        pruned.dead_letters = n("DELETE FROM dead_letter WHERE at_ms < $1", cutoff).await?;
        pruned.dead_letters +=
            n("DELETE FROM dead_letter WHERE id <= (SELECT MAX(id) FROM dead_letter) - $1", p.keep_rows).await?;
        tx.commit().await?;
        Ok(pruned)
    }

    /// A write that proves the database takes writes (for `/readyz`).
    pub async fn touch(&self, now_ms: i64) -> Result<(), StoreError> {
        let client = self.client().await?;
        let now_ms = self.db(now_ms);
        let sql = "INSERT INTO health (id, touched_ms) VALUES (1, $1)
             ON CONFLICT (id) DO UPDATE SET touched_ms = GREATEST(excluded.touched_ms, health.touched_ms + 1)";
        client.execute(&client.prepare_cached(sql).await?, &[&now_ms]).await?;
        Ok(())
    }
}
