//! Stored verdicts on PostgreSQL: recent ones, one by id, the job as its newest verdict
//! names it.

use super::*;

impl PgStore {
    /// See [`crate::service::store::Store::verdicts`].
    pub async fn verdicts(&self, limit: usize) -> Result<Vec<StoredVerdict>, StoreError> {
        let ids: Vec<i64> = {
            let client = self.client().await?;
            let sql = "SELECT id FROM verdicts ORDER BY id DESC LIMIT $1";
            let rows = client.query(&client.prepare_cached(sql).await?, &[&(limit as i64)]).await?;
            rows.iter().map(|r| r.get(0)).collect()
        };
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(v) = self.verdict(id).await? {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// See [`crate::service::store::Store::verdict`]. An undecodable verdict goes to the dead-letter table.
    pub async fn verdict(&self, id: i64) -> Result<Option<StoredVerdict>, StoreError> {
        let mut client = self.client().await?;
        let sql = "SELECT created_ms, json FROM verdicts WHERE id = $1";
        let Some(row) = client.query_opt(&client.prepare_cached(sql).await?, &[&id]).await? else {
            return Ok(None);
        };
        let created_ms: i64 = row.get(0);
        let json: String = row.get(1);
        match serde_json::from_str(&json) {
            // Stored on the database's clock; callers compare with this replica's.
            Ok(verdict) => Ok(Some(StoredVerdict { id, created_ms: self.local(created_ms), verdict })),
            Err(why) => {
                let now_ms = self.inner.clock.db_now_ms();
                let tx = client.transaction().await?;
                let dead = dead_letter(&tx, "verdicts", id, None, &why.to_string(), now_ms).await?;
                tx.execute("DELETE FROM verdicts WHERE id = $1", &[&id]).await?;
                tx.commit().await?;
                report_dead(&self.inner.metrics, vec![dead]);
                Ok(None)
            }
        }
    }

    /// See [`crate::service::store::Store::last_verdict_job`].
    pub async fn last_verdict_job(
        &self,
        job_id: Option<&str>,
        name: Option<&str>,
    ) -> Result<Option<JobRef>, StoreError> {
        use crate::model::graph::sanitize_label_value;
        let client = self.client().await?;
        let sql = "SELECT json FROM verdicts ORDER BY id DESC LIMIT 200";
        let rows = client.query(&client.prepare_cached(sql).await?, &[]).await?;
        let wanted = name.map(sanitize_label_value);
        Ok(rows
            .iter()
            .filter_map(|r| serde_json::from_str::<serde_json::Value>(&r.get::<_, String>(0)).ok())
            .map(|v| {
                let field =
                    |k: &str| v.pointer(&format!("/job/{k}")).and_then(|x| x.as_str()).unwrap_or("").to_string();
                (field("name"), field("id"))
            })
            .find(|(n, id)| match job_id {
                Some(j) => id == j,
                None => wanted.as_deref() == Some(sanitize_label_value(n).as_str()),
            })
            .map(|(name, id)| JobRef { name, id }))
    }
}
