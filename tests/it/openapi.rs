//! `edudb serve`'s OpenAPI document (`src/serve/openapi.json`, served at
//! `GET /openapi.json`) against the server itself: the document is well
//! formed, names exactly the routes the router has (and the module doc's
//! table lists), and every answer of a live server over the test fixture,
//! successes and errors, on every route of the document, is valid against
//! the schema the document gives for that route, status and media type;
//! a method a path lacks (405) and a path that is no route (404) against
//! the document's `MethodNotAllowed` and `NotFound` responses.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edudb::Db;
use edudb::serve::{CommandOutput, CommandRequest, CommandRunner, ServeOptions};
use serde_json::{Value, json};

use crate::serve::{Running, client, fixture, start, start_asking};
use crate::support;

/// The document as the server embeds it.
const DOCUMENT: &str = include_str!("../../src/serve/openapi.json");
/// The server's module, whose doc holds the route table.
const SERVER: &str = include_str!("../../src/serve/mod.rs");
/// The server's router.
const ROUTER: &str = include_str!("../../src/serve/routes.rs");
/// The HTTP methods an OpenAPI path item may hold.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// A route: upper-case method and path template.
type Route = (String, String);

/// The document, and what the requests sent through it found.
struct Spec {
    document: Value,
    /// Each route called, with the statuses it answered.
    exercised: RefCell<BTreeMap<Route, BTreeSet<u16>>>,
    /// Every answer that did not match the document.
    mismatches: RefCell<Vec<String>>,
}

/// Where requests go: a server's TCP address or its Unix socket, with a
/// bearer token or none.
struct Via<'a> {
    server: &'a Running,
    http: reqwest::Client,
    base: String,
    token: Option<&'a str>,
}

