//! Who may call what, checked before any handler runs:
//!
//! - request heads within our own limits (a URI of [`MAX_URI_BYTES`], headers of
//!   [`MAX_HEADER_BYTES`]), answered in JSON like every other error;
//! - `Host` names the server: the bound address, the name it was told to listen on
//!   (`server.addr`), `localhost` on loopback, or one of `server.allowed_hosts` (a
//!   DNS-rebinding page names its own host and is refused 421);
//! - the API keys ([`AccessKeys`]): writes need the write key, other requests the read key
//!   (or the write key) when one is set ([`key_needed`]); `/healthz` is open to probes,
//!   `/openapi.json` to anyone who wants to know how to call the API, and the web page's files
//!   to browsers (which send no key when they follow a link; the page asks for the read key and
//!   sends it with its API calls). 401 with `WWW-Authenticate: Bearer` otherwise;
//! - a POST body is JSON or NDJSON by its `Content-Type`, plain or gzip-compressed (415
//!   otherwise), so that a web page cannot post a form or `text/plain` to a server on
//!   loopback.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::{AccessKeys, ServerConfig};
use crate::server::error::ApiError;
use crate::server::web;

/// The longest request URI answered; a longer one gets 414.
pub const MAX_URI_BYTES: usize = 8 << 10;
/// The most header bytes a request may carry; more get 431.
pub const MAX_HEADER_BYTES: usize = 64 << 10;

/// The POST content types accepted (parameters such as `charset` aside).
const BODY_TYPES: [&str; 2] = ["application/json", "application/x-ndjson"];

/// What the checks need to know.
pub struct Access {
    keys: AccessKeys,
    /// `Host` values accepted, lower-cased; empty: any.
    hosts: Vec<String>,
}

impl Access {
    /// The checks of a server bound to `bound` with `config`.
    pub fn new(config: &ServerConfig, bound: SocketAddr) -> Self {
        // A server told to listen on a name answers to that name.
        let mut allowed = config.allowed_hosts.clone();
        if config.addr.is_name() {
            allowed.push(config.addr.host().to_owned());
        }
        Access {
            keys: config.keys.clone(),
            hosts: accepted_hosts(bound, &allowed),
        }
    }
}

/// The `Host` values a server bound to `bound` accepts: none to check when it is bound to all
/// interfaces and no list is configured, else the bound address, `localhost` and the loopback
/// addresses when bound to loopback, and the configured names, each with and without the port.
fn accepted_hosts(bound: SocketAddr, allowed: &[String]) -> Vec<String> {
    if bound.ip().is_unspecified() && allowed.is_empty() {
        return Vec::new();
    }
    let port = bound.port();
    let mut names: Vec<String> = allowed
        .iter()
        .map(|host| host.to_ascii_lowercase())
        .collect();
    names.push(match bound {
        SocketAddr::V4(address) => address.ip().to_string(),
        SocketAddr::V6(address) => format!("[{}]", address.ip()),
    });
    if bound.ip().is_loopback() {
        names.extend(["localhost", "127.0.0.1", "[::1]"].map(str::to_owned));
    }
    let mut hosts = Vec::with_capacity(names.len() * 2);
    for name in names {
        if !name.ends_with(']') && name.contains(':') {
            // Given with its port already.
            hosts.push(name);
        } else {
            hosts.push(format!("{name}:{port}"));
            hosts.push(name);
        }
    }
    hosts
}

/// The key a request needs when keys are configured, by its method and path: the rule the
/// checks apply and the OpenAPI document states for each route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyNeeded {
    /// None: `/healthz` is open to probes, `/openapi.json` says how to call the API, nothing
    /// about the data, and the web page's files hold no data either (its API calls need keys).
    Open,
    /// The read key (or the write key), when a read key is set.
    Read,
    /// The write key.
    Write,
}

/// The paths anyone may request, keys or not.
const OPEN_PATHS: [&str; 2] = ["/healthz", "/openapi.json"];

/// What a request by `method` on `path` needs. A request only reads by GET, HEAD or OPTIONS,
/// and by `POST /v1/near-duplicates`, which checks a text without indexing it.
pub(crate) fn key_needed(method: &Method, path: &str) -> KeyNeeded {
    let reads = method == Method::GET || method == Method::HEAD;
    if OPEN_PATHS.contains(&path) || (reads && web::is_page(path)) {
        KeyNeeded::Open
    } else if path.starts_with("/internal/") {
        // A shard's routes for its coordinator, which holds the write key.
        KeyNeeded::Write
    } else if reads
        || method == Method::OPTIONS
        || (method == Method::POST && path == "/v1/near-duplicates")
    {
        KeyNeeded::Read
    } else {
        KeyNeeded::Write
    }
}

