//! Rows that could not be decoded, moved aside on SQLite.

use super::*;

impl SqliteStore {
    /// See [`crate::service::store::Store::dead_letters`].
    pub fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, source, source_id, destination, error, payload, at_ms FROM dead_letter ORDER BY id DESC LIMIT ?1",
        )?;
        let rows = stmt
            .query_map(params![limit as i64], |r| {
                let payload: String = r.get(5)?;
                Ok(DeadLetter {
                    id: r.get(0)?,
                    source: r.get(1)?,
                    source_id: r.get(2)?,
                    destination: r.get(3)?,
                    error: r.get(4)?,
                    payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
                    at_ms: r.get(6)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }
}

/// Every column of a row as JSON (`names` in order).
pub(super) fn row_as_json(r: &rusqlite::Row<'_>, names: &[&str]) -> rusqlite::Result<serde_json::Value> {
    let mut m = serde_json::Map::new();
    for (i, name) in names.iter().enumerate() {
        m.insert(name.to_string(), column_as_json(r.get_ref(i)?));
    }
    Ok(serde_json::Value::Object(m))
}

pub(super) fn insert_dead_letter(
    tx: &Connection,
    source: &str,
    source_id: i64,
    destination: Option<&str>,
    error: &str,
    payload: &serde_json::Value,
    now_ms: i64,
) -> Result<DeadLetter, StoreError> {
    tx.prepare_cached(
        "INSERT INTO dead_letter (source, source_id, destination, error, payload, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![source, source_id, destination, error, payload.to_string(), now_ms])?;
    Ok(DeadLetter {
        id: tx.last_insert_rowid(),
        source: source.into(),
        source_id,
        destination: destination.map(str::to_string),
        error: error.into(),
        payload: payload.clone(),
        at_ms: now_ms,
    })
}

/// Moves a row of `table` (all its columns) to the dead-letter table.
pub(super) fn dead_letter(
    tx: &Connection,
    table: &str,
    id: i64,
    destination: Option<&str>,
    error: &str,
    now_ms: i64,
) -> Result<DeadLetter, StoreError> {
    let payload = {
        let mut stmt = tx.prepare(&format!("SELECT * FROM {table} WHERE id = ?1"))?;
        let names: Vec<String> = stmt.column_names().into_iter().map(str::to_string).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        stmt.query_row(params![id], |r| row_as_json(r, &names))?
    };
    insert_dead_letter(tx, table, id, destination, error, &payload, now_ms)
}

pub(super) fn dead_letter_work(tx: &Connection, id: i64, error: &str, now_ms: i64) -> Result<DeadLetter, StoreError> {
    let d = dead_letter(tx, "work", id, None, error, now_ms)?;
    tx.prepare_cached("DELETE FROM work WHERE id = ?1")?.execute(params![id])?;
    Ok(d)
}

pub(super) fn dead_letter_outbox(tx: &Connection, id: i64, error: &str, now_ms: i64) -> Result<DeadLetter, StoreError> {
    let destination: Option<String> =
        tx.query_row("SELECT destination FROM outbox WHERE id = ?1", params![id], |r| r.get(0)).ok();
    let d = dead_letter(tx, "outbox", id, destination.as_deref(), error, now_ms)?;
    tx.prepare_cached("DELETE FROM outbox WHERE id = ?1")?.execute(params![id])?;
    Ok(d)
}
