//! The verdict's picture as an image block ([`crate::notify::slack::SlackImage::Link`]):
//! Slack fetches it from its signed HTTPS link. Pure.

use serde_json::json;

use super::{MAX_BLOCKS, SlackMessage};
use crate::model::notice::{Notice, NoticeKind};

/// Longest `image_url` of an image block.
/// <https://docs.slack.dev/reference/block-kit/blocks/image-block/>
pub const MAX_IMAGE_URL: usize = 3000;
/// Longest `alt_text` of an image block (same page).
const MAX_ALT_TEXT: usize = 2000;

/// `msg` with an image block of the verdict's picture after its text (before its
/// buttons), for a verdict whose notice links its signed page over HTTPS and a message
/// with room for one more block; `msg` as it is otherwise.
pub fn with_picture(mut msg: SlackMessage, notice: &Notice) -> SlackMessage {
    let (Some(url), Some(v)) = (notice.picture_https(), &notice.verdict) else { return msg };
    if notice.kind != NoticeKind::Verdict || url.len() > MAX_IMAGE_URL || msg.blocks.len() >= MAX_BLOCKS {
        return msg;
    }
    let alt = crate::render::names::clip(&crate::render::names::clean(&v.summary), MAX_ALT_TEXT).into_owned();
    let block = json!({ "type": "image", "image_url": url, "alt_text": alt });
    let at = msg.blocks.iter().position(|b| b["type"] == "actions").unwrap_or(msg.blocks.len());
    msg.blocks.insert(at, block);
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(url: &str) -> Notice {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
        let v = crate::samples::captures::verdict(capture).unwrap();
        let mut n: Notice = serde_json::from_value(json!({
            "kind": "verdict", "group_key": "g", "labels": {}, "job": v.job, "verdict": v,
            "verdict_id": 7, "verdict_url": url, "reason": null, "firing": true, "changed": false,
            "idempotency_key": "k", "at_ms": 0
        }))
        .unwrap();
        n.maybe_repeat = false;
        n
    }

    #[test]
    fn a_signed_https_link_adds_an_image_block_before_the_buttons() {
        let n = notice("https://c.example/verdicts/7?expires=1&sig=ab");
        let msg = with_picture(super::super::message(&n), &n);
        let at = msg.blocks.iter().position(|b| b["type"] == "image").expect("an image block");
        assert_eq!(msg.blocks[at]["image_url"], "https://c.example/verdicts/7.png?expires=1&sig=ab");
        assert_eq!(msg.blocks[at + 1]["type"], "actions");
    }

    #[test]
    fn an_http_or_unsigned_link_adds_no_image() {
        for url in ["http://c.example/verdicts/7?expires=1&sig=ab", "https://c.example/api/v1/verdicts/7"] {
            let n = notice(url);
            let msg = with_picture(super::super::message(&n), &n);
            assert!(msg.blocks.iter().all(|b| b["type"] != "image"), "{url}");
        }
    }
}
