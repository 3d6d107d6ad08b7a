//! A missing signal in words: `metric (why)`, as a verdict's `missing` list says it.

use crate::model::snapshot::{
    HYGIENE_LEFT, Leaves, Missing, MissingWhy, NO_CHECKPOINT_METRICS, NO_RECORDS_IN, NO_SAMPLES, PREDATES_FLINK_113,
    QUERY_FAILED,
};

/// `metric (why)`: the entry of a verdict's `missing` list.
pub fn missing(m: &Missing) -> String {
    format!("{} ({})", m.metric, why(&m.why))
}

/// Why a signal is missing, in words.
pub fn why(why: &MissingWhy) -> String {
    match why {
        MissingWhy::QueryFailed { error, leaves, .. } => {
            let leaves = match leaves {
                Some(Leaves::SeriesHygiene) => HYGIENE_LEFT,
                None => "",
            };
            format!("{QUERY_FAILED}{error}{leaves}")
        }
        MissingWhy::NoSamples => NO_SAMPLES.into(),
        MissingWhy::PredatesFlink113 => PREDATES_FLINK_113.into(),
        MissingWhy::NoRecordsIn => NO_RECORDS_IN.into(),
        MissingWhy::NoCheckpointMetrics => NO_CHECKPOINT_METRICS.into(),
        MissingWhy::Said { detail } => detail.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(why: MissingWhy) -> String {
        missing(&Missing { metric: "busyTimeMsPerSecond".into(), why })
    }

    #[test]
    fn each_reason_is_worded_as_the_verdicts_of_earlier_builds_said_it() {
        assert_eq!(
            m(MissingWhy::query_failed("http://p: HTTP 503 unavailable", None, false)),
            "busyTimeMsPerSecond (query failed: http://p: HTTP 503 unavailable)"
        );
        assert_eq!(
            m(MissingWhy::query_failed("x", Some(Leaves::SeriesHygiene), false)),
            "busyTimeMsPerSecond (query failed: x; task attempts and duplicate scrapes are not told apart)"
        );
        assert_eq!(
            m(MissingWhy::query_failed("too large", None, true)),
            "busyTimeMsPerSecond (query failed: too large)"
        );
        assert_eq!(m(MissingWhy::NoSamples), "busyTimeMsPerSecond (no samples for this job in the window)");
        assert_eq!(
            m(MissingWhy::Said { detail: "records rates of the sink".into() }),
            "busyTimeMsPerSecond (records rates of the sink)"
        );
    }

    #[test]
    fn the_words_of_every_reason_read_back_as_that_reason() {
        // Old snapshots carry the words; loading them gives the reason again.
        for why in [
            MissingWhy::query_failed("http://p: timed out", None, false),
            MissingWhy::query_failed("http://p: timed out", Some(Leaves::SeriesHygiene), false),
            MissingWhy::NoSamples,
            MissingWhy::PredatesFlink113,
            MissingWhy::NoRecordsIn,
            MissingWhy::NoCheckpointMetrics,
            MissingWhy::Said { detail: "records rates of the sink".into() },
        ] {
            assert_eq!(MissingWhy::from_detail(&super::why(&why)), why);
        }
    }

    #[test]
    fn reasons_sort_as_their_words_do() {
        // The collector sorts a snapshot's missing list; the verdict lists it in that
        // order, which was the order of the words.
        let whys = [
            MissingWhy::PredatesFlink113,
            MissingWhy::query_failed("b", None, false),
            MissingWhy::NoSamples,
            MissingWhy::query_failed("a", Some(Leaves::SeriesHygiene), false),
            MissingWhy::NoRecordsIn,
            MissingWhy::query_failed("a", None, false),
            MissingWhy::NoCheckpointMetrics,
        ];
        let mut typed = whys.to_vec();
        typed.sort();
        let mut worded: Vec<String> = whys.iter().map(why).collect();
        worded.sort();
        assert_eq!(typed.iter().map(why).collect::<Vec<_>>(), worded);
    }

    #[test]
    fn a_missing_entry_of_an_earlier_build_loads_with_its_reason() {
        // Earlier builds stored `{metric, detail}`, the reason in words.
        let old = r#"{"metric":"busyTimeMsPerSecond","detail":"query failed: http://p: HTTP 503 unavailable"}"#;
        let m: Missing = serde_json::from_str(old).unwrap();
        assert_eq!(m.why, MissingWhy::query_failed("http://p: HTTP 503 unavailable", None, false));
        assert!(m.why.is_query_failure());
        let said: Missing = serde_json::from_str(r#"{"metric":"x","detail":"records rates of the sink"}"#).unwrap();
        assert!(!said.why.is_query_failure());
        // Today's form round-trips.
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(
            json,
            r#"{"metric":"busyTimeMsPerSecond","why":{"kind":"query_failed","error":"http://p: HTTP 503 unavailable"}}"#
        );
        assert_eq!(serde_json::from_str::<Missing>(&json).unwrap(), m);
    }
}
