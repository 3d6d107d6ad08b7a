//! Slack's request signatures: `X-Slack-Signature: v0=<hex>` is the HMAC-SHA256, keyed
//! with the app's signing secret, of `v0:{X-Slack-Request-Timestamp}:{raw body}`; a
//! request older (or newer) than [`MAX_AGE_S`] is refused as a possible replay.
//! <https://api.slack.com/authentication/verifying-requests-from-slack>

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// How far a request's timestamp may be from now, seconds: Slack's advice (5 minutes).
/// <https://api.slack.com/authentication/verifying-requests-from-slack#validating-a-request>
pub const MAX_AGE_S: i64 = 300;

/// The version prefix of the signature and of the signed text.
const VERSION: &str = "v0";

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No timestamp or signature header, or one that is not `v0=<hex>`.
    Unsigned,
    /// The timestamp is more than [`MAX_AGE_S`] from now.
    Stale,
    /// The signature does not match the body with any configured secret.
    Invalid,
}

impl Refused {
    pub fn explain(self) -> &'static str {
        match self {
            Refused::Unsigned => "the request carries no Slack signature",
            Refused::Stale => "the request's timestamp is more than 5 minutes from now",
            Refused::Invalid => "the Slack signature does not match",
        }
    }
}

/// Checks a request at `now_s` (Unix seconds) against `secret`; the comparison takes the
/// same time wherever the signatures differ (`hmac`'s `verify_slice`).
pub fn verify(
    secret: &[u8],
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now_s: i64,
) -> Result<(), Refused> {
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
        return Err(Refused::Unsigned);
    };
    let ts: i64 = timestamp.trim().parse().map_err(|_| Refused::Unsigned)?;
    let hex_part = signature.trim().strip_prefix("v0=").ok_or(Refused::Unsigned)?;
    let given = hex::decode(hex_part).map_err(|_| Refused::Unsigned)?;
    // Checked: a timestamp near i64's ends (sent by anyone) must not overflow.
    if now_s.checked_sub(ts).is_none_or(|d| d.unsigned_abs() > MAX_AGE_S as u64) {
        return Err(Refused::Stale);
    }
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(format!("{VERSION}:{timestamp}:").as_bytes());
    mac.update(body);
    mac.verify_slice(&given).map_err(|_| Refused::Invalid)
}

/// The `X-Slack-Signature` of `body` at `timestamp` (tests and stand-ins sign with it).
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(format!("{VERSION}:{timestamp}:").as_bytes());
    mac.update(body);
    format!("{VERSION}={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timestamp_at_either_end_of_i64_is_stale_not_a_panic() {
        for ts in [i64::MIN, i64::MAX, -1] {
            let t = ts.to_string();
            let sig = sign(b"s", ts, b"payload=x");
            assert_eq!(verify(b"s", Some(&t), Some(&sig), b"payload=x", 1_795_000_000), Err(Refused::Stale), "{ts}");
        }
    }

    /// Slack's documented example (the page linked above): its secret, timestamp, body and
    /// signature.
    const SECRET: &[u8] = b"8f742231b10e8888abcd99yyyzzz85a5";
    const TS: i64 = 1_531_420_618;
    const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SIG: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    #[test]
    fn slacks_documented_example_verifies() {
        assert_eq!(sign(SECRET, TS, BODY.as_bytes()), SIG);
        assert_eq!(verify(SECRET, Some("1531420618"), Some(SIG), BODY.as_bytes(), TS + 10), Ok(()));
    }

    #[test]
    fn a_changed_body_secret_or_timestamp_fails_and_an_old_request_is_a_replay() {
        let ok = |ts: &str, sig: &str, body: &str, secret: &[u8], now: i64| {
            verify(secret, Some(ts), Some(sig), body.as_bytes(), now)
        };
        let forged_body = BODY.replace("roadrunner", "coyote");
        assert_eq!(ok("1531420618", SIG, &forged_body, SECRET, TS), Err(Refused::Invalid));
        assert_eq!(ok("1531420618", SIG, BODY, b"another secret", TS), Err(Refused::Invalid));
        assert_eq!(ok("1531420619", SIG, BODY, SECRET, TS), Err(Refused::Invalid));
        // 300 s either way is inside the window; 301 s is not.
        assert_eq!(ok("1531420618", SIG, BODY, SECRET, TS + 300), Ok(()));
        assert_eq!(ok("1531420618", SIG, BODY, SECRET, TS + 301), Err(Refused::Stale));
        assert_eq!(ok("1531420618", SIG, BODY, SECRET, TS - 301), Err(Refused::Stale));
        assert_eq!(verify(SECRET, None, Some(SIG), BODY.as_bytes(), TS), Err(Refused::Unsigned));
        assert_eq!(ok("1531420618", &SIG[3..], BODY, SECRET, TS), Err(Refused::Unsigned));
        assert_eq!(ok("1531420618", "v0=zz", BODY, SECRET, TS), Err(Refused::Unsigned));
        assert_eq!(ok("soon", SIG, BODY, SECRET, TS), Err(Refused::Unsigned));
    }
}
