//! Stored verdicts on SQLite: recent ones, one by id, the job as its newest verdict names it.

use super::*;

impl SqliteStore {
    /// See [`crate::service::store::Store::verdicts`].
    pub fn verdicts(&self, limit: usize) -> Result<Vec<StoredVerdict>, StoreError> {
        let ids: Vec<i64> = {
            let conn = self.conn();
            let mut stmt = conn.prepare_cached("SELECT id FROM verdicts ORDER BY id DESC LIMIT ?1")?;
            stmt.query_map(params![limit as i64], |r| r.get(0))?.collect::<Result<_, _>>()?
        };
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(v) = self.verdict(id)? {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// See [`crate::service::store::Store::verdict`]. An undecodable verdict goes to the dead-letter table.
    pub fn verdict(&self, id: i64) -> Result<Option<StoredVerdict>, StoreError> {
        let mut conn = self.conn();
        let decoded = conn
            .prepare_cached("SELECT created_ms, json FROM verdicts WHERE id = ?1")?
            .query_row(params![id], |r| {
                let created_ms = r.get::<_, i64>(0);
                let json = r.get::<_, String>(1);
                Ok(match (created_ms, json) {
                    (Ok(created_ms), Ok(json)) => serde_json::from_str(&json)
                        .map(|verdict| StoredVerdict { id, created_ms, verdict })
                        .map_err(|e| e.to_string()),
                    (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
                })
            })
            .optional()?;
        match decoded {
            None => Ok(None),
            Some(Ok(v)) => Ok(Some(v)),
            Some(Err(why)) => {
                let now_ms = jiff::Timestamp::now().as_millisecond();
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let dead = dead_letter(&tx, "verdicts", id, None, &why, now_ms)?;
                tx.execute("DELETE FROM verdicts WHERE id = ?1", params![id])?;
                tx.commit()?;
                drop(conn);
                self.report_dead(vec![dead]);
                Ok(None)
            }
        }
    }

    /// See [`crate::service::store::Store::last_verdict_job`].
    pub fn last_verdict_job(&self, job_id: Option<&str>, name: Option<&str>) -> Result<Option<JobRef>, StoreError> {
        use crate::model::graph::sanitize_label_value;
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT json_extract(json, '$.job.name'), json_extract(json, '$.job.id') FROM verdicts \
             WHERE ?1 IS NULL OR json_extract(json, '$.job.id') = ?1 ORDER BY id DESC LIMIT 200",
        )?;
        let rows = stmt
            .query_map(params![job_id], |r| {
                Ok((
                    r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                    r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let wanted = name.map(sanitize_label_value);
        Ok(rows
            .into_iter()
            .find(|(n, _)| job_id.is_some() || wanted.as_deref() == Some(sanitize_label_value(n).as_str()))
            .map(|(name, id)| JobRef { name, id }))
    }
}
