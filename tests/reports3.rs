//! The field reports of issue 22 ("Field round 3"), each with the value its README says a
//! user expects. The inputs are copied from the reports into `tests/data/reports3/NN-*/`
//! (README, the `make.py` that generates them and what it wrote); each kind of fault has its
//! own module under `tests/reports3/`, with tests beyond the one folder.

#[path = "reports3/demand.rs"]
mod demand;
#[path = "reports3/episode.rs"]
mod episode;
#[path = "reports3/episode_everywhere.rs"]
mod episode_everywhere;
#[path = "reports3/grafana.rs"]
mod grafana;
#[path = "reports3/identity.rs"]
mod identity;
#[path = "reports3/naming.rs"]
mod naming;
#[path = "reports3/retention.rs"]
mod retention;
mod support;

#[path = "reports3/sentinel.rs"]
mod sentinel;
