//! The verdict's JSON Schema (`docs/verdict.schema.json`) is generated from the verdict's
//! types, and every verdict culprit gives — of every real capture and every case —
//! validates against it. `CULPRIT_WRITE_SCHEMA=1 cargo test --test schema` rewrites the
//! file after a change of the types.

use std::path::{Path, PathBuf};

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::model::verdict::json_schema;
use culprit::render::Format;

fn schema_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/verdict.schema.json")
}

#[test]
fn the_published_schema_is_the_one_generated_from_the_types() {
    let generated = serde_json::to_string_pretty(&json_schema()).unwrap() + "\n";
    if std::env::var_os("CULPRIT_WRITE_SCHEMA").is_some() {
        std::fs::write(schema_path(), &generated).unwrap();
    }
    let published = std::fs::read_to_string(schema_path()).expect("docs/verdict.schema.json exists");
    assert!(
        published == generated,
        "docs/verdict.schema.json differs from the types; regenerate it with CULPRIT_WRITE_SCHEMA=1 cargo test --test schema"
    );
}

fn dirs(under: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(under);
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("recording.om.gz").exists() && p.join("plan.json").exists())
        .collect();
    v.sort();
    v
}

#[test]
fn every_verdict_of_the_captures_and_cases_validates_against_the_schema() {
    let schema = json_schema();
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    let all: Vec<PathBuf> = dirs("examples/captures").into_iter().chain(dirs("tests/data/cases")).collect();
    assert!(all.len() >= 18, "captures and cases: {}", all.len());
    for dir in all {
        let args = DiagnoseArgs {
            recording: Some(dir.join("recording.om.gz")),
            metrics: Vec::new(),
            scrape: Vec::new(),
            flamegraph: None,
            flink: None,
            cluster: None,
            plan: Some(dir.join("plan.json")),
            job: None,
            label: Vec::new(),
            at: None,
            window: None,
            config: None,
            checkpoint_config: None,
            exceptions: None,
            rescales: None,
            format: Format::Json,
        };
        let v = diagnose_command(&args, 0).unwrap_or_else(|e| panic!("{}: {}", dir.display(), e.message));
        let json = serde_json::to_value(&v).unwrap();
        let errors: Vec<String> =
            validator.iter_errors(&json).map(|e| format!("{} at {}", e, e.instance_path)).collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", dir.display());
        // The timeline is there for every recording.
        assert!(json["timeline"].is_object(), "{}: no timeline", dir.display());
    }
}

#[test]
fn a_verdict_missing_a_required_field_does_not_validate() {
    // The control: the validator does reject what breaks the schema.
    let validator = jsonschema::validator_for(&json_schema()).unwrap();
    assert!(!validator.is_valid(&serde_json::json!({"schema": "culprit.verdict/v1"})));
    assert!(!validator.is_valid(&serde_json::json!({"status": "culprit found"})));
}
