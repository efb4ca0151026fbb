//! The OpenAPI document of the HTTP API (`GET /openapi.json`, `tantivy-dedup openapi`):
//!
//! - `every_route_is_documented_and_served`: the document's routes are exactly the router's,
//!   every documented operation answers as documented on a live server, and nothing in
//!   `src/server/` serves a route past the documented list;
//! - `the_document_is_served_without_keys_as_the_tool_prints_it`;
//! - `the_document_is_whole`: OpenAPI 3.1, every `$ref` resolves, every path parameter is
//!   declared, every error answer is `{"error": {"code", "message"}}`, and who may call what
//!   is the access rule of SPEC §4. (That the document is valid OpenAPI is checked by a real
//!   validator in `.ci/run`.)

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};
use tantivy_dedup::engine::{
    DEFAULT_FACET_LIMIT, DEFAULT_PAGE_SIZE, MAX_FACET_LIMIT, MAX_OFFSET, MAX_PAGE_SIZE,
};

use super::hardening::keyed_config;
use super::{Reply, TestServer, article_with, server_config};

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");

/// The methods probed on every documented path. HEAD is left out: axum answers it wherever it
/// answers GET, which OpenAPI does not list separately.
const METHODS: [&str; 6] = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];

/// The document as the library builds it.
fn document() -> Value {
    let text = tantivy_dedup::server::openapi().expect("the OpenAPI document");
    serde_json::from_str(text).expect("the document is JSON")
}

/// Each documented operation: its method (upper case), path template and operation object.
fn operations(document: &Value) -> Vec<(String, String, Value)> {
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("a path item") {
            operations.push((method.to_uppercase(), path.clone(), operation.clone()));
        }
    }
    operations
}

/// What a JSON reference such as `#/components/schemas/Article` points at.
fn resolve<'a>(document: &'a Value, reference: &str) -> Result<&'a Value, String> {
    reference
        .strip_prefix('#')
        .and_then(|pointer| document.pointer(pointer))
        .ok_or_else(|| format!("{reference} does not resolve"))
}

/// `schema`, or what it refers to.
fn resolved<'a>(document: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(reference) => resolve(document, reference).expect("a reference that resolves"),
        None => schema,
    }
}

fn is_of_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

/// Whether `value` fits `schema`, as far as this document uses JSON Schema: references,
/// `oneOf` (exactly one branch fits), `anyOf`, types, required properties, the schemas of
/// declared and additional properties, array items, and the fingerprint's pattern. A property
/// the schema does not declare (and no `additionalProperties` allows) is an error too: an
/// answer must be documented whole.
fn conforms(document: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    if let Some(reference) = schema["$ref"].as_str() {
        return conforms(document, resolve(document, reference)?, value, at);
    }
    if let Some(branches) = schema["oneOf"].as_array() {
        let fitting = branches
            .iter()
            .filter(|branch| conforms(document, branch, value, at).is_ok())
            .count();
        if fitting != 1 {
            return Err(format!("{at}: {value} fits {fitting} branches of a oneOf"));
        }
    }
    if let Some(branches) = schema["anyOf"].as_array()
        && !branches
            .iter()
            .any(|branch| conforms(document, branch, value, at).is_ok())
    {
        return Err(format!("{at}: {value} fits no branch of an anyOf"));
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(name) => vec![name],
        Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|name| is_of_type(value, name)) {
        return Err(format!("{at}: {value} is not of type {types:?}"));
    }
    match value {
        Value::Object(object) => {
            for name in schema["required"].as_array().into_iter().flatten() {
                let name = name.as_str().unwrap_or_default();
                if !object.contains_key(name) {
                    return Err(format!("{at}: the required `{name}` is missing"));
                }
            }
            let declared = schema["properties"].as_object();
            for (key, item) in object {
                let at = format!("{at}.{key}");
                match (
                    declared.and_then(|properties| properties.get(key)),
                    schema.get("additionalProperties"),
                ) {
                    (Some(property), _) | (None, Some(property)) => {
                        conforms(document, property, item, &at)?;
                    }
                    (None, None) if declared.is_some() => {
                        return Err(format!("{at} is not in the schema"));
                    }
                    (None, None) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    conforms(document, item_schema, item, &format!("{at}[{index}]"))?;
                }
            }
        }
        Value::String(text) if schema["pattern"] == "^[0-9a-f]{16}$" => {
            let hex = text.len() == 16
                && text
                    .bytes()
                    .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte));
            if !hex {
                return Err(format!("{at}: {text:?} is not 16 lowercase hex digits"));
            }
        }
        _ => {}
    }
    Ok(())
}

