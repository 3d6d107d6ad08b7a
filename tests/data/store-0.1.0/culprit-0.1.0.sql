-- A store written by culprit 0.1.0 (d98c5f7), crashed with work running and a send in flight.
-- Made by tests/data/store-0.1.0/generate.sh; do not edit by hand.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE work (
  id INTEGER PRIMARY KEY,
  job_key TEXT NOT NULL,
  job TEXT NOT NULL,
  labels TEXT NOT NULL,
  groups TEXT NOT NULL,
  due_ms INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  first_failure_ms INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL
);
INSERT INTO work VALUES(1,'id:a','a','{"alertname":"FlinkBackpressure","job_id":"a"}','{"g3":{"firing":true,"firing_set":"g3-firing","labels":{"alertname":"FlinkBackpressure","job_id":"a"}}}',1796000070000,1796000060000,NULL,0,'running');
INSERT INTO work VALUES(2,'id:a','a','{"alertname":"FlinkBackpressure","job_id":"a"}','{"g4":{"firing":true,"firing_set":"g4-firing","labels":{"alertname":"FlinkBackpressure","job_id":"a"}}}',1796000071000,1796000061000,NULL,0,'running');
CREATE TABLE outbox (
  id INTEGER PRIMARY KEY,
  destination TEXT NOT NULL,
  idem_key TEXT NOT NULL,
  notice TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_ms INTEGER NOT NULL,
  first_ms INTEGER NOT NULL,
  last_error TEXT,
  UNIQUE(destination, idem_key)
);
INSERT INTO outbox VALUES(1,'slack','k0','{"kind":"verdict","group_key":"g0","labels":{"alertname":"FlinkBackpressure","job_id":"b"},"job":{"name":"b","id":"b-flink-id"},"verdict":null,"verdict_id":null,"verdict_url":null,"reason":null,"firing":true,"changed":false,"idempotency_key":"k0","at_ms":1796000012000}','sent',1,1796000012000,1796000012000,NULL);
INSERT INTO outbox VALUES(2,'slack','k1','{"kind":"could_not_diagnose","group_key":"g1","labels":{"alertname":"FlinkBackpressure","job_id":"c"},"job":{"name":"c","id":"c-flink-id"},"verdict":null,"verdict_id":null,"verdict_url":null,"reason":"Prometheus: query failed: backend down","firing":true,"changed":false,"idempotency_key":"k1","at_ms":1796000040000}','sending',1,1796000040000,1796000040000,NULL);
INSERT INTO outbox VALUES(3,'slack','k2','{"kind":"verdict","group_key":"g2","labels":{"alertname":"FlinkBackpressure","job_id":"d"},"job":{"name":"d","id":"d-flink-id"},"verdict":null,"verdict_id":null,"verdict_url":null,"reason":null,"firing":true,"changed":false,"idempotency_key":"k2","at_ms":1796000052000}','pending',0,1796000052000,1796000052000,NULL);
CREATE TABLE group_state (
  destination TEXT NOT NULL,
  group_key TEXT NOT NULL,
  verdict_key TEXT,
  state TEXT,
  PRIMARY KEY (destination, group_key)
);
INSERT INTO group_state VALUES('slack','g0','verdict-key-b','{"channel":"C0123","ts":"1796000013.000100"}');
INSERT INTO group_state VALUES('slack','g1','could-not-diagnose:c',NULL);
INSERT INTO group_state VALUES('slack','g2','verdict-key-d',NULL);
CREATE TABLE verdicts (
  id INTEGER PRIMARY KEY,
  job TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  json TEXT NOT NULL
);
CREATE TABLE health (id INTEGER PRIMARY KEY CHECK (id = 1), touched_ms INTEGER NOT NULL);
CREATE UNIQUE INDEX work_one_pending ON work(job_key) WHERE state = 'pending';
CREATE INDEX work_due ON work(state, due_ms);
CREATE INDEX outbox_head ON outbox(destination, state, id);
COMMIT;
