//! Scripted stand-ins for the clients' tests: loopback HTTP/1.1 servers
//! (for the HTTP embedder and the chat model), each request answered by a
//! script that can play error statuses, malformed replies and silence; and
//! an in-process chat model answering each kind of request by script.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use edudb::{ChatError, ChatModel, ChatReply, ChatRequest, LlmCost};
use serde_json::Value;

/// What a scripted server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Received {
    /// A header's value, by lowercase name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// How a scripted server answers one request.
pub enum Reply {
    Answer {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// Keep the connection open and say nothing.
    Silence,
}

pub fn answer(status: u16, body: impl Into<String>) -> Reply {
    Reply::Answer {
        status,
        headers: Vec::new(),
        body: body.into(),
    }
}

type Script = dyn Fn(usize, &Received) -> Reply + Send + Sync;

/// A loopback HTTP/1.1 server answering each request (numbered from 0) by
/// its script, one thread and one connection per request.
pub struct ScriptedServer {
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl ScriptedServer {
    pub fn start(
        script: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static,
    ) -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let counter = Arc::new(AtomicUsize::new(0));
        let log = Arc::clone(&received);
        // The accept loop lives until the test process ends.
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (script, counter, log) =
                    (Arc::clone(&script), Arc::clone(&counter), Arc::clone(&log));
                thread::spawn(move || {
                    let Some(request) = read_request(&stream) else {
                        return;
                    };
                    let number = counter.fetch_add(1, Ordering::SeqCst);
                    log.lock().unwrap().push(request.clone());
                    write_reply(stream, script(number, &request));
                });
            }
        });
        ScriptedServer { base_url, received }
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.received.lock().unwrap().len()
    }
}

fn read_request(stream: &TcpStream) -> Option<Received> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        let (name, value) = trimmed.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(Received {
        path,
        headers,
        body,
    })
}

fn write_reply(mut stream: TcpStream, reply: Reply) {
    match reply {
        Reply::Answer {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
        }
        Reply::Silence => thread::sleep(Duration::from_secs(30)),
    }
}

/// Answers a chat request, given how many of its kind came before.
type ChatScript = dyn Fn(&ChatRequest, usize) -> String + Send + Sync;

/// A chat model answering each kind of request (its schema name) by
/// script, every reply costing 20 prompt and 4 completion tokens; it
/// records what it was asked.
pub struct ScriptedChat {
    scripts: Vec<(&'static str, Box<ChatScript>)>,
    /// Every request, in order.
    pub seen: Mutex<Vec<ChatRequest>>,
}

impl ScriptedChat {
    /// A model that knows no request yet.
    pub fn new() -> ScriptedChat {
        ScriptedChat {
            scripts: Vec::new(),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Answers requests with schema `name` by `script`.
    pub fn on(
        mut self,
        name: &'static str,
        script: impl Fn(&ChatRequest, usize) -> String + Send + Sync + 'static,
    ) -> ScriptedChat {
        self.scripts.push((name, Box::new(script)));
        self
    }

    /// How many requests with schema `name` were made.
    pub fn asked(&self, name: &str) -> usize {
        let seen = self.seen.lock().unwrap();
        seen.iter().filter(|r| r.schema_name == name).count()
    }
}

impl std::fmt::Debug for ScriptedChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScriptedChat")
    }
}

impl ChatModel for ScriptedChat {
    fn chat(&self, requests: &[ChatRequest]) -> Result<(Vec<ChatReply>, LlmCost), ChatError> {
        let mut seen = self.seen.lock().unwrap();
        let mut replies = Vec::with_capacity(requests.len());
        for request in requests {
            let before = seen
                .iter()
                .filter(|r| r.schema_name == request.schema_name)
                .count();
            let Some((_, script)) = self.scripts.iter().find(|(n, _)| *n == request.schema_name)
            else {
                panic!("no script for {} requests", request.schema_name);
            };
            replies.push(ChatReply {
                content: script(request, before),
                truncated: false,
                prompt_tokens: 20,
                completion_tokens: 4,
            });
            seen.push(request.clone());
        }
        let cost = LlmCost {
            calls: replies.len() as u32,
            prompt_tokens: 20 * replies.len() as u64,
            completion_tokens: 4 * replies.len() as u64,
            millis: 1,
            ..LlmCost::default()
        };
        Ok((replies, cost))
    }

    fn identity(&self) -> String {
        "scripted".into()
    }
}
