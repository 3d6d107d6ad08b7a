//! Signed, expiring links to verdict pages: a browser opening a link from Slack or
//! PagerDuty cannot send the API's bearer token, so the link carries its own proof.
//!
//! `{external_url}/verdicts/{id}?expires={unix_s}&sig={hex}` where `sig` is the lowercase
//! hex HMAC-SHA256, keyed with `server.link_secret`, of `"{id}.{expires}.{binding}"`, the
//! binding being the verdict's job id, job name and diagnosis time. A link is good until
//! `expires` and only for the verdict it was made for: ids are numbers a store hands out
//! again after it is reset or replaced, and replicas share one secret, so the id alone
//! would open another job's verdict. A changed id, expiry or signature, or a verdict under
//! that id that is not the one signed, fails the check (compared in constant time).

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Why a link does not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkError {
    /// No `expires` or `sig`.
    Unsigned,
    /// `expires` has passed.
    Expired,
    /// The signature does not match the id, expiry and verdict.
    Invalid,
}

impl LinkError {
    /// One sentence for the page that says why.
    pub fn explain(self) -> &'static str {
        match self {
            LinkError::Unsigned => {
                "This link is not signed. Open the verdict from its Slack or PagerDuty link, or ask the API with its credentials."
            }
            LinkError::Expired => "This link has expired. Ask the API for the verdict, or open a newer notification.",
            LinkError::Invalid => {
                "This link's signature is not valid: the link was changed or was not made by this culprit."
            }
        }
    }
}

/// What ties a link to one verdict beyond its id, from the verdict as JSON (as stored):
/// the job's id and name and the diagnosis time. A later verdict under a reused id differs
/// in one of them.
pub fn binding(verdict: &serde_json::Value) -> String {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    format!("{}.{}.{}", text(&verdict["job"]["id"]), text(&verdict["at"]), text(&verdict["job"]["name"]))
}

fn mac(key: &[u8], id: i64, expires_s: i64, binding: &str) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(format!("{id}.{expires_s}.{binding}").as_bytes());
    mac
}

/// The signature of a link to verdict `id` (with [`binding`] `binding`) good until
/// `expires_s` (Unix seconds).
pub fn sign(key: &[u8], id: i64, expires_s: i64, binding: &str) -> String {
    hex::encode(mac(key, id, expires_s, binding).finalize().into_bytes())
}

/// The signed link to verdict `id` (with [`binding`] `binding`):
/// `{base}/verdicts/{id}?expires=…&sig=…`.
pub fn signed_url(base: &str, key: &[u8], id: i64, binding: &str, now_ms: i64, expiry_ms: i64) -> String {
    let expires = (now_ms + expiry_ms).div_euclid(1000);
    let sig = sign(key, id, expires, binding);
    format!("{}/verdicts/{id}?expires={expires}&sig={sig}", base.trim_end_matches('/'))
}

