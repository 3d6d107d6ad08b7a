//! Which HTTP statuses are worth another attempt: one table for every backend culprit
//! reads (Prometheus and the PromQL stores behind its client, Flink REST) and every
//! destination it posts to (Slack, PagerDuty, Alertmanager, webhooks). It imports
//! nothing, so every layer may use it.
//!
//! The policy, and why:
//! * **408 Request Timeout** is retried: the server (or a proxy in front of it) gave up
//!   waiting for the request and "the client MAY repeat that request"
//!   (RFC 9110 §15.5.9, <https://www.rfc-editor.org/rfc/rfc9110#section-15.5.9>).
//! * **429 Too Many Requests** is retried: "the user has sent too many requests in a given
//!   amount of time" (RFC 6585 §4, <https://www.rfc-editor.org/rfc/rfc6585#section-4>);
//!   Slack and PagerDuty rate-limit with it, and so do Mimir, Cortex and the proxies in
//!   front of Flink's REST endpoint.
//! * **5xx** is retried ("the server is aware that it has erred or is incapable of
//!   performing the requested method", RFC 9110 §15.6): 500, 502, 503 (a Flink JobManager
//!   that is starting, a Prometheus behind a restarting load balancer), 504 and the rest —
//!   **except [`FINAL_5XX`]**, which say the server will never do what was asked.
//! * Every other status is final: 400 and 422 mean the request (the query) is wrong, 401
//!   and 403 the credentials, 404 the URL or the job; asking again changes nothing.
//!
//! Alertmanager's own notifier retries the same way (every 5xx and 429), as does the
//! Prometheus remote-write client (5xx and 429).

/// 5xx statuses retrying cannot fix: 501 Not Implemented ("the server does not support
/// the functionality required") and 505 HTTP Version Not Supported, RFC 9110 §15.6.2 and
/// §15.6.6 <https://www.rfc-editor.org/rfc/rfc9110#section-15.6>.
pub const FINAL_5XX: [u16; 2] = [501, 505];

/// Whether an HTTP answer with this status is worth another attempt: 408, 429 and 5xx
/// but [`FINAL_5XX`] (see the module's documentation for the reasons).
pub fn retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || ((500..600).contains(&status) && !FINAL_5XX.contains(&status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_rate_limits_and_server_errors_are_retried_and_nothing_else() {
        for status in [408, 429, 500, 502, 503, 504, 507, 599] {
            assert!(retryable_status(status), "{status}");
        }
        for status in [200, 204, 301, 400, 401, 403, 404, 409, 413, 422, 501, 505, 600] {
            assert!(!retryable_status(status), "{status}");
        }
    }

    #[test]
    fn of_the_whole_5xx_range_only_501_and_505_are_final() {
        let final_5xx: Vec<u16> = (500..600).filter(|s| !retryable_status(*s)).collect();
        assert_eq!(final_5xx, FINAL_5XX.to_vec());
    }
}
