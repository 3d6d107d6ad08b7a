//! Email over SMTP: one message per notice to the configured recipients, threaded per
//! episode. SMTP is spoken by `lettre` (rustls, no native TLS).
//!
//! * Which notices: a verdict (its first post and a changed verdict), a resolution and
//!   "could not diagnose". A revision (the same decision with other confidence or numbers)
//!   is not mailed: an inbox cannot update a message in place, and a mail per changed
//!   number is noise; nor are the notices of alert groups joining or leaving a verdict.
//! * The message ([`crate::render::email`]): multipart/alternative, a text part and the
//!   verdict page; `Message-ID` derived from the idempotency key, so a notice sent twice
//!   has one id, which mail systems fold; `In-Reply-To`/`References` to the episode's
//!   messages, so clients thread updates and the resolution under the first message.
//! * A repeat: SMTP cannot be asked whether a message arrived ([`Destination::already_sent`]
//!   stays "unknown"), so a notice sent again after an unknown outcome
//!   ([`Notice::maybe_repeat`]) keeps its `Message-ID` and starts with the mark
//!   [`crate::render::email::REPEAT_MARK`].
//! * The connection: `tls = "starttls"` (default) requires STARTTLS (a relay that does not
//!   offer it is refused, never used in the clear); `"tls"` is TLS from the first byte;
//!   `"none"` is allowed for loopback only (validation refuses it otherwise). The relay's
//!   certificate is checked against the system's roots plus `ca_file`.
//!
//! Answers (RFC 5321 section 4.2.1, <https://www.rfc-editor.org/rfc/rfc5321#section-4.2.1>):
//! a 4yz reply ("Transient Negative Completion": 421, 450, 451, 452, …) is retryable; a 5yz
//! reply is final, with a hint naming the key to fix (`to`, `from`, `username`/`password`).
//! A connection or TLS handshake that fails is `connect` (nothing was sent); a connection
//! that breaks or an answer that cannot be read during the dialogue is `transport`/
//! `bad_answer`, and no answer in time is `timeout`: the message may have arrived (after
//! DATA the relay may have queued it).
//!
//! The password is a secret: never in `Debug`, errors or logs.

mod config;

pub use config::{EmailConfig, EmailTls, is_loopback};

use std::fmt;
use std::time::{Duration, UNIX_EPOCH};

use futures::future::BoxFuture;
use lettre::message::header::ContentType;
use lettre::message::{Attachment, Mailbox, MultiPart, SinglePart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::model::secret::Redactor;
use crate::notify::digest;
use crate::notify::{DETAIL_CHARS, Destination, FailureReason, NotifyError, Sent};

/// Time one SMTP command may wait for its answer (lettre's timeout, per command).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// An SMTP destination. `Debug` shows no secret.
pub struct Email {
    name: String,
    host: String,
    port: u16,
    tls: EmailTls,
    username: Option<String>,
    password: Option<SecretString>,
    from: Mailbox,
    to: Vec<Mailbox>,
    transport: AsyncSmtpTransport<Tokio1Executor>,
}

impl fmt::Debug for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Email")
            .field("name", &self.name)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "[REDACTED]"))
            .finish_non_exhaustive()
    }
}

