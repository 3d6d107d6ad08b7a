//! A raw HTTP/1.1 stand-in for chat vendors (Mattermost, Discord): each test gives the
//! vendor's behaviour as a handler; the stand-in records every request and can take a
//! request whole and then drop the connection without answering (a crash mid-send).
//! Every answer closes its connection, so each request is its own.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request as the stand-in read it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path without the query.
    pub path: String,
    pub query: String,
    pub body: String,
    pub at: std::time::Instant,
}

impl Request {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// What the stand-in does with a request.
pub enum Reply {
    Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Read the request, then close the connection without a byte of answer.
    Drop,
}

impl Reply {
    pub fn json(status: u16, body: serde_json::Value) -> Reply {
        Reply::Answer {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }
    pub fn text(status: u16, body: &str) -> Reply {
        Reply::Answer { status, headers: vec![("content-type".into(), "text/plain".into())], body: body.into() }
    }
    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Answer { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

pub struct Stand {
    pub url: String,
    received: Arc<Mutex<Vec<Request>>>,
}

impl Stand {
    pub async fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Stand {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let rec = received.clone();
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else { return };
                let (handler, rec) = (handler.clone(), rec.clone());
                tokio::spawn(async move { serve(socket, handler, rec).await });
            }
        });
        Stand { url, received }
    }

    /// Every request received, in order.
    pub fn received(&self) -> Vec<Request> {
        self.received.lock().unwrap().clone()
    }
}

async fn serve(mut socket: tokio::net::TcpStream, handler: Arc<Handler>, rec: Arc<Mutex<Vec<Request>>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let target = first.next().unwrap_or_default().to_string();
    let length: usize = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let (path, query) = target.split_once('?').map_or((target.clone(), String::new()), |(p, q)| (p.into(), q.into()));
    let request =
        Request { method, path, query, body: String::from_utf8_lossy(&body).into(), at: std::time::Instant::now() };
    rec.lock().unwrap().push(request.clone());
    match handler(&request) {
        Reply::Drop => drop(socket),
        Reply::Answer { status, headers, body } => {
            let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
            for (k, v) in headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str("\r\n");
            out.push_str(&body);
            let _ = socket.write_all(out.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    }
}