/// A request of any method, with a JSON body when one is given.
fn request(server: &TestServer, method: &str, path: &str, body: Option<&Value>) -> Reply {
    let builder = ureq::http::Request::builder()
        .method(method)
        .uri(format!("{}{path}", server.base));
    let request = match body {
        Some(body) => builder
            .header("content-type", "application/json")
            .body(body.to_string()),
        None => builder.body(String::new()),
    };
    TestServer::reply(server.agent.run(request.expect("a request")))
}

/// A valid body for an operation's JSON request body, by the schema it names: an array of
/// `Article`s or a `NearDuplicatesRequest`.
fn body_for(document: &Value, operation: &Value, article: &Value) -> Option<Value> {
    let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
    if schema.is_null() {
        return None;
    }
    let (is_array, reference) = match schema["items"]["$ref"].as_str() {
        Some(reference) => (true, reference),
        None => (false, schema["$ref"].as_str().unwrap_or_default()),
    };
    let one = match reference.rsplit('/').next() {
        Some("Article") => article.clone(),
        Some("NearDuplicatesRequest") => json!({"content": article["content"]}),
        other => panic!(
            "the test has no body for a request of {other:?} ({}): add one to `body_for`",
            serde_json::to_string(operation).unwrap_or_default()
        ),
    };
    assert!(resolve(document, reference).is_ok(), "{reference}");
    Some(if is_array { json!([one]) } else { one })
}

/// The path with its parameters filled in: `{id}` the document's id, `{root}` its cluster's,
/// `{file}` one of the web page's files.
fn concrete(path: &str, id: &str, root: &str) -> String {
    let filled = path
        .replace("{id}", id)
        .replace("{root}", root)
        .replace("{file}", "app.js");
    assert!(
        !filled.contains('{'),
        "the test has no value for a parameter of {path}: add one to `concrete`"
    );
    filled
}

/// The calls that give an axum router a route of their own, past `utoipa_axum::routes!`.
const REGISTRATIONS: [&str; 6] = [
    ".route(",
    ".route_service(",
    ".nest(",
    ".nest_service(",
    ".merge(",
    ".fallback_service(",
];

/// The coordinator's router (`serve --coordinator`): it serves the public routes of the
/// document with handlers of its own, so it registers them itself, and
/// `the_coordinator_serves_the_documented_public_routes` holds it to the document instead.
const COORDINATOR_ROUTER: &str = "src/server/coordinator/mod.rs";

/// Where a shard's replica's own routes join the server's: `replica::routes()`, built with
/// `utoipa_axum::routes!` like `routes()`, is merged into the router in `Server::router` and
/// into the document in `server/openapi.rs`, and nowhere else.
const REPLICA_MERGES: [(&str, &str); 2] = [
    ("src/server/mod.rs", ".merge(own)"),
    (
        "src/server/openapi.rs",
        "document.merge(super::replica::routes()",
    ),
];

/// Fails on any line of code under `dir` (comments aside) that makes one of
/// [`REGISTRATIONS`], the coordinator's router and the replica's merge aside.
fn no_route_past_the_list(dir: &Path) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            no_route_past_the_list(&path);
            continue;
        }
        if path.ends_with(COORDINATOR_ROUTER) {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap_or_default();
        let code = source
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim_start().starts_with("//"));
        for (number, line) in code {
            let replica_merge = REPLICA_MERGES
                .iter()
                .any(|(file, call)| path.ends_with(file) && line.contains(call));
            if replica_merge {
                continue;
            }
            if let Some(registration) = REGISTRATIONS.iter().find(|call| line.contains(*call)) {
                panic!(
                    "{}:{}: `{registration}` registers a route past the documented list; add \
                     the route to `routes()` in src/server/mod.rs, with a `#[utoipa::path]` \
                     annotation on its handler, instead",
                    path.display(),
                    number + 1
                );
            }
        }
    }
}