impl Email {
    /// The notifier from its configuration; reads the password and `ca_file` now.
    ///
    /// Errors (naming `email:<name>`, never the password): an empty name, addresses that
    /// do not parse, `tls = "none"` off loopback, a secret or CA file that cannot be read.
    pub fn new(cfg: &EmailConfig) -> Result<Self, String> {
        if cfg.name.trim().is_empty() {
            return Err("email: `name` is empty".into());
        }
        let what = format!("email:{}", cfg.name);
        let from: Mailbox = cfg.from.parse().map_err(|_| format!("{what}: `from` is not an email address"))?;
        let to = cfg
            .to
            .iter()
            .enumerate()
            .map(|(i, t)| t.parse::<Mailbox>().map_err(|_| format!("{what}: to[{i}] is not an email address")))
            .collect::<Result<Vec<_>, _>>()?;
        if to.is_empty() {
            return Err(format!("{what}: `to` lists no recipient"));
        }
        if cfg.tls == EmailTls::None && !is_loopback(&cfg.smtp_host) {
            return Err(format!("{what}: tls = \"none\" is only allowed for a relay on loopback"));
        }
        let password =
            cfg.password.as_ref().map(|p| p.resolve().map_err(|e| format!("{what}: password: {e}"))).transpose()?;
        let tls = match cfg.tls {
            EmailTls::None => Tls::None,
            mode => {
                let mut params = TlsParameters::builder(cfg.smtp_host.clone());
                if let Some(path) = &cfg.ca_file {
                    let pem = std::fs::read(path)
                        .map_err(|e| format!("{what}: ca_file {} cannot be read: {e}", path.display()))?;
                    let cert = Certificate::from_pem(&pem)
                        .map_err(|_| format!("{what}: ca_file {} holds no PEM certificate", path.display()))?;
                    params = params.add_root_certificate(cert);
                }
                let params = params.build_rustls().map_err(|e| format!("{what}: TLS settings: {e}"))?;
                if mode == EmailTls::Starttls { Tls::Required(params) } else { Tls::Wrapper(params) }
            }
        };
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(cfg.smtp_host.clone())
            .port(cfg.smtp_port)
            .tls(tls)
            .timeout(Some(COMMAND_TIMEOUT));
        match (&cfg.username, &password) {
            (Some(u), Some(p)) => {
                builder = builder.credentials(Credentials::new(u.clone(), p.expose_secret().to_string()));
            }
            (None, None) => {}
            _ => return Err(format!("{what}: `username` and `password` go together")),
        }
        Ok(Email {
            name: cfg.name.clone(),
            host: cfg.smtp_host.clone(),
            port: cfg.smtp_port,
            tls: cfg.tls,
            username: cfg.username.clone(),
            password,
            from,
            to,
            transport: builder.build(),
        })
    }

    fn what(&self) -> String {
        format!("email:{}", self.name)
    }

    /// The domain of `from`: the domain of every `Message-ID`.
    fn domain(&self) -> String {
        self.from.email.domain().to_string()
    }

    /// A verdict's first post or a changed verdict, a resolution, "could not diagnose".
    pub fn wants(&self, notice: &Notice) -> bool {
        match notice.kind {
            NoticeKind::Verdict => !notice.is_revision(),
            // An incident: one summary and a digest a minute at most ([`digest`]).
            NoticeKind::Resolved | NoticeKind::CouldNotDiagnose | NoticeKind::Incident => true,
            NoticeKind::Joined | NoticeKind::GroupResolved => false,
        }
    }

    /// The message of `notice`, answering the episode's last message kept in `state`.
    pub fn message(&self, notice: &Notice, state: Option<&Value>) -> Result<(Message, String), NotifyError> {
        let previous = state.and_then(|s| s.get("message_id")).and_then(Value::as_str);
        self.build(crate::render::email::email(notice, &self.domain(), previous), notice.at_ms)
    }

    /// The message of a rendered email dated `at_ms`, and its id.
    fn build(&self, e: crate::render::email::Email, at_ms: i64) -> Result<(Message, String), NotifyError> {
        let what = self.what();
        let mut b = Message::builder()
            .from(self.from.clone())
            .subject(e.subject.clone())
            .message_id(Some(e.message_id.clone()))
            .date(UNIX_EPOCH + Duration::from_millis(at_ms.max(0) as u64));
        for t in &self.to {
            b = b.to(t.clone());
        }
        if let Some(r) = &e.in_reply_to {
            b = b.in_reply_to(r.clone());
        }
        if !e.references.is_empty() {
            b = b.references(e.references.join(" "));
        }
        let body = match e.picture {
            // The HTML and its picture together (multipart/related), the text beside them.
            Some(png) => MultiPart::alternative().singlepart(SinglePart::plain(e.text)).multipart(
                MultiPart::related().singlepart(SinglePart::html(e.html)).singlepart(
                    Attachment::new_inline(crate::render::email::PICTURE_CID.to_string())
                        .body(png, ContentType::parse("image/png").expect("a valid content type")),
                ),
            ),
            None => MultiPart::alternative_plain_html(e.text, e.html),
        };
        let m = b
            .multipart(body)
            .map_err(|err| NotifyError::fatal(format!("{what}: the message cannot be built: {err}")))?;
        Ok((m, e.message_id))
    }

