//! Who may call what, checked before any handler runs:
//!
//! - request heads within our own limits (a URI of [`MAX_URI_BYTES`], headers of
//!   [`MAX_HEADER_BYTES`]), answered in JSON like every other error;
//! - `Host` names the server: the bound address, the name it was told to listen on
//!   (`server.addr`), `localhost` on loopback, or one of `server.allowed_hosts` (a
//!   DNS-rebinding page names its own host and is refused 421);
//! - the API keys ([`AccessKeys`]): writes need the write key, other requests the read key
//!   (or the write key) when one is set; `/healthz` is open to probes, and the web page's
//!   files to browsers (which send no key when they follow a link; the page asks for the read
//!   key and sends it with its API calls). 401 with `WWW-Authenticate: Bearer` otherwise;
//! - a POST body is JSON or NDJSON by its `Content-Type`, plain or gzip-compressed (415
//!   otherwise), so that a web page cannot post a form or `text/plain` to a server on
//!   loopback.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
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

/// Whether the request only reads. `POST /v1/near-duplicates` reads: it checks a text
/// without indexing it.
fn is_read(request: &Request) -> bool {
    let method = request.method();
    method == Method::GET
        || method == Method::HEAD
        || method == Method::OPTIONS
        || (method == Method::POST && request.uri().path() == "/v1/near-duplicates")
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
    if !is_open(request) && !authorized(&access.keys, request) {
        let needed = if is_read(request) { "read" } else { "write" };
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

/// Whether the request needs no key: a health probe, or a browser loading the web page (whose
/// API calls need the key as any other).
fn is_open(request: &Request) -> bool {
    let path = request.uri().path();
    path == "/healthz"
        || (matches!(*request.method(), Method::GET | Method::HEAD) && web::is_page(path))
}

/// Whether the request carries a key that allows it (always, without keys).
fn authorized(keys: &AccessKeys, request: &Request) -> bool {
    let Some(write) = &keys.write else {
        return true;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| bearer_token(value));
    let Some(given) = given else {
        return is_read(request) && keys.read.is_none();
    };
    // Both keys are compared, whichever matches, so the time says nothing of which.
    let is_write_key = write.matches(given);
    let is_read_key = keys.read.as_ref().is_some_and(|read| read.matches(given));
    is_write_key || (is_read(request) && (is_read_key || keys.read.is_none()))
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

/// Bodies may come gzip-compressed (`Content-Encoding: gzip`), or plain.
fn encoding_refusal(request: &Request) -> Option<ApiError> {
    let encoding = request.headers().get(header::CONTENT_ENCODING)?;
    let name = encoding.to_str().unwrap_or("").trim().to_ascii_lowercase();
    if name == "gzip" || name == "identity" {
        return None;
    }
    Some(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_encoding",
        format!("a body may be sent plain or with `Content-Encoding: gzip`; got {encoding:?}"),
    ))
}