/// The coordinator's router registers exactly the document's public operations (paths and
/// methods), read from its `.route(PATH, METHOD(…).METHOD(…))` calls; the shards' tests call
/// each of them through a live coordinator.
#[test]
fn the_coordinator_serves_the_documented_public_routes() {
    let source =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(COORDINATOR_ROUTER))
            .expect("the coordinator's router");
    let mut served = std::collections::BTreeSet::new();
    for call in source.split(".route(").skip(1) {
        let call = call.split(".route").next().unwrap_or_default();
        let path = call.split('"').nth(1).expect("a path");
        for method in ["get", "post", "delete"] {
            if call.contains(&format!("{method}(")) {
                served.insert((method.to_uppercase(), path.to_owned()));
            }
        }
    }
    let documented: std::collections::BTreeSet<(String, String)> = operations(&document())
        .into_iter()
        .filter(|(_, path, _)| !path.starts_with("/internal/"))
        .map(|(method, path, _)| (method, path))
        .collect();
    assert_eq!(served, documented);
}

/// Every route the router serves is in the document, with each of its methods, and every
/// documented operation is served as documented. Three things make that so, and this test
/// checks each:
///
/// 1. The router is built from one list, `routes()` in `src/server/mod.rs`, and from nothing
///    else; the document is built from the same list. Each line of it registers a handler
///    through `utoipa_axum::routes!`, which takes the method and path to serve from the
///    handler's `#[utoipa::path]` annotation (a handler without one does not compile), so
///    what is served and what is documented are one declaration. The only way around that is
///    to register a route with axum directly (`.route(…)`, `.nest(…)`, `.merge(…)`, …), and
///    the first check below refuses any such call in `src/`.
/// 2. On a live server, every documented operation is requested with valid input: it must be
///    matched by the router as exactly that route (the request counter of `/metrics` is
///    labelled with the route the router matched), answer 2xx with a status the document
///    lists, and a JSON answer must fit the documented schema whole.
/// 3. Every other method on a documented path answers 405: a method served on a path but
///    missing from the document fails here.
///
/// Besides, the parameters `/v1/search` reads (as its error for an unknown one lists them)
/// are exactly the documented ones.
#[test]
fn every_route_is_documented_and_served() {
    no_route_past_the_list(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));

    let document = document();
    let server = TestServer::start(server_config());
    let article = article_with("openapi-灯塔-1", json!({}));
    let posted = server.post_json("/v1/documents", &json!([article]));
    assert_eq!(posted.status, 200, "{}", posted.text);
    let id = super::pct(article["id"].as_str().unwrap_or_default());
    let root = posted.json["results"][0]["root"]
        .as_str()
        .expect("a root")
        .to_owned();

    // A shard's routes for its coordinator answer only on a shard (`serve --shard`): the
    // shards' tests (`tests/service/shards.rs`) call them on real shards, through a
    // coordinator.
    let mut operations: Vec<_> = operations(&document)
        .into_iter()
        .filter(|(_, path, _)| !path.starts_with("/internal/"))
        .collect();
    // Deleting the document comes last, so that every other operation finds it.
    operations.sort_by_key(|(method, _, _)| method == "DELETE");
    for (method, path, operation) in &operations {
        let body = body_for(&document, operation, &article);
        let reply = request(&server, method, &concrete(path, &id, &root), body.as_ref());
        let status = reply.status.to_string();
        let documented = &operation["responses"][&status];
        assert!(
            (200..300).contains(&reply.status) && !documented.is_null(),
            "{method} {path}: {status}, documented: {}: {}",
            operation["responses"]
                .as_object()
                .map_or(0, |responses| responses.len()),
            reply.text
        );
        let content = resolved(&document, documented)["content"]
            .as_object()
            .expect("a documented answer has content");
        let media_type = content
            .keys()
            .find(|media_type| reply.content_type.starts_with(media_type.as_str()))
            .unwrap_or_else(|| {
                panic!(
                    "{method} {path}: answered {}, documented {:?}",
                    reply.content_type,
                    content.keys().collect::<Vec<_>>()
                )
            });
        if media_type == "application/json" {
            let schema = &content[media_type]["schema"];
            if let Err(error) = conforms(&document, schema, &reply.json, "answer") {
                panic!("{method} {path}: {error} in {}", reply.text);
            }
        }
        for other in METHODS {
            if other == method || !document["paths"][path][other.to_lowercase()].is_null() {
                continue;
            }
            // A POST without a JSON body would be refused (415) before routing.
            let body = (other == "POST").then(|| json!({}));
            let reply = request(&server, other, &concrete(path, &id, &root), body.as_ref());
            assert_eq!(reply.status, 405, "{other} {path}: {}", reply.text);
            assert_eq!(reply.error().0, "method_not_allowed");
        }
    }

    let metrics = server.get("/metrics").text;
    for (method, path, _) in &operations {
        let matched = format!("method=\"{method}\",route=\"{path}\"");
        assert!(
            metrics.contains(&matched),
            "{method} {path} was not matched as that route: {matched} not in\n{metrics}"
        );
    }

    let unknown = server.get("/v1/search?openapi_probe=1");
    assert_eq!(unknown.status, 400, "{}", unknown.text);
    let (_, message) = unknown.error();
    let read: BTreeSet<&str> = message
        .rsplit(" are ")
        .next()
        .unwrap_or_default()
        .split(", ")
        .collect();
    let documented: BTreeSet<&str> = document["paths"]["/v1/search"]["get"]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter_map(|parameter| parameter["name"].as_str())
        .collect();
    assert_eq!(read, documented, "{message}");
    server.stop();
}