/// The checks of the module doc, in order; the first that fails answers.
pub async fn check(State(access): State<Arc<Access>>, request: Request, next: Next) -> Response {
    match refusal(&access, &request) {
        Some(error) => error.into_response(),
        None => next.run(request).await,
    }
}

fn refusal(access: &Access, request: &Request) -> Option<ApiError> {
    let uri_bytes = request.uri().to_string().len();
    if uri_bytes > MAX_URI_BYTES {
        return Some(ApiError::new(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!(
                "the request URI has {uri_bytes} bytes; at most {MAX_URI_BYTES} are read (a long query belongs in fewer words)"
            ),
        ));
    }
    let header_bytes: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if header_bytes > MAX_HEADER_BYTES {
        return Some(ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            format!(
                "the request's headers have {header_bytes} bytes; at most {MAX_HEADER_BYTES} are read"
            ),
        ));
    }
    if let Some(error) = host_refusal(access, request) {
        return Some(error);
    }
    let needed = key_needed(request.method(), request.uri().path());
    if !authorized(&access.keys, request.headers(), needed) {
        let needed = if needed == KeyNeeded::Read {
            "read"
        } else {
            "write"
        };
        return Some(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            format!("this server needs an API key: send `Authorization: Bearer <{needed} key>`"),
        ));
    }
    if request.method() == Method::POST {
        return content_type_refusal(request);
    }
    None
}

fn host_refusal(access: &Access, request: &Request) -> Option<ApiError> {
    if access.hosts.is_empty() {
        return None;
    }
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .map(str::to_ascii_lowercase);
    match host {
        Some(host) if access.hosts.contains(&host) => None,
        host => Some(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "unknown_host",
            format!(
                "this server does not answer for host {}; name it by its address, or add the name to server.allowed_hosts",
                host.as_deref().unwrap_or("(none)")
            ),
        )),
    }
}

/// Whether a request with `headers` carries a key that allows what it `needs` (always, without
/// keys).
fn authorized(keys: &AccessKeys, headers: &HeaderMap, needs: KeyNeeded) -> bool {
    let Some(write) = &keys.write else {
        return true;
    };
    let is_read = match needs {
        KeyNeeded::Open => return true,
        KeyNeeded::Read => true,
        KeyNeeded::Write => false,
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| bearer_token(value));
    let Some(given) = given else {
        return is_read && keys.read.is_none();
    };
    // Both keys are compared, whichever matches, so the time says nothing of which.
    let is_write_key = write.matches(given);
    let is_read_key = keys.read.as_ref().is_some_and(|read| read.matches(given));
    is_write_key || (is_read && (is_read_key || keys.read.is_none()))
}

/// The token of `Authorization: Bearer <token>` (the scheme in any case).
fn bearer_token(value: &HeaderValue) -> Option<&[u8]> {
    let value = value.as_bytes();
    let scheme = value.get(..7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| value[7..].trim_ascii())
}

fn content_type_refusal(request: &Request) -> Option<ApiError> {
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if BODY_TYPES.contains(&essence.as_str()) {
        return encoding_refusal(request);
    }
    let given = if content_type.is_empty() {
        "no Content-Type".to_owned()
    } else {
        format!("Content-Type {content_type:?}")
    };
    Some(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!(
            "a POST body must be JSON or NDJSON, sent with `Content-Type: application/json` or `application/x-ndjson`; got {given} (curl: -H 'Content-Type: application/x-ndjson')"
        ),
    ))
}

/// A `Content-Encoding` value's name, trimmed and lower-cased.
fn encoding_name(encoding: &HeaderValue) -> String {
    encoding.to_str().unwrap_or("").trim().to_ascii_lowercase()
}

/// Whether the body comes gzip-compressed, which the handlers decode as they read it (the
/// only encoding besides `identity` that passes these checks).
pub(crate) fn gzip_body(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|encoding| encoding_name(encoding) == "gzip")
}

/// Bodies may come gzip-compressed (`Content-Encoding: gzip`), or plain.
fn encoding_refusal(request: &Request) -> Option<ApiError> {
    let encoding = request.headers().get(header::CONTENT_ENCODING)?;
    if matches!(encoding_name(encoding).as_str(), "gzip" | "identity") {
        return None;
    }
    Some(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_encoding",
        format!("a body may be sent plain or with `Content-Encoding: gzip`; got {encoding:?}"),
    ))
}
