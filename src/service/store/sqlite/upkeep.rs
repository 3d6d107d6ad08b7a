//! Depths, pruning and the health row on SQLite.

use super::*;

impl SqliteStore {
    /// See [`crate::service::store::Store::depths`].
    pub fn depths(&self) -> Result<Depths, StoreError> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT (SELECT COUNT(*) FROM work),
                    (SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'sending')),
                    (SELECT COUNT(*) FROM dead_letter)",
            )?
            .query_row([], |r| Ok(Depths { work: r.get(0)?, outbox: r.get(1)?, dead_letters: r.get(2)? }))?)
    }

    /// See [`crate::service::store::Store::prune`].
    pub fn prune(&self, p: Prune) -> Result<Pruned, StoreError> {
        let cutoff = p.now_ms - p.older_than_ms;
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut pruned = Pruned {
            outbox: tx
                .execute("DELETE FROM outbox WHERE state IN ('sent', 'failed') AND done_ms < ?1", params![cutoff])?,
            ..Pruned::default()
        };
        pruned.outbox += tx.execute(
            "DELETE FROM outbox WHERE state IN ('sent', 'failed') AND id NOT IN (
               SELECT id FROM outbox WHERE state IN ('sent', 'failed') ORDER BY done_ms DESC, id DESC LIMIT ?1)",
            params![p.keep_rows],
        )?;
        // A group's state goes once nothing was heard of the group for the whole period
        // and nothing of it waits: a later alert for it starts afresh.
        pruned.group_state = tx.execute(
            "DELETE FROM group_state WHERE updated_ms < ?1 AND NOT EXISTS (SELECT 1 FROM outbox o
               WHERE o.destination = group_state.destination AND o.group_key = group_state.group_key
                 AND o.state IN ('pending', 'sending'))",
            params![cutoff],
        )?;
        pruned.verdicts = tx.execute("DELETE FROM verdicts WHERE created_ms < ?1", params![cutoff])?;
        pruned.verdicts += tx.execute(
            "DELETE FROM verdicts WHERE id <= (SELECT MAX(id) FROM verdicts) - ?1",
            params![p.verdicts_kept],
        )?;
        // A verdict's incident row goes with it.
        tx.execute("DELETE FROM incident_members WHERE created_ms < ?1", params![cutoff])?;
        tx.execute("DELETE FROM incident_members WHERE verdict_id < (SELECT COALESCE(MIN(id), 0) FROM verdicts)", [])?;
        // A job not given a verdict for the whole period is unknown again.
        pruned.known_jobs = tx.execute("DELETE FROM known_jobs WHERE verdict_ms < ?1", params![cutoff])?;
        pruned.known_jobs += tx.execute(
            "DELETE FROM known_jobs WHERE job_key NOT IN (
               SELECT job_key FROM known_jobs ORDER BY verdict_ms DESC LIMIT ?1)",
            params![p.keep_rows],
        )?;
        tx.execute("DELETE FROM sender_turns WHERE sender NOT IN (SELECT sender FROM work)", [])?;
        pruned.dead_letters = tx.execute("DELETE FROM dead_letter WHERE at_ms < ?1", params![cutoff])?;
        pruned.dead_letters += tx.execute(
            "DELETE FROM dead_letter WHERE id <= (SELECT MAX(id) FROM dead_letter) - ?1",
            params![p.keep_rows],
        )?;
        tx.commit()?;
        Ok(pruned)
    }

    /// A write that proves the store is writable (for `/readyz`).
    pub fn touch(&self, now_ms: i64) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached(
                // Always a new value: SQLite skips writing a row rewritten unchanged, and
                // this write must reach the disk to prove it takes writes.
                "INSERT INTO health (id, touched_ms) VALUES (1, ?1)
                 ON CONFLICT(id) DO UPDATE SET touched_ms = MAX(excluded.touched_ms, health.touched_ms + 1)",
            )?
            .execute(params![now_ms])?;
        Ok(())
    }
}