/// `/openapi.json` needs no key even when keys are on, is JSON, says OpenAPI 3.1, and is the
/// very text `tantivy-dedup openapi` prints.
#[test]
fn the_document_is_served_without_keys_as_the_tool_prints_it() {
    let server = TestServer::start(keyed_config());
    assert_eq!(server.get("/v1/stats").status, 401, "keys are on");
    let served = server.get("/openapi.json");
    assert_eq!(served.status, 200, "{}", served.text);
    assert_eq!(served.content_type, "application/json");
    assert!(
        served.json["openapi"]
            .as_str()
            .is_some_and(|version| version.starts_with("3.1.")),
        "{}",
        served.json["openapi"]
    );
    let printed = std::process::Command::new(BIN)
        .arg("openapi")
        .output()
        .expect("run tantivy-dedup openapi");
    assert!(printed.status.success(), "{printed:?}");
    assert!(
        served.text.as_bytes() == printed.stdout,
        "the served document differs from the printed one"
    );
    server.stop();
}

/// Every `$ref` string in `value`, with where it is.
fn references(value: &Value, at: &str, found: &mut Vec<(String, String)>) {
    match value {
        Value::Object(object) => {
            for (key, item) in object {
                match (key.as_str(), item) {
                    ("$ref", Value::String(reference)) => {
                        found.push((at.to_owned(), reference.clone()));
                    }
                    _ => references(item, &format!("{at}/{key}"), found),
                }
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                references(item, &format!("{at}/{index}"), found);
            }
        }
        _ => {}
    }
}

