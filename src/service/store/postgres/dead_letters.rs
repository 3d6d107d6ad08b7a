//! Rows that could not be decoded, moved aside on PostgreSQL.

use super::*;

impl PgStore {
    /// See [`crate::service::store::Store::dead_letters`].
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        let client = self.client().await?;
        let sql = "SELECT id, source, source_id, destination, error, payload, at_ms FROM dead_letter ORDER BY id DESC LIMIT $1";
        let rows = client.query(&client.prepare_cached(sql).await?, &[&(limit as i64)]).await?;
        Ok(rows
            .iter()
            .map(|r| {
                let payload: String = r.get(5);
                DeadLetter {
                    id: r.get(0),
                    source: r.get(1),
                    source_id: r.get(2),
                    destination: r.get(3),
                    error: r.get(4),
                    payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
                    at_ms: self.local(r.get(6)),
                }
            })
            .collect())
    }
}

pub(super) async fn insert_dead_letter(
    tx: &Transaction<'_>,
    source: &str,
    source_id: i64,
    destination: Option<&str>,
    error: &str,
    payload: &serde_json::Value,
    now_ms: i64,
) -> Result<DeadLetter, StoreError> {
    let sql = "INSERT INTO dead_letter (source, source_id, destination, error, payload, at_ms)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id";
    let text = payload.to_string();
    let id: i64 = tx
        .query_one(&tx.prepare_cached(sql).await?, &[&source, &source_id, &destination, &error, &text, &now_ms])
        .await?
        .get(0);
    Ok(DeadLetter {
        id,
        source: source.into(),
        source_id,
        destination: destination.map(str::to_string),
        error: error.into(),
        payload: payload.clone(),
        at_ms: now_ms,
    })
}

/// Copies a row of `table` (every column, as JSON) to the dead-letter table.
pub(super) async fn dead_letter(
    tx: &Transaction<'_>,
    table: &'static str,
    id: i64,
    destination: Option<&str>,
    error: &str,
    now_ms: i64,
) -> Result<DeadLetter, StoreError> {
    let sql = format!("SELECT row_to_json(t)::text FROM {table} t WHERE id = $1");
    let text: String = tx.query_one(&sql, &[&id]).await?.get(0);
    let payload = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
    insert_dead_letter(tx, table, id, destination, error, &payload, now_ms).await
}

pub(super) async fn dead_letter_work(
    tx: &Transaction<'_>,
    id: i64,
    error: &str,
    now_ms: i64,
) -> Result<DeadLetter, StoreError> {
    let d = dead_letter(tx, "work", id, None, error, now_ms).await?;
    tx.execute(&tx.prepare_cached("DELETE FROM work WHERE id = $1").await?, &[&id]).await?;
    Ok(d)
}

pub(super) async fn dead_letter_outbox(
    tx: &Transaction<'_>,
    id: i64,
    destination: &str,
    error: &str,
    now_ms: i64,
) -> Result<DeadLetter, StoreError> {
    let d = dead_letter(tx, "outbox", id, Some(destination), error, now_ms).await?;
    tx.execute(&tx.prepare_cached("DELETE FROM outbox WHERE id = $1").await?, &[&id]).await?;
    Ok(d)
}
