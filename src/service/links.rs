//! Signed, expiring links to verdict pages: a browser opening a link from Slack or
//! PagerDuty cannot send the API's bearer token, so the link carries its own proof.
//!
//! `{external_url}/verdicts/{id}?expires={unix_s}&sig={hex}` where `sig` is the lowercase
//! hex HMAC-SHA256, keyed with `server.link_secret`, of `"{id}.{expires}"`. A link is
//! good until `expires`; a changed id, expiry or signature fails the check (compared in
//! constant time).

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
    /// The signature does not match the id and expiry.
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

fn mac(key: &[u8], id: i64, expires_s: i64) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(format!("{id}.{expires_s}").as_bytes());
    mac
}

/// The signature of a link to verdict `id` good until `expires_s` (Unix seconds).
pub fn sign(key: &[u8], id: i64, expires_s: i64) -> String {
    hex::encode(mac(key, id, expires_s).finalize().into_bytes())
}

/// The signed link: `{base}/verdicts/{id}?expires=…&sig=…`.
pub fn signed_url(base: &str, key: &[u8], id: i64, now_ms: i64, expiry_ms: i64) -> String {
    let expires = (now_ms + expiry_ms).div_euclid(1000);
    format!("{}/verdicts/{id}?expires={expires}&sig={}", base.trim_end_matches('/'), sign(key, id, expires))
}

/// Checks a link's `expires` and `sig` at `now_ms`.
pub fn check(key: &[u8], id: i64, expires: Option<&str>, sig: Option<&str>, now_ms: i64) -> Result<(), LinkError> {
    let (Some(expires), Some(sig)) = (expires, sig) else {
        return Err(LinkError::Unsigned);
    };
    let Ok(expires_s) = expires.parse::<i64>() else {
        return Err(LinkError::Invalid);
    };
    let Ok(sig) = hex::decode(sig) else {
        return Err(LinkError::Invalid);
    };
    mac(key, id, expires_s).verify_slice(&sig).map_err(|_| LinkError::Invalid)?;
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
        assert_eq!(sign(b"k", 42, 1_800_000_000), hex::encode(mac(b"k", 42, 1_800_000_000).finalize().into_bytes()));
    }

    #[test]
    fn a_link_opens_until_it_expires_and_never_when_changed() {
        let now = 1_795_000_000_000;
        let week = 7 * 24 * 3600 * 1000;
        let url = signed_url("https://c.example/", b"key", 42, now, week);
        let q: std::collections::HashMap<&str, &str> =
            url.split_once('?').unwrap().1.split('&').map(|kv| kv.split_once('=').unwrap()).collect();
        assert!(url.starts_with("https://c.example/verdicts/42?expires=1795604800&sig="), "{url}");
        assert_eq!(check(b"key", 42, Some(q["expires"]), Some(q["sig"]), now), Ok(()));
        assert_eq!(check(b"key", 42, Some(q["expires"]), Some(q["sig"]), now + week + 1000), Err(LinkError::Expired));
        assert_eq!(check(b"key", 43, Some(q["expires"]), Some(q["sig"]), now), Err(LinkError::Invalid));
        assert_eq!(check(b"other", 42, Some(q["expires"]), Some(q["sig"]), now), Err(LinkError::Invalid));
        assert_eq!(check(b"key", 42, Some("1795604801"), Some(q["sig"]), now), Err(LinkError::Invalid));
        assert_eq!(check(b"key", 42, None, None, now), Err(LinkError::Unsigned));
        assert_eq!(check(b"key", 42, Some(q["expires"]), Some("zz"), now), Err(LinkError::Invalid));
    }
}
