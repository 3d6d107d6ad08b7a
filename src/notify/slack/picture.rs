//! The verdict's picture ([`crate::render::png`]) uploaded into its thread
//! ([`SlackImage::Upload`], web_api mode), by Slack's external upload (`files.upload` is
//! retired):
//!
//! 1. `files.getUploadURLExternal` (`filename`, `length`, `alt_txt`) answers an
//!    `upload_url` and a `file_id`;
//! 2. the PNG's bytes are POSTed to the `upload_url` (which carries its own authority: the
//!    token is never sent there);
//! 3. `files.completeUploadExternal` (`files: [{id, title}]`, `channel_id`, `thread_ts`)
//!    shares the file in the verdict's thread, paced as a post.
//!
//! After the verdict's message and its details: a picture that cannot be drawn, uploaded
//! or shared is logged as a warning and the notice is still sent, so it is never retried
//! (which would post the verdict again). <https://docs.slack.dev/messaging/working-with-files#uploading_files>

use std::time::Duration;

use serde_json::{Value, json};

use super::{Failure, Parent, Slack, SlackImage, classify_failure};
use crate::model::notice::{Notice, NoticeKind};
use crate::notify::transport_error;

const GET_UPLOAD_URL: &str = "files.getUploadURLExternal";
const COMPLETE_UPLOAD: &str = "files.completeUploadExternal";

/// Longest `alt_txt` Slack takes (`alt_txt_too_large` beyond).
/// <https://docs.slack.dev/reference/methods/files.getUploadURLExternal/>
pub const MAX_ALT_TEXT: usize = 1000;

/// The most the three steps may take together: the verdict is posted, and its send waits
/// no longer than this for its picture.
pub const PICTURE_BUDGET: Duration = Duration::from_secs(20);

impl Slack {
    /// Shares the verdict's picture in `parent`'s thread when [`SlackImage::Upload`] and the
    /// notice is a verdict (first or changed, not a revision). Never fails: a failure is
    /// logged, the verdict having been posted.
    pub(super) async fn share_picture(&self, parent: &Parent, notice: &Notice) {
        if self.image != SlackImage::Upload || notice.kind != NoticeKind::Verdict || notice.is_revision() {
            return;
        }
        let result = match tokio::time::timeout(PICTURE_BUDGET, self.upload_picture(parent, notice)).await {
            Ok(r) => r,
            Err(_) => Err(format!("the upload took longer than {} s", PICTURE_BUDGET.as_secs())),
        };
        match result {
            Ok(file) => tracing::info!(destination = "slack", channel = %parent.channel, thread_ts = %parent.thread(),
                file = %file, "slack: the verdict's picture shared in the thread"),
            Err(e) => tracing::warn!(destination = "slack", error = %e,
                "slack: the verdict's picture was not shared; the verdict itself was posted"),
        }
    }

    /// The three steps; the file's id, or why not (no secret in it).
    async fn upload_picture(&self, parent: &Parent, notice: &Notice) -> Result<String, String> {
        let Some(verdict) = notice.verdict.clone() else { return Err("the notice has no verdict".into()) };
        let alt = crate::render::names::clip(&verdict.summary, MAX_ALT_TEXT).into_owned();
        let bytes = tokio::task::spawn_blocking(move || crate::render::png::png(&verdict))
            .await
            .map_err(|_| "drawing the picture failed".to_string())?
            .map_err(|e| e.to_string())?;
        let filename = match notice.verdict_id {
            Some(id) => format!("culprit-verdict-{id}.png"),
            None => "culprit-verdict.png".into(),
        };
        let length = bytes.len().to_string();
        let form = [("filename", filename.as_str()), ("length", length.as_str()), ("alt_txt", alt.as_str())];
        let request = self.request(GET_UPLOAD_URL, reqwest::Method::POST).form(&form);
        let answer = self.call(GET_UPLOAD_URL, request).await.map_err(|f| failed(GET_UPLOAD_URL, f))?;
        let text = |k: &str| answer.get(k).and_then(Value::as_str).map(str::to_string);
        let (Some(upload_url), Some(file_id)) = (text("upload_url"), text("file_id")) else {
            return Err(format!("slack: {GET_UPLOAD_URL} answered without upload_url and file_id"));
        };
        if !reqwest::Url::parse(&upload_url).is_ok_and(|u| matches!(u.scheme(), "https" | "http")) {
            return Err(format!("slack: {GET_UPLOAD_URL} answered an upload_url that is not http(s)"));
        }
        let what = "slack: the picture's upload";
        let response = self
            .client
            .post(&upload_url)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(bytes)
            .send()
            .await
            .map_err(|e| transport_error(what, &e.without_url()).message)?;
        if !response.status().is_success() {
            return Err(format!("{what}: HTTP {}", response.status().as_u16()));
        }
        let files = json!([{ "id": file_id, "title": filename }]).to_string();
        let form = [("files", files.as_str()), ("channel_id", parent.channel.as_str()), ("thread_ts", parent.thread())];
        self.pacer.wait(&parent.channel, self.home()).await;
        let request = self.request(COMPLETE_UPLOAD, reqwest::Method::POST).form(&form);
        let done = self.call(COMPLETE_UPLOAD, request).await;
        self.pacer.done(&parent.channel);
        done.map_err(|f| failed(COMPLETE_UPLOAD, f))?;
        Ok(file_id)
    }
}

fn failed(method: &str, f: Failure) -> String {
    classify_failure(method, f).message
}
