//! The MCP server (Model Context Protocol, on the official Rust SDK `rmcp`): culprit's
//! diagnosis as tools an agent calls.
//!
//! * `culprit mcp --config FILE` over stdio (or `--capture NAME`: a bundled recording,
//!   offline), [`serve_stdio`];
//! * `POST /mcp` of `culprit serve` (streamable HTTP, stateless, JSON answers) behind the
//!   API's authentication, [`http_routes`].
//!
//! The tools ([`tools`]) are thin: each asks an existing function (the live pipeline,
//! the bundled captures, the store, the query shapes) through [`source::Backend`] and
//! answers its value; the one thing of their own is [`explain`], a vertex of a verdict read
//! out of the verdict. Failures are tool results ([`errors`]), never a crash of the session.
//!
//! It sits above `service` (it reads the service's pipeline and store) and below `cli`,
//! which mounts [`http_routes`] into `serve` ([`crate::service::server::Application::build_with`]).

pub mod errors;
pub mod explain;
pub mod source;
pub mod tools;
mod transport;

pub use source::Backend;
pub use tools::CulpritTools;
pub use transport::{PATH, http_routes, serve_stdio};
