//! A Slack-style preview of a verdict message: the Block Kit blocks culprit's Slack
//! renderer makes for a bundled capture (with the picture as an image block and the
//! buttons), drawn as HTML that looks like Slack's message view, for the README's
//! screenshot (`scripts/slack_preview.sh` runs it and headless Chromium).
//!
//! It is an approximation of Slack's client, not Slack: the blocks are the real ones, the
//! HTML and CSS around them are ours. The picture is inlined (a data URI) in place of the
//! signed link Slack would fetch.
//!
//! ```sh
//! cargo run --example slack_preview -- [CAPTURE] > target/slack-preview.html
//! ```

use base64::Engine as _;
use culprit::model::notice::{Notice, NoticeEpisode, NoticeKind};
use culprit::render::slack::{Actions, message, with_actions, with_picture};
use serde_json::Value;

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "slow-sink".to_string());
    let Some(capture) = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == name) else {
        eprintln!("slack_preview: no bundled capture named {name:?}");
        std::process::exit(2);
    };
    let verdict = culprit::samples::captures::verdict(capture).expect("a bundled capture diagnoses");
    let png = culprit::render::png::png(&verdict).expect("the picture draws");
    let notice = Notice {
        kind: NoticeKind::Verdict,
        group_key: "{}:{alertname=\"FlinkJobBackpressured\"}".into(),
        labels: [("alertname".to_string(), "FlinkJobBackpressured".to_string())].into(),
        job: verdict.job.clone(),
        verdict: Some(verdict),
        verdict_id: Some(42),
        verdict_url: Some("https://culprit.example.com/verdicts/42?exp=1795000000&sig=preview".into()),
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: "preview".into(),
        at_ms: 1_795_000_000_000,
        links: Default::default(),
        episode: NoticeEpisode::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    };
    let msg =
        with_actions(with_picture(message(&notice), &notice), &notice, Actions { rediagnose: true, silence: true });
    let data = format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(&png));
    let blocks: String = msg.blocks.iter().map(|b| block(b, &data)).collect();
    println!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><style>{CSS}</style></head><body>\
         <div class=\"msg\"><div class=\"avatar\">c</div><div class=\"body\">\
         <div class=\"who\"><b>culprit</b> <span class=\"app\">APP</span> <span class=\"time\">11:06</span></div>\
         {blocks}<div class=\"thread\">2 replies</div></div></div></body></html>"
    );
}

const CSS: &str = "body{font-family:'Liberation Sans',Arial,sans-serif;font-size:15px;color:#1d1c1d;\
background:#fff;margin:0;padding:16px;width:560px}.msg{display:flex;gap:8px}.avatar{width:36px;height:36px;\
border-radius:6px;background:#b71c1c;color:#fff;font-weight:bold;display:flex;align-items:center;\
justify-content:center;flex:none}.body{flex:1;min-width:0}.who .app{font-size:10px;background:#eee;\
padding:1px 3px;border-radius:2px;color:#555}.time{color:#777;font-size:12px}.section{margin:4px 0;\
line-height:1.4;white-space:pre-wrap}.fields{display:grid;grid-template-columns:1fr 1fr;gap:4px 12px}\
.context{color:#616061;font-size:12.5px;margin:4px 0}.header{font-weight:bold;font-size:17px;margin:6px 0}\
code{background:#f6f6f6;border:1px solid #ddd;border-radius:3px;padding:0 2px;color:#c01343;font-size:13px}\
.divider{border-top:1px solid #ddd;margin:8px 0}.actions{display:flex;gap:8px;flex-wrap:wrap;margin:8px 0}\
.button{border:1px solid #bbb;border-radius:4px;padding:4px 12px;font-weight:bold;font-size:13px}\
.primary{background:#007a5a;color:#fff;border-color:#007a5a}.danger{color:#e01e5a;border-color:#e01e5a}\
img{max-width:100%;border:1px solid #ddd;border-radius:6px;margin:6px 0}.thread{color:#1264a3;font-size:13px;\
font-weight:bold;margin-top:4px}";

/// One Block Kit block as HTML (the types culprit's renderer makes).
fn block(b: &Value, picture: &str) -> String {
    match b["type"].as_str().unwrap_or_default() {
        "header" => format!("<div class=\"header\">{}</div>", text(&b["text"])),
        "section" => {
            let mut s = format!("<div class=\"section\">{}</div>", text(&b["text"]));
            if let Some(fields) = b["fields"].as_array() {
                let f: String = fields.iter().map(|f| format!("<div>{}</div>", text(f))).collect();
                s.push_str(&format!("<div class=\"section fields\">{f}</div>"));
            }
            s
        }
        "context" => {
            let parts: Vec<String> = b["elements"].as_array().into_iter().flatten().map(text).collect();
            format!("<div class=\"context\">{}</div>", parts.join(" "))
        }
        "divider" => "<div class=\"divider\"></div>".into(),
        "image" => format!("<img src=\"{picture}\" alt=\"{}\">", escape(b["alt_text"].as_str().unwrap_or_default())),
        "actions" => {
            let buttons: String = b["elements"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    let style = e["style"].as_str().unwrap_or("plain");
                    format!("<span class=\"button {style}\">{}</span>", text(&e["text"]))
                })
                .collect();
            format!("<div class=\"actions\">{buttons}</div>")
        }
        _ => String::new(),
    }
}

/// A text object as HTML: mrkdwn's `*bold*`, `` `code` `` and `<url|label>` links drawn,
/// everything else escaped (the renderer already escaped `&`, `<`, `>` Slack's way).
fn text(t: &Value) -> String {
    let raw = t["text"].as_str().or_else(|| t.as_str()).unwrap_or_default();
    let raw = raw.replace("&lt;", "\u{1}").replace("&gt;", "\u{2}").replace("&amp;", "\u{3}");
    let mut out = String::new();
    let mut rest = raw.as_str();
    while let Some(c) = rest.chars().next() {
        let len = c.len_utf8();
        match c {
            '<' => {
                let end = rest.find('>').unwrap_or(rest.len() - 1);
                let link = &rest[1..end];
                let label = link.split_once('|').map_or(link, |(_, l)| l);
                out.push_str(&format!("<u style=\"color:#1264a3\">{}</u>", escape(label)));
                rest = &rest[end + 1..];
                continue;
            }
            '`' => match rest[1..].find('`') {
                Some(end) => {
                    out.push_str(&format!("<code>{}</code>", escape(&rest[1..end + 1])));
                    rest = &rest[end + 2..];
                    continue;
                }
                None => out.push('`'),
            },
            '*' => match rest[1..].find('*') {
                Some(end) if end > 0 => {
                    out.push_str(&format!("<b>{}</b>", escape(&rest[1..end + 1])));
                    rest = &rest[end + 2..];
                    continue;
                }
                _ => out.push('*'),
            },
            _ => out.push_str(&escape(&c.to_string())),
        }
        rest = &rest[len..];
    }
    let out = out.replace('\u{1}', "&lt;").replace('\u{2}', "&gt;").replace('\u{3}', "&amp;");
    // Slack draws its emoji codes; a dot in their colour stands in for them here.
    [
        ("red_circle", "#e01e5a"),
        ("large_orange_circle", "#f2994a"),
        ("large_yellow_circle", "#ecb22e"),
        ("large_green_circle", "#2eb67d"),
        ("white_check_mark", "#2eb67d"),
        ("warning", "#ecb22e"),
    ]
    .iter()
    .fold(out, |s, (code, colour)| s.replace(&format!(":{code}:"), &format!("<span style=\"color:{colour}\">●</span>")))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