/// Checks a link's `expires` and `sig` at `now_ms` against the verdict stored as `id`, by
/// its [`binding`] (`None`: no verdict is stored as `id`, and no signature opens it).
pub fn check(
    key: &[u8],
    id: i64,
    binding: Option<&str>,
    expires: Option<&str>,
    sig: Option<&str>,
    now_ms: i64,
) -> Result<(), LinkError> {
    let (Some(expires), Some(sig)) = (expires, sig) else {
        return Err(LinkError::Unsigned);
    };
    let Ok(expires_s) = expires.parse::<i64>() else {
        return Err(LinkError::Invalid);
    };
    let Ok(sig) = hex::decode(sig) else {
        return Err(LinkError::Invalid);
    };
    let Some(binding) = binding else {
        return Err(LinkError::Invalid);
    };
    mac(key, id, expires_s, binding).verify_slice(&sig).map_err(|_| LinkError::Invalid)?;
    if now_ms.div_euclid(1000) > expires_s {
        return Err(LinkError::Expired);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_of_id_dot_expiry() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let mut m = HmacSha256::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(m.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let mut m = HmacSha256::new_from_slice(b"k").unwrap();
        m.update(b"42.1800000000.job-a.2026-11-29T10:36:27.78Z.bp-lab");
        assert_eq!(
            sign(b"k", 42, 1_800_000_000, "job-a.2026-11-29T10:36:27.78Z.bp-lab"),
            hex::encode(m.finalize().into_bytes())
        );
    }

    #[test]
    fn a_link_opens_until_it_expires_and_never_when_changed() {
        let now = 1_795_000_000_000;
        let week = 7 * 24 * 3600 * 1000;
        let b = "job-a.2026-11-29T10:36:27.78Z.bp-lab";
        let url = signed_url("https://c.example/", b"key", 42, b, now, week);
        let q: std::collections::HashMap<&str, &str> =
            url.split_once('?').unwrap().1.split('&').map(|kv| kv.split_once('=').unwrap()).collect();
        // now + a week = 1 795 000 000 s + 604 800 s.
        assert!(url.starts_with("https://c.example/verdicts/42?expires=1795604800&sig="), "{url}");
        let (e, sig) = (Some(q["expires"]), Some(q["sig"]));
        assert_eq!(check(b"key", 42, Some(b), e, sig, now), Ok(()));
        assert_eq!(check(b"key", 42, Some(b), e, sig, now + week + 1000), Err(LinkError::Expired));
        assert_eq!(check(b"key", 43, Some(b), e, sig, now), Err(LinkError::Invalid));
        assert_eq!(check(b"other", 42, Some(b), e, sig, now), Err(LinkError::Invalid));
        assert_eq!(check(b"key", 42, Some(b), Some("1795604801"), sig, now), Err(LinkError::Invalid));
        assert_eq!(check(b"key", 42, Some(b), None, None, now), Err(LinkError::Unsigned));
        assert_eq!(check(b"key", 42, Some(b), e, Some("zz"), now), Err(LinkError::Invalid));
        assert_eq!(check(b"key", 42, None, e, sig, now), Err(LinkError::Invalid));
        // The picture: the same query string on `{id}.png`; none for an unsigned or API link.
        use crate::model::notice::picture_link;
        assert_eq!(picture_link(&url).unwrap(), url.replace("/verdicts/42?", "/verdicts/42.png?"));
        assert_eq!(picture_link("https://c.example/verdicts/7"), None);
        assert_eq!(picture_link("https://c.example/api/v1/verdicts/7?sig=ab"), None);
        assert_eq!(picture_link("https://c.example/verdicts/7?expires=1"), None);
    }

    #[test]
    fn a_link_never_opens_another_verdict_stored_under_its_id() {
        // A store that is reset (or replaced) hands id 1 out again; replicas share the secret.
        let json = |v: &crate::model::verdict::Verdict| serde_json::to_value(v).unwrap();
        let verdicts: Vec<serde_json::Value> = crate::samples::captures::CAPTURES
            .iter()
            .map(|c| json(&crate::samples::captures::verdict(c).unwrap()))
            .collect();
        let first = &verdicts[0];
        let url = signed_url("https://c.example", b"key", 1, &binding(first), 0, 3_600_000);
        let q: std::collections::HashMap<&str, &str> =
            url.split_once('?').unwrap().1.split('&').map(|kv| kv.split_once('=').unwrap()).collect();
        let (e, sig) = (Some(q["expires"]), Some(q["sig"]));
        let other_job = verdicts.iter().find(|v| v["job"]["id"] != first["job"]["id"]).unwrap();
        assert_eq!(check(b"key", 1, Some(&binding(other_job)), e, sig, 0), Err(LinkError::Invalid));
        let mut same_job_later = first.clone();
        same_job_later["at"] = "2026-12-01T00:00:00Z".into();
        assert_eq!(check(b"key", 1, Some(&binding(&same_job_later)), e, sig, 0), Err(LinkError::Invalid));
        assert_eq!(check(b"key", 1, Some(&binding(first)), e, sig, 0), Ok(()));
    }
}
