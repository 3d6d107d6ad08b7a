//! The transports: stdio for `culprit mcp`, streamable HTTP under axum for `serve`.

use std::sync::Arc;

use rmcp::ServiceExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::source::Backend;
use super::tools::CulpritTools;

/// Where `culprit serve` answers MCP.
pub const PATH: &str = "/mcp";

/// Serves the tools over standard input and output until the client closes them. Logs go
/// to stderr: stdout carries the protocol alone.
pub async fn serve_stdio(backend: Arc<Backend>) -> Result<(), String> {
    let running = CulpritTools::new(backend)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("the MCP session did not start: {e}"))?;
    running.waiting().await.map_err(|e| format!("the MCP session failed: {e}"))?;
    Ok(())
}

/// `POST /mcp`: streamable HTTP, stateless (no session to keep between requests, so any
/// replica answers and `server.request_timeout` bounds each call) with plain JSON answers.
/// The `Host` check against DNS rebinding is rmcp's (loopback names) when serve listens on
/// loopback; elsewhere serve requires authentication (`server.auth`), which guards `/mcp`
/// as it guards `/api`, and any host name is taken.
pub fn http_routes(service: Arc<crate::service::Service>) -> axum::Router {
    let loopback = service.config.server.listen.parse::<std::net::SocketAddr>().is_ok_and(|a| a.ip().is_loopback())
        || service.config.server.listen.starts_with("localhost:");
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(service.config.server.body_limit_bytes);
    let config = if loopback { config } else { config.disable_allowed_hosts() };
    let backend = Arc::new(Backend::for_service(service));
    let mcp: StreamableHttpService<CulpritTools, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(CulpritTools::new(backend.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new().route_service(PATH, mcp)
}