/// The document's structure: OpenAPI 3.1; every reference resolves; every operation has a
/// summary, a tag and a 2xx answer; every `{parameter}` of a path is declared; every 4xx and
/// 5xx answer carries the `error` object; the fingerprint is 16 hex digits; and the keys
/// each operation needs are SPEC §4's: none for `/healthz` and `/openapi.json`, the write key
/// for writes, the read key (or the write key) for everything else, with a 401 documented
/// wherever a key is needed. The documented limits and defaults of the paging parameters are
/// the ones the handlers apply.
#[test]
fn the_document_is_whole() {
    let document = document();
    assert_eq!(document["openapi"], "3.1.0");
    let mut found = Vec::new();
    references(&document, "#", &mut found);
    assert!(found.len() > 50, "{} references", found.len());
    for (at, reference) in &found {
        if let Err(error) = resolve(&document, reference) {
            panic!("{at}: {error}");
        }
    }
    assert_eq!(
        document["components"]["schemas"]["Fingerprint"]["pattern"],
        "^[0-9a-f]{16}$"
    );

    let operations = operations(&document);
    let routes: BTreeSet<String> = operations
        .iter()
        .map(|(method, path, _)| format!("{method} {path}"))
        .collect();
    for route in [
        "POST /v1/documents",
        "GET /v1/documents/{id}",
        "DELETE /v1/documents/{id}",
        "GET /v1/documents/{id}/similar",
        "GET /v1/search",
        "POST /v1/near-duplicates",
        "GET /v1/stats",
        "GET /healthz",
        "GET /metrics",
        "GET /openapi.json",
    ] {
        assert!(routes.contains(route), "{route} in {routes:?}");
    }
    for (method, path, operation) in &operations {
        let name = format!("{method} {path}");
        assert!(operation["summary"].is_string(), "{name}: a summary");
        assert!(operation["tags"][0].is_string(), "{name}: a tag");
        let declared: BTreeSet<&str> = operation["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|parameter| parameter["in"] == "path")
            .filter_map(|parameter| parameter["name"].as_str())
            .collect();
        let in_path: BTreeSet<&str> = path
            .split('{')
            .skip(1)
            .filter_map(|part| part.split('}').next())
            .collect();
        assert_eq!(declared, in_path, "{name}: path parameters");

        let responses = operation["responses"].as_object().expect("responses");
        assert!(
            responses.keys().any(|status| status.starts_with('2')),
            "{name}: a 2xx answer"
        );
        for (status, response) in responses {
            if status.starts_with('4') || status.starts_with('5') {
                let schema = resolved(&document, resolved(&document, response))["content"]
                    ["application/json"]["schema"]
                    .clone();
                let error = &resolved(&document, &schema)["properties"]["error"];
                assert!(
                    error
                        .to_string()
                        .contains("#/components/schemas/ErrorDetail"),
                    "{name} {status}: the error object in {schema}"
                );
            }
        }

        // Probes, the document itself and the web page's files (whose API calls need keys).
        let page = ["/", "/story/{root}", "/check", "/assets/{file}"].contains(&path.as_str());
        let open = path == "/healthz" || path == "/openapi.json" || page;
        // A shard's routes for its coordinator, which holds the write key, need it.
        let writes = method == "DELETE"
            || (method == "POST" && path != "/v1/near-duplicates")
            || path.starts_with("/internal/");
        let expected = if open {
            json!([])
        } else if writes {
            json!([{"write_key": []}])
        } else {
            json!([{"read_key": []}, {"write_key": []}])
        };
        assert_eq!(operation["security"], expected, "{name}: keys");
        assert_eq!(responses.contains_key("401"), !open, "{name}: 401");
    }
    // The limits the handlers apply, as documented.
    let search = &document["paths"]["/v1/search"]["get"]["parameters"];
    let similar = &document["paths"]["/v1/documents/{id}/similar"]["get"]["parameters"];
    let parameter = |parameters: &Value, name: &str| {
        parameters
            .as_array()
            .into_iter()
            .flatten()
            .find(|parameter| parameter["name"] == name)
            .map(|parameter| parameter["schema"].clone())
            .unwrap_or_else(|| panic!("no parameter {name}"))
    };
    for (schema, maximum, default) in [
        (parameter(search, "offset"), MAX_OFFSET, None),
        (
            parameter(search, "limit"),
            MAX_PAGE_SIZE,
            Some(DEFAULT_PAGE_SIZE),
        ),
        (
            parameter(search, "facet_limit"),
            MAX_FACET_LIMIT,
            Some(DEFAULT_FACET_LIMIT),
        ),
        (
            parameter(similar, "limit"),
            MAX_PAGE_SIZE,
            Some(DEFAULT_PAGE_SIZE),
        ),
        (
            document["components"]["schemas"]["NearDuplicatesRequest"]["properties"]["limit"]
                .clone(),
            MAX_PAGE_SIZE,
            None,
        ),
    ] {
        assert_eq!(schema["maximum"], json!(maximum), "{schema}");
        if let Some(default) = default {
            assert_eq!(schema["default"], json!(default), "{schema}");
        }
    }
    let detail = &document["components"]["schemas"]["ErrorDetail"];
    assert_eq!(detail["required"], json!(["code", "message"]));
    for scheme in ["read_key", "write_key"] {
        let scheme = &document["components"]["securitySchemes"][scheme];
        assert_eq!(scheme["type"], "http");
        assert_eq!(scheme["scheme"], "bearer");
    }
}
