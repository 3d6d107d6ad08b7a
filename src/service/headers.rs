//! The security headers of every answer of `culprit serve`.
//!
//! The verdict page opens without credentials from a link whose signature is as good as a
//! bearer token until it expires, and it shows names taken from alerts and metrics (escaped,
//! this is defence in depth). So every answer says:
//!
//! * `Content-Security-Policy`: nothing may load or run — no script, image, font, frame,
//!   fetch or form target — but the pages' own style sheets, allowed by their SHA-256
//!   ([`CSP`]); no page may be framed (`frame-ancestors 'none'`).
//! * `X-Content-Type-Options: nosniff`: a JSON or text answer is never taken for HTML.
//! * `Cache-Control: no-store`: neither a browser nor a proxy keeps a verdict (an answer
//!   that sets its own caching keeps it).
//! * `Referrer-Policy: no-referrer`: the signed URL never leaves in a `Referer`.

use std::sync::LazyLock;

use axum::http::{HeaderValue, header};
use axum::response::Response;
use sha2::{Digest, Sha256};

/// The style sheet of the page saying why a verdict link does not open.
pub const DENIED_CSS: &str = "body{font:16px system-ui,sans-serif;max-width:640px;margin:40px auto}";

/// The Content-Security-Policy: `default-src 'none'`, the style sheets of the verdict page
/// ([`crate::render::html::CSS`]) and of the refusal page ([`DENIED_CSS`]) by hash, and
/// the directives `default-src` does not cover (`base-uri`, `form-action`,
/// `frame-ancestors`) closed too.
pub static CSP: LazyLock<String> = LazyLock::new(|| {
    use base64::Engine as _;
    let hash = |css: &str| {
        format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(Sha256::digest(css.as_bytes())))
    };
    format!(
        "default-src 'none'; style-src {} {}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        hash(crate::render::html::CSS),
        hash(DENIED_CSS)
    )
});

static CSP_VALUE: LazyLock<HeaderValue> = LazyLock::new(|| HeaderValue::from_str(&CSP).expect("the policy is ASCII"));

/// `response` with the security headers.
pub fn secure(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, CSP_VALUE.clone());
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of every `<style>` element of `page`.
    fn style_sheets(page: &str) -> Vec<&str> {
        page.split("<style>").skip(1).map(|rest| rest.split("</style>").next().unwrap()).collect()
    }

    #[test]
    fn the_policy_allows_the_style_sheets_the_pages_have_by_hash_and_nothing_else() {
        use base64::Engine as _;
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == "hot-key").unwrap();
        let page = crate::render::html::page(&crate::samples::captures::verdict(capture).unwrap());
        let sheets = style_sheets(&page);
        assert_eq!(sheets.len(), 1);
        assert!(!page.contains("style=\"") && !page.contains("<script"), "inline style or script");
        for sheet in sheets.into_iter().chain([DENIED_CSS]) {
            let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(sheet.as_bytes()));
            assert!(CSP.contains(&format!("'sha256-{hash}'")), "{sheet} is not allowed by {}", *CSP);
        }
        assert!(CSP.starts_with("default-src 'none'; ") && !CSP.contains("unsafe"), "{}", *CSP);
    }
}