    /// Sends the message once. `Ok` keeps `{"message_id": "<…>", "first": "<…>"}` (the
    /// episode's first message), for the next notice of the episode to answer.
    pub async fn send(&self, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        let what = self.what();
        if notice.kind == NoticeKind::Incident {
            return self.send_incident(notice, state).await;
        }
        if digest::stays_folded(notice, state) {
            return Ok(Sent { state: state.cloned() });
        }
        if let Some(folded) = digest::fold(notice, state) {
            return Ok(folded);
        }
        if notice.kind == NoticeKind::Verdict && notice.verdict.is_none() {
            return Err(NotifyError::fatal(format!("{what}: a verdict notice without a verdict")));
        }
        let (message, id) = self.message(notice, state)?;
        self.deliver(message, &id, notice.maybe_repeat).await?;
        let first = state.and_then(|s| s.get("first")).and_then(Value::as_str).unwrap_or(&id).to_string();
        Ok(Sent { state: Some(json!({ "message_id": id, "first": first })) })
    }

    /// An incident's summary, then its digests at most once a [`digest::DIGEST_INTERVAL`],
    /// each answering the one before.
    async fn send_incident(&self, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        let now = jiff::Timestamp::now().as_millisecond();
        match digest::step(notice, state, now) {
            digest::Step::Keep => Ok(Sent { state: state.cloned() }),
            digest::Step::Later(after) => {
                Err(NotifyError::later("email: the incident's next digest is not due", after))
            }
            digest::Step::Post { incident, shown } => {
                let previous = state.and_then(|s| s.get("message_id")).and_then(Value::as_str);
                let e = crate::render::email::incident_email(notice, incident, shown, &self.domain(), previous);
                let (message, id) = self.build(e, now)?;
                self.deliver(message, &id, notice.maybe_repeat).await?;
                let mut kept = digest::posted(state, incident, now);
                kept["message_id"] = json!(id);
                Ok(Sent { state: Some(kept) })
            }
        }
    }

    /// Hands one message to the relay.
    async fn deliver(&self, message: Message, id: &str, maybe_repeat: bool) -> Result<(), NotifyError> {
        let what = self.what();
        match self.transport.send(message).await {
            Ok(_) => {
                tracing::debug!(destination = %what, message_id = %id, maybe_repeat, "email: accepted by the relay");
                Ok(())
            }
            Err(e) => {
                let e = self.classify(&e);
                tracing::debug!(destination = %what, retryable = e.retryable, reason = e.reason.as_str(), "email: not delivered");
                Err(e)
            }
        }
    }

    fn redactor(&self) -> Redactor {
        let mut r = Redactor::new();
        if let Some(p) = &self.password {
            r.add(p.expose_secret());
            if let Some(u) = &self.username {
                r.add_basic(u, p.expose_secret());
            }
        }
        r
    }