impl<'a> Via<'a> {
    fn tcp(server: &'a Running) -> Via<'a> {
        Via {
            server,
            http: server.client.clone(),
            base: format!("http://{}", server.bound.address),
            token: None,
        }
    }

    fn socket(server: &'a Running) -> Via<'a> {
        let socket = server.bound.socket.clone().expect("a socket");
        Via {
            server,
            http: client().unix_socket(socket).build().unwrap(),
            base: "http://store".into(),
            token: None,
        }
    }

    fn with_token(self, token: &'a str) -> Via<'a> {
        Via {
            token: Some(token),
            ..self
        }
    }
}

/// A request's body.
enum Body {
    None,
    /// JSON, with its content type.
    Json(Value),
    /// Bytes, with the content type given, if any.
    Raw(Vec<u8>, Option<&'static str>),
}

/// One answer: its route, status, `Allow` header and body (JSON, or the
/// text as a JSON string for a text answer).
struct Answer {
    route: String,
    status: u16,
    allow: Option<String>,
    body: Value,
}

impl Answer {
    /// The body, after checking the status.
    #[track_caller]
    fn expect(self, status: u16) -> Value {
        assert_eq!(
            self.status, status,
            "{} answered {}: {}",
            self.route, self.status, self.body
        );
        self.body
    }

    /// The error object, after checking the status and the error class.
    #[track_caller]
    fn error(self, status: u16, class: &str) -> Value {
        let route = self.route.clone();
        let body = self.expect(status);
        assert_eq!(body["error"]["class"], class, "{route}: {body}");
        body["error"].clone()
    }

    /// The methods of a 405's `Allow` header, after checking the status
    /// and the error class.
    #[track_caller]
    fn not_allowed(self) -> BTreeSet<String> {
        let allow = self.allow.clone();
        let route = self.route.clone();
        self.error(405, "user");
        let allow = allow.unwrap_or_else(|| panic!("{route}: a 405 without an Allow header"));
        allow
            .split(',')
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty())
            .collect()
    }
}

impl Spec {
    fn new(document: Value) -> Spec {
        Spec {
            document,
            exercised: RefCell::default(),
            mismatches: RefCell::default(),
        }
    }

    /// A validator of `schema`, a schema of the document: wrapped with the
    /// document's components, so that its `#/components/schemas/…`
    /// references resolve.
    fn validator(&self, schema: &Value) -> Result<jsonschema::Validator, String> {
        let wrapped = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "allOf": [schema],
            "components": self.document["components"],
        });
        jsonschema::draft202012::new(&wrapped).map_err(|e| format!("{schema}: {e}"))
    }

    /// The value a local `$ref` (`#/…`) points to.
    fn resolve<'v>(&'v self, value: &'v Value) -> &'v Value {
        match value.get("$ref").and_then(Value::as_str) {
            Some(reference) => self
                .document
                .pointer(reference.trim_start_matches('#'))
                .unwrap_or_else(|| panic!("{reference} does not resolve")),
            None => value,
        }
    }

    /// The path template of the document that `path` (no query string)
    /// is an instance of, if any.
    fn template(&self, path: &str) -> Option<String> {
        let segments: Vec<&str> = path.split('/').collect();
        let paths = self.document["paths"].as_object().expect("paths");
        paths
            .keys()
            .find(|template| {
                let parts: Vec<&str> = template.split('/').collect();
                parts.len() == segments.len()
                    && parts
                        .iter()
                        .zip(&segments)
                        .all(|(p, s)| p == s || (p.starts_with('{') && !s.is_empty()))
            })
            .cloned()
    }

    /// The methods of the document's path `template`, upper-case, with
    /// `HEAD` where there is `GET` (as a 405's `Allow` header lists them).
    fn methods(&self, template: &str) -> BTreeSet<String> {
        let item = &self.document["paths"][template];
        let mut methods: BTreeSet<String> = METHODS
            .iter()
            .filter(|m| item.get(**m).is_some())
            .map(|m| m.to_ascii_uppercase())
            .collect();
        if methods.contains("GET") {
            methods.insert("HEAD".into());
        }
        methods
    }

    /// The document's response `name` (`#/components/responses/…`).
    fn component_response(&self, name: &str) -> &Value {
        let response = &self.document["components"]["responses"][name];
        assert!(response.is_object(), "no component response {name}");
        response
    }

    /// Sends `method path` with `body` through `via`, checks the answer
    /// against the document and returns it.
    fn call(&self, via: &Via, method: &str, path: &str, body: Body) -> Answer {
        let mut request = via.http.request(
            method.parse().expect("a method"),
            format!("{}{path}", via.base),
        );
        if let Some(token) = via.token {
            request = request.bearer_auth(token);
        }
        request = match body {
            Body::None => request,
            Body::Json(value) => request.json(&value),
            Body::Raw(bytes, content_type) => {
                let request = request.body(bytes);
                match content_type {
                    Some(content_type) => request.header("content-type", content_type),
                    None => request,
                }
            }
        };
        let (status, media, allow, text) = via.server.runtime.block_on(async {
            let response = request.send().await.expect("the request was not answered");
            let status = response.status().as_u16();
            let allow = response
                .headers()
                .get("allow")
                .map(|v| v.to_str().expect("an ASCII Allow header").to_owned());
            let media = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            (status, media, allow, response.text().await.expect("a body"))
        });
        let template = self.template(path.split('?').next().unwrap_or(path));
        let operation = template
            .as_ref()
            .map(|t| &self.document["paths"][t][method.to_ascii_lowercase()])
            .filter(|o| o.is_object());
        let route = format!(
            "{method} {} ({path})",
            template.as_deref().unwrap_or("(no route)")
        );
        let body = if media == "application/json" {
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{route} answered {status} with bad JSON ({e}): {text}"))
        } else {
            Value::String(text)
        };
        // The response of the document the answer must match: the
        // operation's for its status; for a method the path lacks, the
        // 405 every path answers; for a path that is no route, a 404.
        let expected = match (&template, operation) {
            (Some(template), Some(operation)) => {
                self.exercised
                    .borrow_mut()
                    .entry((method.to_owned(), template.clone()))
                    .or_default()
                    .insert(status);
                operation["responses"]
                    .get(status.to_string())
                    .map(|r| self.resolve(r))
                    .ok_or_else(|| format!("the document gives no {status} response"))
            }
            (Some(template), None) => {
                let methods = self.methods(template);
                let listed: Option<BTreeSet<String>> = allow
                    .as_ref()
                    .map(|a| a.split(',').map(|m| m.trim().to_owned()).collect());
                if status != 405 {
                    Err(format!(
                        "a method the path lacks, answered {status} (not 405)"
                    ))
                } else if listed.as_ref() != Some(&methods) {
                    Err(format!(
                        "the Allow header {allow:?} does not list the path's methods {methods:?}"
                    ))
                } else {
                    Ok(self.component_response("MethodNotAllowed"))
                }
            }
            (None, _) if status == 404 => Ok(self.component_response("NotFound")),
            (None, _) => Err(format!("no route, answered {status} (not 404)")),
        };
        let checked = expected.and_then(|response| self.check(response, status, &media, &body));
        if let Err(problem) = checked {
            let shown = serde_json::to_string_pretty(&body).unwrap_or_default();
            self.mismatches.borrow_mut().push(format!(
                "{route} answered {status} {media}: {problem}\nbody: {shown}"
            ));
        }
        Answer {
            route,
            status,
            allow,
            body,
        }
    }

    /// Checks one answer against `response`, a response of the document,
    /// for its media type.
    fn check(
        &self,
        response: &Value,
        status: u16,
        media: &str,
        body: &Value,
    ) -> Result<(), String> {
        let Some(content) = response["content"].get(media) else {
            return Err(format!(
                "the document's {status} response has no {media:?} content (it has {})",
                response["content"]
            ));
        };
        let validator = self.validator(&content["schema"])?;
        let problems: Vec<String> = validator
            .iter_errors(body)
            .map(|e| {
                format!(
                    "\n  field {:?}: {e} (schema {})",
                    e.instance_path().to_string(),
                    e.schema_path()
                )
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!("schema mismatch:{}", problems.concat()))
        }
    }

    /// Every route of the document.
    fn routes(&self) -> BTreeSet<Route> {
        let paths = self.document["paths"].as_object().expect("paths");
        paths
            .iter()
            .flat_map(|(path, item)| {
                METHODS
                    .iter()
                    .filter(|m| item.get(**m).is_some())
                    .map(|m| (m.to_ascii_uppercase(), path.clone()))
            })
            .collect()
    }
}

/// The routes the server's router adds: each `.route("PATH", …)` call
/// with the method routers (`get(…)`, `.delete(…)`, …) up to the next
/// call or the end of the statement, however it is wrapped.
fn router_routes() -> BTreeSet<Route> {
    let method = regex::Regex::new(r"\b(get|put|post|delete|patch|head|options|trace)\(").unwrap();
    ROUTER
        .split(".route(")
        .skip(1)
        .flat_map(|call| {
            let call = call.split(';').next().unwrap_or(call);
            let (path, handlers) = call
                .trim_start()
                .strip_prefix('"')
                .and_then(|c| c.split_once('"'))
                .unwrap_or_else(|| panic!("a route without a literal path: {call}"));
            method
                .captures_iter(handlers)
                .map(|m| (m[1].to_ascii_uppercase(), path.to_owned()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The routes the server's module doc lists in its table (`| \`GET
/// /health\` | …`, under `/v1` but `/openapi.json`).
fn table_routes() -> BTreeSet<Route> {
    SERVER
        .lines()
        .filter_map(|line| line.strip_prefix("//! | `"))
        .filter_map(|row| row.split('`').next())
        .filter_map(|route| route.split_once(' '))
        .map(|(method, path)| {
            let path = if path == "/openapi.json" {
                path.to_owned()
            } else {
                format!("/v1{path}")
            };
            (method.to_owned(), path)
        })
        .collect()
}

/// Every `$ref` string anywhere under `value`.
fn references(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("$ref", Value::String(reference)) => found.push(reference.clone()),
                    _ => references(value, found),
                }
            }
        }
        Value::Array(values) => values.iter().for_each(|v| references(v, found)),
        _ => {}
    }
}

/// Runs forwarded command lines by counting the store's documents.
#[derive(Debug)]
struct Counting;

impl CommandRunner for Counting {
    fn run(&self, served: &edudb::serve::Served, request: CommandRequest) -> CommandOutput {
        let documents = (served.api().documents(None).ok())
            .and_then(|d| d.as_array().map(Vec::len))
            .unwrap_or(0);
        CommandOutput {
            stdout: format!("{documents} documents for {:?}\n", request.args),
            stderr: String::new(),
            code: 0,
        }
    }
}

#[test]
fn the_document_is_well_formed_and_names_every_route_of_the_router() {
    let spec = Spec::new(serde_json::from_str(DOCUMENT).expect("openapi.json is JSON"));
    let document = &spec.document;
    assert!(
        document["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1.")),
        "{}",
        document["openapi"]
    );
    assert!(document["info"]["title"].is_string() && document["info"]["version"].is_string());
    let mut found = Vec::new();
    references(document, &mut found);
    for reference in &found {
        assert!(
            reference.starts_with("#/components/")
                && document
                    .pointer(reference.trim_start_matches('#'))
                    .is_some(),
            "{reference} does not resolve in the document"
        );
    }
    for (name, schema) in document["components"]["schemas"]
        .as_object()
        .expect("components/schemas")
    {
        if let Err(e) = spec.validator(schema) {
            panic!("schema {name} does not compile: {e}");
        }
    }
    let mut operation_ids = BTreeSet::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        let shared: Vec<&Value> = item["parameters"]
            .as_array()
            .map(|p| p.iter().collect())
            .unwrap_or_default();
        for method in METHODS {
            let Some(operation) = item.get(method) else {
                continue;
            };
            let here = format!("{} {path}", method.to_ascii_uppercase());
            let id = operation["operationId"].as_str().expect(&here);
            assert!(operation_ids.insert(id.to_owned()), "{here}: {id} twice");
            let mut parameters = shared.clone();
            if let Some(own) = operation["parameters"].as_array() {
                parameters.extend(own);
            }
            for segment in path.split('/') {
                if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    assert!(
                        parameters.iter().any(|p| p["in"] == "path"
                            && p["name"] == name
                            && p["required"] == true),
                        "{here}: path parameter {name} is not described"
                    );
                }
            }
            let responses = operation["responses"].as_object().expect(&here);
            assert!(
                responses.keys().any(|status| status.starts_with('2')),
                "{here}: no success response"
            );
            for (status, response) in responses {
                let response = spec.resolve(response);
                assert!(
                    response["description"].is_string(),
                    "{here} {status}: no description"
                );
                for (media, content) in response["content"].as_object().expect(&here) {
                    if let Err(e) = spec.validator(&content["schema"]) {
                        panic!("{here} {status} {media}: {e}");
                    }
                }
            }
            if let Some(body) = operation.get("requestBody") {
                for (media, content) in body["content"].as_object().expect(&here) {
                    if let Err(e) = spec.validator(&content["schema"]) {
                        panic!("{here} request {media}: {e}");
                    }
                }
            }
        }
    }
    for (name, response) in document["components"]["responses"]
        .as_object()
        .expect("components/responses")
    {
        assert!(
            response["description"].is_string(),
            "{name}: no description"
        );
        for (media, content) in response["content"].as_object().expect(name) {
            if let Err(e) = spec.validator(&content["schema"]) {
                panic!("response {name} {media}: {e}");
            }
        }
    }
    assert!(
        spec.component_response("MethodNotAllowed")["headers"]["Allow"]["required"] == true,
        "a 405 has an Allow header"
    );
    // The validators do check, and name the field at fault.
    let listing = spec
        .validator(&json!({"$ref": "#/components/schemas/DocumentList"}))
        .unwrap();
    let wrong = json!([{"id": "x", "title": "X", "edus": -1, "nodes": 1, "tokens": 1, "bytes": 1}]);
    let faults: Vec<String> = listing
        .iter_errors(&wrong)
        .map(|e| e.instance_path().to_string())
        .collect();
    assert_eq!(faults, ["/0/edus"]);
    let error = spec
        .validator(&json!({"$ref": "#/components/schemas/BusyError"}))
        .unwrap();
    assert!(error.is_valid(&json!({"error": {"class": "busy", "message": "retry"}})));
    assert!(!error.is_valid(&json!({"error": {"class": "user", "message": "retry"}})));
    // A job's status is exact for each state: the fields of its state,
    // no others.
    let status = spec
        .validator(&json!({"$ref": "#/components/schemas/JobStatus"}))
        .unwrap();
    let progress = json!({"job": 1, "sources": 2, "processed": 1, "done": 10, "total": 20});
    let with = |fields: Value| {
        let mut status = progress.clone();
        status
            .as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        status
    };
    let meta = json!({"id": "a", "title": "A", "edus": 1, "nodes": 2, "tokens": 3, "bytes": 4});
    let failure = json!({"source": "b", "class": "user", "message": "empty"});
    let error = json!({"class": "user", "message": "cancelled"});
    let llm = json!({"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "millis": 0,
                     "fallbacks": 0, "dropped_points": 0});
    for valid in [
        with(json!({"state": "running"})),
        with(json!({"state": "done", "documents": [meta], "failures": [failure], "llm": llm})),
        with(json!({"state": "done", "documents": [], "failures": [], "llm": llm})),
        with(json!({"state": "failed", "error": {"class": "internal", "message": "disk"}})),
        with(json!({"state": "cancelled", "error": error})),
    ] {
        let faults: Vec<String> = status.iter_errors(&valid).map(|e| e.to_string()).collect();
        assert!(faults.is_empty(), "{valid}: {faults:?}");
    }
    for invalid in [
        progress.clone(),
        with(json!({"state": "paused"})),
        with(json!({"state": "running", "error": error})),
        with(json!({"state": "running", "elapsed": 1})),
        with(json!({"state": "done", "documents": []})),
        with(json!({"state": "done", "documents": [], "failures": [], "error": error})),
        with(json!({"state": "done", "documents": [], "failures": []})),
        with(json!({"state": "done", "documents": [{"id": "a"}], "failures": []})),
        with(json!({"state": "done", "documents": [], "failures": [{"source": "b"}]})),
        with(json!({"state": "cancelled"})),
        with(json!({"state": "failed", "error": error, "documents": []})),
        with(json!({"state": "failed", "error": {"class": "odd", "message": "x"}})),
        with(json!({"state": "cancelled", "error": error, "job": 0})),
    ] {
        assert!(
            !status.is_valid(&invalid),
            "{invalid} passed as a job status"
        );
    }
    let documented = spec.routes();
    assert_eq!(
        router_routes(),
        documented,
        "the router's routes (left) and the document's (right) differ"
    );
    assert_eq!(
        table_routes(),
        documented,
        "the module doc's route table (left) and the document (right) differ"
    );
}

#[test]
fn every_route_answers_as_the_document_says() {
    let (_dir, path) = fixture();
    let server = start_asking(
        &path,
        ServeOptions {
            max_body_bytes: 1 << 20,
            commands: Some(Arc::new(Counting)),
            ..Default::default()
        },
        Some(crate::ask::satisfied_reader()),
    );
    let tcp = Via::tcp(&server);
    // The document, as the server serves it, is the one in the source tree.
    let served = {
        let probe = Spec::new(serde_json::from_str(DOCUMENT).unwrap());
        let served = probe
            .call(&tcp, "GET", "/openapi.json", Body::None)
            .expect(200);
        assert!(
            probe.mismatches.borrow().is_empty(),
            "{:?}",
            probe.mismatches
        );
        served
    };
    assert_eq!(served, serde_json::from_str::<Value>(DOCUMENT).unwrap());
    let spec = Spec::new(served);
    let get = |path: &str| spec.call(&tcp, "GET", path, Body::None);
    let post = |path: &str, body: Value| spec.call(&tcp, "POST", path, Body::Json(body));
    let raw = |method: &str, path: &str, bytes: &[u8], content_type: Option<&'static str>| {
        spec.call(&tcp, method, path, Body::Raw(bytes.to_vec(), content_type))
    };
    let delete = |path: &str| spec.call(&tcp, "DELETE", path, Body::None);
    // Polls job `job`'s status until it is no longer running.
    let settled = |job: &Value| {
        let started = Instant::now();
        loop {
            let status = get(&format!("/v1/jobs/{job}")).expect(200);
            if status["state"] != "running" {
                return status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "job {job} still runs: {status}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let oversized = vec![b'x'; (1 << 20) + (4 << 10)];

    get("/openapi.json").expect(200);
    let health = get("/v1/health").expect(200);
    assert_eq!(health["store"], path.display().to_string());
    assert_eq!(
        get("/v1/docs").expect(200).as_array().map(Vec::len),
        Some(2)
    );

    // Documents.
    let note = b"# Notes\n\nMoss grows in shade. It needs water.\n\n## Light\n\nFerns like it dim.";
    let meta = raw("PUT", "/v1/docs/notes?format=markdown", note, None).expect(200);
    assert_eq!(meta["id"], "notes");
    let page = b"<html><body><h1>Page</h1><p>Moss and ferns grow here.</p></body></html>";
    raw("PUT", "/v1/docs/page", page, Some("text/html")).expect(200);
    raw("PUT", "/v1/docs/notes?format=yaml", note, None).error(400, "user");
    raw("PUT", "/v1/docs/empty", b"", None).error(400, "user");
    raw("PUT", "/v1/docs/big", &oversized, None).error(413, "user");

    // Documents prepared apart from the store, one atomic batch; bytes
    // that are not one, or made by another embedder, write nothing.
    let preparer = edudb::Preparer::new(&edudb::EmbedderConfig::default()).unwrap();
    let prepared = |id: &str, text: &str| {
        (preparer.prepare_bytes(id, text.as_bytes().to_vec(), Default::default())).unwrap()
    };
    let batch = edudb::storage::prepared::encode_batch(&[
        prepared("fern", "Ferns grow in damp shade."),
        prepared("lichen", "Lichen grows on bare rock."),
    ])
    .unwrap();
    let written = raw(
        "POST",
        "/v1/prepared",
        &batch,
        Some("application/octet-stream"),
    )
    .expect(200);
    assert_eq!(written["documents"][1]["id"], "lichen", "{written}");
    raw("POST", "/v1/prepared", b"not prepared", None).error(400, "user");
    let foreign = edudb::Preparer::new(&edudb::EmbedderConfig::Hashed { dimension: 16 }).unwrap();
    let foreign =
        (foreign.prepare_bytes("fern", "Other.".as_bytes().to_vec(), Default::default())).unwrap();
    let batch = edudb::storage::prepared::encode_batch(&[foreign]).unwrap();
    raw("POST", "/v1/prepared", &batch, None).error(400, "user");
    delete("/v1/docs/fern").expect(200);
    delete("/v1/docs/lichen").expect(200);

    // A PDF, by its bytes and inside a job in base64; its page layout.
    let pdf = support::small_pdf(&["Moss on the north side.", "Ferns in the shade."]);
    raw("PUT", "/v1/docs/moss", &pdf, None).expect(200);
    let layout = get("/v1/docs/moss/pages").expect(200);
    assert_eq!(
        layout["pages"].as_array().map(Vec::len),
        Some(1),
        "{layout}"
    );
    assert_eq!(
        layout["lines"].as_array().map(Vec::len),
        Some(2),
        "{layout}"
    );
    assert_eq!(layout["source_bytes"], pdf.len(), "{layout}");
    assert!(get("/v1/docs/notes/pages").expect(200).is_null());
    get("/v1/docs/absent/pages").error(404, "user");
    // Metadata: given in a job, read, changed, listed by a condition.
    let job = post(
        "/v1/ingest",
        json!({"metadata": {"company": "Boeing"}, "documents": [
            {"id": "filing", "text": "# Filing\n\nRevenue grew.", "format": "markdown", "metadata": {"year": 2021}}
        ]}),
    )
    .expect(202);
    assert_eq!(settled(&job["job"])["state"], "done");
    let read = get("/v1/docs/filing/metadata").expect(200);
    assert_eq!(read["metadata"], json!({"company": "Boeing", "year": 2021}));
    let patch = |path: &str, body: Value| spec.call(&tcp, "PATCH", path, Body::Json(body));
    let change = json!({"set": {"tags": ["risk"]}, "unset": ["company"]});
    let changed = patch("/v1/docs/filing/metadata", change).expect(200);
    assert_eq!(changed["metadata"], json!({"year": 2021, "tags": ["risk"]}));
    let listed = get("/v1/docs?where=meta.year%20%3E%3D%202020").expect(200);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["id"], "filing", "{listed}");
    get("/v1/docs?where=meta.year%20%3E").error(400, "user");
    get("/v1/docs/absent/metadata").error(404, "user");
    patch("/v1/docs/filing/metadata", json!({"set": {"bad key": 1}})).error(400, "user");
    patch("/v1/docs/filing/metadata", json!({"sett": {}})).error(422, "user");
    delete("/v1/docs/filing").expect(200);

    let encoded = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&pdf)
    };
    let job = post(
        "/v1/ingest",
        json!({"documents": [{"id": "moss-job", "data_base64": encoded}]}),
    )
    .expect(202);
    let ended = settled(&job["job"]);
    assert_eq!(ended["state"], "done", "{ended}");
    assert_eq!(
        ended["processed"], 1,
        "one document, whatever its pages: {ended}"
    );
    let edus = get("/v1/docs/moss-job/edus").expect(200);
    assert_eq!(edus[0]["pages"], json!([1, 1]), "{edus}");
    post(
        "/v1/ingest",
        json!({"documents": [{"id": "x", "data_base64": "%%%"}]}),
    )
    .error(422, "user");
    post(
        "/v1/ingest",
        json!({"documents": [{"id": "x", "text": "t", "data_base64": "dA=="}]}),
    )
    .error(422, "user");
    delete("/v1/docs/moss").expect(200);
    delete("/v1/docs/moss-job").expect(200);

    let tree = get("/v1/docs/notes/tree").expect(200);
    assert_eq!(tree["kind"], "document", "{tree}");
    get("/v1/docs/absent/tree").error(404, "user");
    // An id that is not UTF-8: the framework's refusal, as JSON.
    get("/v1/docs/%FF/tree").error(400, "user");

    let all = get("/v1/docs/notes/edus").expect(200);
    assert!(all.as_array().is_some_and(|e| e.len() >= 3), "{all}");
    let two = get("/v1/docs/notes/edus?first=1&last=2").expect(200);
    assert_eq!(two[0]["text"], "Moss grows in shade.", "{two}");
    get("/v1/docs/notes/edus?last=2").error(400, "user");
    get("/v1/docs/notes/edus?first=0&last=999").error(400, "user");
    get("/v1/docs/notes/edus?first=one").error(400, "user");
    get("/v1/docs/absent/edus").error(404, "user");

    let dag = get("/v1/docs/trips/dag").expect(200);
    assert_eq!(dag["doc"], "trips", "{dag}");
    let chunks = get("/v1/docs/trips/dag?level=1").expect(200);
    assert_eq!(chunks["level"], 1, "{chunks}");
    get("/v1/docs/trips/dag?level=top").error(400, "user");
    get("/v1/docs/absent/dag").error(404, "user");

    get("/v1/stats").expect(200);
    let report = get("/v1/check").expect(200);
    assert_eq!(report["damaged"], json!([]), "{report}");
    spec.call(&tcp, "POST", "/v1/reindex", Body::None)
        .expect(200);
    // A copy of the served store, written by the server; it opens and
    // checks clean beside it.
    let copies = tempfile::tempdir().expect("a temporary directory");
    let dest = copies.path().join("copy");
    let copied = post("/v1/backup", json!({ "dest": dest })).expect(200);
    assert_eq!(copied["path"], dest.display().to_string(), "{copied}");
    let served_documents = get("/v1/docs").expect(200);
    assert_eq!(
        copied["documents"].as_u64(),
        served_documents.as_array().map(|d| d.len() as u64),
        "{copied}"
    );
    let copy = Db::open(&dest).expect("the backup opens");
    assert!(copy.check().expect("check").damaged.is_empty());
    drop(copy);
    post("/v1/backup", json!({ "dest": dest })).error(400, "user");
    post("/v1/backup", json!({ "dest": "relative/copy" })).error(400, "user");
    post("/v1/backup", json!({ "to": dest })).error(422, "user");
    // The store closed, rewritten and opened again: the calls below run on
    // the vacuumed store.
    let vacuumed = spec
        .call(&tcp, "POST", "/v1/vacuum", Body::None)
        .expect(200);
    assert!(vacuumed["documents"].as_u64() >= Some(2), "{vacuumed}");

    // Search.
    let hits = get("/v1/search?q=snow&limit=5").expect(200);
    assert!(hits.as_array().is_some_and(|h| !h.is_empty()), "{hits}");
    let titles = get("/v1/search?q=food").expect(200);
    assert!(
        titles
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h["node"].is_u64())),
        "a section title hit: {titles}"
    );
    get("/v1/search?q=nosuchfield:snow").error(400, "user");
    get("/v1/search").error(400, "user");
    get("/v1/search?q=snow&limit=many").error(400, "user");

    // Sessions (before the queries, so that SHOW SESSION has one).
    let turns = [
        json!({"text": "We plan a winter trip to Hokkaido.", "at": "2024-01-05"}),
        json!({"text": "Sapporo has famous ramen shops.", "role": "assistant",
               "at": "2024-01-05T10:00:00Z", "placement": "continue"}),
        json!({"text": "Kyoto gardens are green with moss.", "placement": "new_topic"}),
        json!({"text": "Which ramen shop in Sapporo is best?", "role": "user",
               "placement": {"topic": 0}, "at": null}),
        json!({"text": "Maybe we fly to Hokkaido instead.", "role": "system",
               "placement": {"fork": 0}}),
        json!({"text": "The snow festival is in February in Sapporo."}),
    ];
    let mut receipts = Vec::new();
    for turn in turns {
        let receipt = post("/v1/sessions/trip/turns", turn).expect(200);
        assert_eq!(receipt["session"], "trip", "{receipt}");
        receipts.push(receipt);
    }
    assert_eq!(receipts[0]["at"], "2024-01-05T00:00:00Z");
    assert_eq!(receipts[2]["decision"]["topic"], "new", "{}", receipts[2]);
    post(
        "/v1/sessions/trip/turns",
        json!({"text": "x", "at": "yesterday"}),
    )
    .error(400, "user");
    post(
        "/v1/sessions/trip/turns",
        json!({"text": "x", "mood": "glad"}),
    )
    .error(400, "user");
    raw(
        "POST",
        "/v1/sessions/trip/turns",
        b"{not json",
        Some("application/json"),
    )
    .error(400, "user");
    raw("POST", "/v1/sessions/trip/turns", b"\xff\xfe", None).error(400, "user");
    post(
        "/v1/sessions/bad%20id/turns",
        json!({"text": "Hello there."}),
    )
    .error(400, "user");
    post(
        "/v1/sessions/absent/turns",
        json!({"text": "Back to it.", "placement": {"fork": 0}}),
    )
    .error(404, "user");
    raw(
        "POST",
        "/v1/sessions/trip/turns",
        &oversized,
        Some("application/json"),
    )
    .error(413, "user");

    let list = get("/v1/sessions").expect(200);
    assert_eq!(list[0]["id"], "trip", "{list}");
    let view = get("/v1/sessions/trip").expect(200);
    assert_eq!(view["turns"], 6, "{view}");
    get("/v1/sessions/absent").error(404, "user");
    get("/v1/sessions/bad%20id").error(400, "user");

    let context = get("/v1/sessions/trip/context?budget=200&query=ramen").expect(200);
    assert!(
        context["items"]
            .as_array()
            .is_some_and(|items| items.iter().any(|i| i["score"].is_number())),
        "{context}"
    );
    get("/v1/sessions/trip/context?budget=60").expect(200);
    get("/v1/sessions/trip/context").error(400, "user");
    get("/v1/sessions/trip/context?budget=0").error(400, "user");
    get("/v1/sessions/absent/context?budget=100").error(404, "user");

    // Forgetting a turn: it stays in the view without text; its numbers hold.
    assert_eq!(
        delete("/v1/sessions/trip/turns/1").expect(200),
        json!({"session": "trip", "forgotten": 1})
    );
    delete("/v1/sessions/trip/turns/1").expect(200);
    let view = get("/v1/sessions/trip").expect(200);
    assert_eq!(view["turns"], 6, "{view}");
    let turns: Vec<&Value> = (view["topics"].as_array().into_iter().flatten())
        .flat_map(|t| t["branches"].as_array().into_iter().flatten())
        .flat_map(|b| b["turns"].as_array().into_iter().flatten())
        .collect();
    assert!(
        turns
            .iter()
            .any(|t| t["number"] == 1 && t["summary"].is_null()),
        "{view}"
    );
    delete("/v1/sessions/trip/turns/99").error(404, "user");
    delete("/v1/sessions/absent/turns/0").error(404, "user");
    delete("/v1/sessions/trip/turns/x").error(400, "user");

    // Queries: every shape of result, and the errors.
    let statement = "SELECT SPANS FROM * SEED BM25($q) BUDGET 64 TOKENS";
    let result = post(
        "/v1/query",
        json!({"statement": statement, "params": {"q": "ramen"}}),
    )
    .expect(200);
    assert!(
        result["results"].as_array().is_some_and(|r| !r.is_empty()),
        "{result}"
    );
    let explained = post(
        "/v1/query",
        json!({"statement": "EXPLAIN SELECT FROM * SEED BM25('snow') LIMIT 2"}),
    )
    .expect(200);
    assert!(explained["plan"].is_array(), "{explained}");
    for (statement, key) in [
        ("SELECT NODES FROM doc('trips') LIMIT 3", "results"),
        ("SHOW NODE doc('trips') 1", "results"),
        ("SHOW DOCS", "documents"),
        ("SHOW TREE doc('trips') DEPTH 1", "tree"),
        ("SHOW EDUS doc('trips') 0..1", "edus"),
        ("SHOW STATS", "stats"),
        ("SHOW DAG doc('trips') LEVEL 1", "dag"),
        ("SHOW SESSIONS", "sessions"),
        ("SHOW SESSION 'trip'", "session"),
        ("EXPLAIN SHOW DOCS", "plan"),
    ] {
        let answer = post("/v1/query", json!({"statement": statement})).expect(200);
        assert!(answer.get(key).is_some(), "{statement}: {answer}");
    }
    let error = post(
        "/v1/query",
        json!({"statement": "SELECT FROM *\nSEED BM25("}),
    )
    .error(400, "user");
    assert_eq!(error["query"]["line"], 2, "{error}");
    post(
        "/v1/query",
        json!({"statement": "SELECT FROM * SEED BM25($q) LIMIT 1", "params": {"q": [1]}}),
    )
    .error(400, "user");
    post("/v1/query", json!({"statment": "typo"})).error(422, "user");
    // Asking: read, judged, answered with cited coordinates; a bad group.
    let asked = post(
        "/v1/ask",
        json!({"question": "Ramen Sapporo", "budget": 64}),
    )
    .expect(200);
    assert_eq!(asked["stopped"], "enough");
    assert_eq!(asked["cited"][0]["doc"], "trips");
    let unanswered = post("/v1/ask", json!({"question": "Ramen", "answer": false})).expect(200);
    assert_eq!(unanswered["answer"], Value::Null);
    post("/v1/ask", json!({"question": "Ramen", "group": 0})).error(400, "user");
    post("/v1/ask", json!({"question": "Ramen", "budgets": 5})).error(422, "user");
    raw(
        "POST",
        "/v1/query",
        b"{\"statement\": ",
        Some("application/json"),
    )
    .error(400, "user");
    raw("POST", "/v1/query", br#"{"statement": "SHOW DOCS"}"#, None).error(415, "user");
    let long = String::from_utf8(oversized.clone()).unwrap();
    post("/v1/query", json!({ "statement": long })).error(413, "user");

    // Removals.
    spec.call(
        &tcp,
        "POST",
        "/v1/sessions/gone/turns",
        Body::Json(json!({"text": "Short-lived."})),
    )
    .expect(200);
    assert_eq!(
        delete("/v1/sessions/gone").expect(200),
        json!({"removed": "gone"})
    );
    delete("/v1/sessions/gone").error(404, "user");
    delete("/v1/sessions/bad%20id").error(400, "user");
    assert_eq!(
        delete("/v1/docs/notes").expect(200),
        json!({"removed": ["notes"]})
    );
    delete("/v1/docs/notes").error(404, "user");
    let turn_doc = receipts[0]["doc"].as_str().unwrap().replace('/', "%2F");
    delete(&format!("/v1/docs/{turn_doc}")).error(400, "user");

    // Ingest jobs.
    let small = post(
        "/v1/ingest",
        json!({"documents": [
            {"id": "job-notes", "text": "# Job notes\n\nLichen grows on rocks. It is slow.", "format": "md"},
            {"id": "job-page", "text": "<html><body><h1>Job page</h1><p>Ferns in the shade.</p></body></html>", "format": "HTML"},
            {"id": "job-plain", "text": "Plain words about snow. More words.", "format": null},
            {"id": "job-sniffed", "text": "# Sniffed\n\nA markdown heading, no format given."},
            {"id": "job-empty", "text": "", "format": "text"},
            {"id": " padded", "text": "Words.", "format": "TXT"},
            {"id": "job-binary", "text": "a\u{0}b", "format": "plain"},
        ]}),
    )
    .expect(202);
    assert_eq!(small["sources"], 7, "{small}");
    let done = settled(&small["job"]);
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["job"], small["job"], "{done}");
    assert_eq!(done["processed"], 7, "{done}");
    assert_eq!(done["done"], done["total"], "{done}");
    let written: BTreeSet<&str> = done["documents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    assert_eq!(
        written,
        BTreeSet::from(["job-notes", "job-page", "job-plain", "job-sniffed"]),
        "{done}"
    );
    // Bad content does not stop a job: those documents are its failures.
    let failed: BTreeSet<(&str, &str)> = done["failures"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| Some((f["source"].as_str()?, f["class"].as_str()?)))
        .collect();
    assert_eq!(
        failed,
        BTreeSet::from([
            ("job-empty", "user"),
            (" padded", "user"),
            ("job-binary", "user")
        ]),
        "{done}"
    );
    let tree = get("/v1/docs/job-page/tree").expect(200);
    assert_eq!(tree["title"], "Job page", "{tree}");
    // Cancelling a job that ended changes nothing.
    let job = small["job"].clone();
    assert_eq!(delete(&format!("/v1/jobs/{job}")).expect(200), done);
    assert_eq!(get(&format!("/v1/jobs/{job}")).expect(200), done);
    let empty = post("/v1/ingest", json!({"documents": []})).expect(202);
    let done = settled(&empty["job"]);
    assert_eq!(
        (&done["state"], &done["documents"], &done["failures"]),
        (&json!("done"), &json!([]), &json!([])),
        "{done}"
    );
    // A larger job, cancelled at once: it stops, a cancellation.
    let bulk: Vec<Value> = (0..150)
        .map(|i| {
            let text: String = (0..40)
                .map(|j| format!("Paragraph {j} of bulk note {i} tells of moss, ferns and snow.\n\n"))
                .collect();
            json!({"id": format!("bulk-{i}"), "text": format!("# Bulk {i}\n\n{text}"), "format": "markdown"})
        })
        .collect();
    let large = post("/v1/ingest", json!({ "documents": bulk })).expect(202);
    let job = large["job"].clone();
    let asked = delete(&format!("/v1/jobs/{job}")).expect(200);
    assert!(
        asked["state"] == "running" || asked["state"] == "cancelled",
        "{asked}"
    );
    let cancelled = settled(&job);
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["error"]["class"], "user", "{cancelled}");
    assert!(
        cancelled["processed"].as_u64() < cancelled["sources"].as_u64(),
        "{cancelled}"
    );
    get("/v1/jobs/999").error(404, "user");
    get("/v1/jobs/first").error(404, "user");
    get("/v1/jobs/%FF").error(400, "user");
    delete("/v1/jobs/999").error(404, "user");
    post(
        "/v1/ingest",
        json!({"documents": [{"id": "x", "text": "Some text.", "format": "yaml"}]}),
    )
    .error(400, "user");
    post(
        "/v1/ingest",
        json!({"documents": [{"id": "x", "text": "Some text."}], "structurer": "oracle"}),
    )
    .error(400, "user");
    post("/v1/ingest", json!({"documents": [], "wait": true})).error(422, "user");
    post("/v1/ingest", json!({"documents": [{"id": "x"}]})).error(422, "user");
    post("/v1/ingest", json!({"documents": "x"})).error(422, "user");
    post("/v1/ingest", json!({})).error(422, "user");
    raw(
        "POST",
        "/v1/ingest",
        b"{\"documents\": [",
        Some("application/json"),
    )
    .error(400, "user");
    raw("POST", "/v1/ingest", br#"{"documents": []}"#, None).error(415, "user");
    raw("POST", "/v1/ingest", &oversized, Some("application/json")).error(413, "user");

    // The framework's refusals are JSON errors too: a method a path
    // lacks (its Allow header kept), a path that is no route.
    let allowed = |methods: &[&str]| -> BTreeSet<String> {
        methods.iter().map(|m| (*m).to_owned()).collect()
    };
    assert_eq!(
        spec.call(&tcp, "PUT", "/v1/jobs/1", Body::None)
            .not_allowed(),
        allowed(&["GET", "HEAD", "DELETE"])
    );
    assert_eq!(get("/v1/ingest").not_allowed(), allowed(&["POST"]));
    assert_eq!(
        delete("/v1/health").not_allowed(),
        allowed(&["GET", "HEAD"])
    );
    assert_eq!(
        post("/openapi.json", json!({})).not_allowed(),
        allowed(&["GET", "HEAD"])
    );
    assert_eq!(
        raw("POST", "/v1/docs/notes", b"text", None).not_allowed(),
        allowed(&["PUT", "DELETE"])
    );
    get("/v1/nothing").error(404, "user");
    delete("/v2/docs").error(404, "user");

    // Command lines: the socket's only.
    let socket = Via::socket(&server);
    let output = spec
        .call(
            &socket,
            "POST",
            "/v1/cli",
            Body::Json(json!({"args": ["docs"], "cwd": "/"})),
        )
        .expect(200);
    assert!(
        output["stdout"]
            .as_str()
            .is_some_and(|s| s.ends_with("documents for [\"docs\"]\n")),
        "{output}"
    );
    spec.call(
        &socket,
        "POST",
        "/v1/cli",
        Body::Raw(b"[".to_vec(), Some("application/json")),
    )
    .error(400, "user");
    spec.call(
        &socket,
        "POST",
        "/v1/cli",
        Body::Json(json!({"args": "docs"})),
    )
    .error(422, "user");
    spec.call(
        &tcp,
        "POST",
        "/v1/cli",
        Body::Json(json!({"args": ["docs"], "cwd": "/"})),
    )
    .error(404, "user");
    server.stop().unwrap();

    // With a bearer token, every route needs it, the document's included.
    let guarded = start(
        &path,
        ServeOptions {
            token: Some("s3cret".into()),
            ..Default::default()
        },
    );
    let bare = Via::tcp(&guarded);
    let wrong = Via::tcp(&guarded).with_token("wrong");
    let right = Via::tcp(&guarded).with_token("s3cret");
    spec.call(&bare, "GET", "/openapi.json", Body::None)
        .error(401, "user");
    spec.call(&right, "GET", "/openapi.json", Body::None)
        .expect(200);
    spec.call(&bare, "GET", "/v1/health", Body::None)
        .error(401, "user");
    spec.call(&wrong, "GET", "/v1/docs", Body::None)
        .error(401, "user");
    spec.call(&right, "GET", "/v1/docs", Body::None).expect(200);
    // A server that runs no command lines.
    let socket = Via::socket(&guarded).with_token("s3cret");
    spec.call(
        &socket,
        "POST",
        "/v1/cli",
        Body::Json(json!({"args": ["docs"], "cwd": "/"})),
    )
    .error(404, "user");
    guarded.stop().unwrap();

    let mismatches = spec.mismatches.borrow();
    assert!(
        mismatches.is_empty(),
        "{} answers do not match the document:\n\n{}",
        mismatches.len(),
        mismatches.join("\n\n")
    );
    let exercised = spec.exercised.borrow();
    let called: BTreeSet<Route> = exercised.keys().cloned().collect();
    let documented = spec.routes();
    assert_eq!(
        called, documented,
        "the routes called (left) and the document's (right) differ"
    );
    for ((method, path), statuses) in exercised.iter() {
        eprintln!("{method} {path}: {statuses:?}");
        let operation = &spec.document["paths"][path][method.to_ascii_lowercase()];
        for success in operation["responses"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|s| s.starts_with('2'))
        {
            assert!(
                statuses.contains(&success.parse().unwrap()),
                "{method} {path} never answered {success}"
            );
        }
    }
}