    /// Classifies a failure of lettre (see the module docs). The relay's own words are
    /// logged, redacted and cut, never put in the error.
    fn classify(&self, e: &lettre::transport::smtp::Error) -> NotifyError {
        let what = self.what();
        let redactor = self.redactor();
        let detail = redactor.redact_cut(&error_chain(e), DETAIL_CHARS);
        tracing::warn!(destination = %what, detail = %detail, "email: the relay or connection failed");
        let at = format!("the [[notify.email]] named {:?}", self.name);
        if let Some(code) = e.status() {
            let code = code.to_string();
            if e.is_transient() {
                return NotifyError::retry(format!("{what}: the relay answered {code} (temporary)"), None)
                    .because(FailureReason::ServerError);
            }
            return NotifyError::fatal(format!("{what}: the relay answered {code}"))
                .hint(Some(permanent_hint(&code, &at)));
        }
        if e.is_timeout() {
            return NotifyError::retry(format!("{what}: timed out: {detail}"), None).because(FailureReason::Timeout);
        }
        let text = e.to_string();
        if e.is_client() {
            let hint = if text.contains("STARTTLS") {
                format!(
                    "the relay at smtp_host of {at} does not offer STARTTLS: use its submission port with STARTTLS, tls = \"tls\" for implicit TLS (port 465), or a relay on loopback with tls = \"none\""
                )
            } else if text.to_ascii_lowercase().contains("authentication") {
                format!(
                    "the relay offers no AUTH mechanism culprit speaks (PLAIN, LOGIN): check username and password of {at}, and whether this relay wants AUTH at all"
                )
            } else {
                format!("check smtp_host, smtp_port and tls of {at}")
            };
            return NotifyError::fatal(format!("{what}: {detail}")).hint(Some(hint));
        }
        // lettre's errors name their kind first: "Connection error" while connecting (and
        // in the TLS handshake), "network error" during the dialogue.
        if text.starts_with("Connection error") || e.is_tls() {
            return NotifyError::retry(format!("{what}: cannot connect: {detail}"), None)
                .because(FailureReason::Connect);
        }
        if e.is_response() {
            return NotifyError::retry(format!("{what}: the relay's answer cannot be read: {detail}"), None)
                .because(FailureReason::BadAnswer);
        }
        NotifyError::retry(format!("{what}: the connection broke: {detail}"), None).because(FailureReason::Transport)
    }

    /// For `check-config --connect`: connects, STARTTLS (or TLS), EHLO, AUTH when
    /// configured, NOOP and QUIT. No message is sent, so whether the relay takes `from` and
    /// each of `to` is not verified.
    pub async fn probe(&self) -> Result<String, NotifyError> {
        match self.transport.test_connection().await {
            Ok(true) => Ok(format!(
                "{}:{} answered: {}EHLO{} accepted; no message was sent, so the from and to addresses are not verified",
                self.host,
                self.port,
                match self.tls {
                    EmailTls::Starttls => "STARTTLS, ",
                    EmailTls::Tls => "TLS, ",
                    EmailTls::None => "",
                },
                if self.username.is_some() { " and AUTH" } else { "" }
            )),
            Ok(false) => Err(NotifyError::retry(format!("{}: the relay did not answer NOOP", self.what()), None)
                .because(FailureReason::BadAnswer)),
            Err(e) => Err(self.classify(&e)),
        }
    }
}

/// What to do about a permanent (5yz) reply, by its code (RFC 5321 section 4.2.3 and the
/// enhanced codes of RFC 3463): names the key, never the password.
fn permanent_hint(code: &str, at: &str) -> String {
    match code {
        "535" | "534" | "530" | "538" => {
            format!(
                "the relay refused the login: check username and password of {at} (and tls: many relays take AUTH only over TLS)"
            )
        }
        "550" | "551" | "553" | "556" => {
            format!(
                "the relay refused a recipient or the sender: check to and from of {at} (the relay may also refuse to relay for this sender)"
            )
        }
        "552" => format!("the relay refused the message's size: raise its limit for {at}"),
        "554" => {
            format!("the relay refused the message (policy or spam filter): its answer is logged; check from of {at}")
        }
        _ => format!(
            "the relay refused the message for good: its answer is logged; check smtp_host, from and to of {at}"
        ),
    }
}

/// The error and its sources, each once.
fn error_chain(e: &lettre::transport::smtp::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

impl Destination for Email {
    fn name(&self) -> String {
        self.what()
    }
    fn wants(&self, notice: &Notice) -> bool {
        Email::wants(self, notice)
    }
    fn send<'a>(&'a self, notice: &'a Notice, state: Option<&'a Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(Email::send(self, notice, state))
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(Email::probe(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_localhost_or_a_loopback_address() {
        for h in ["localhost", "127.0.0.1", "127.0.0.2", "::1", "[::1]"] {
            assert!(is_loopback(h), "{h}");
        }
        for h in ["smtp.example.com", "10.0.0.1", "localhost.example.com"] {
            assert!(!is_loopback(h), "{h}");
        }
    }

    #[test]
    fn a_permanent_login_refusal_names_username_and_password() {
        assert!(permanent_hint("535", "x").contains("username and password of x"));
        assert!(permanent_hint("550", "x").contains("to and from of x"));
    }
}
