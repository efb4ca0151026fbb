//! The OpenAPI 3.1 document of the HTTP API, served at `GET /openapi.json` and printed by
//! `tantivy-dedup openapi`.
//!
//! It is generated, not written, so that it cannot drift from the service:
//!
//! - the routes are those of [`routes`](super::routes()), the list the router itself is built
//!   from;
//! - each route's method, path, parameters, body and answers come from its handler's
//!   `#[utoipa::path]` annotation, and their schemas from the types the handler reads and
//!   answers (their doc comments become the descriptions);
//! - who may call each route comes from the access checks' own rule ([`key_needed`]), and
//!   the checks' refusals, which any request may meet before its handler runs, are added to
//!   each operation here ([`describe_access`]).

use std::sync::OnceLock;

use axum::http::Method;
use utoipa::ToSchema as _;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};

use crate::server::access::{KeyNeeded, key_needed};
use crate::server::error::ErrorBody;
use crate::{Error, Result};

/// What the annotations do not say: the tags that group the routes (the routes bring the
/// schemas of their parameters, bodies and answers along). The title,
/// version, description and licence are the crate's.
#[derive(utoipa::OpenApi)]
#[openapi(
    tags(
        (name = "documents", description = "Indexing, reading and deleting documents"),
        (name = "search", description = "List pages (one result per story) and checks \
            before publishing"),
        (name = "service", description = "Statistics, health, metrics and this document"),
        (name = "shards", description = "A shard's routes for its coordinator (`serve --shard \
            I/N`; write key): placed documents and the parts of list pages"),
    )
)]
pub(crate) struct Description;

/// The OpenAPI 3.1 document of the HTTP API, as pretty-printed JSON: built on first use, then
/// the same text every time (what `GET /openapi.json` answers, byte for byte).
pub fn openapi() -> Result<&'static str> {
    static DOCUMENT: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    DOCUMENT
        .get_or_init(|| {
            document()
                .to_pretty_json()
                .map_err(|error| error.to_string())
        })
        .as_deref()
        .map_err(|message| Error::Server(format!("writing the OpenAPI document: {message}")))
}

/// The document: the description and the routes, with the access rules.
fn document() -> utoipa::openapi::OpenApi {
    let mut document = super::routes().into_openapi();
    // A shard's replica's own routes, served beside the others on a replica.
    #[cfg(feature = "redis")]
    document.merge(super::replica::routes().into_openapi());
    describe_access(&mut document);
    document
}

/// To which operations an answer of [`CHECKS`] applies.
#[derive(Clone, Copy)]
enum Applies {
    /// Every one.
    Every,
    /// Those that need a key when keys are configured.
    Keyed,
    /// Those with a body (POST).
    WithBody,
}

/// The refusals of the checks every request passes before its handler (`access.rs`): status,
/// name under `components/responses`, description, and to which operations.
const CHECKS: [(u16, &str, &str, Applies); 5] = [
    (
        401,
        "Unauthorized",
        "Keys are configured and the request carries none that allows it (`unauthorized`, \
         with `WWW-Authenticate: Bearer`)",
        Applies::Keyed,
    ),
    (
        414,
        "UriTooLong",
        "The request URI is longer than the server reads (`uri_too_long`)",
        Applies::Every,
    ),
    (
        415,
        "UnsupportedMediaType",
        "The body is not sent as `application/json` or `application/x-ndjson` \
         (`unsupported_media_type`), or is compressed otherwise than with gzip \
         (`unsupported_encoding`)",
        Applies::WithBody,
    ),
    (
        421,
        "UnknownHost",
        "The `Host` header names a host this server does not answer for (`unknown_host`; \
         see `server.allowed_hosts`)",
        Applies::Every,
    ),
    (
        431,
        "HeadersTooLarge",
        "The request's headers are larger than the server reads (`headers_too_large`)",
        Applies::Every,
    ),
];

/// The keys as security schemes, each operation's requirement by [`key_needed`], and the
/// refusals of [`CHECKS`] that apply to it, as references to `components/responses`.
fn describe_access(document: &mut utoipa::openapi::OpenApi) {
    let components = document.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "read_key",
        bearer(
            "The read key (`TANTIVY_DEDUP_READ_KEY`), needed by reads when one is set; the \
             write key does too. Without keys configured the server needs none.",
        ),
    );
    components.add_security_scheme(
        "write_key",
        bearer(
            "The write key (`TANTIVY_DEDUP_WRITE_KEY`), needed by writes when keys are \
             configured. Without keys configured the server needs none.",
        ),
    );
    for (_, name, description, _) in CHECKS {
        let error = ContentBuilder::new()
            .schema(Some(Ref::from_schema_name(ErrorBody::name())))
            .build();
        components.responses.insert(
            name.to_owned(),
            RefOr::T(
                ResponseBuilder::new()
                    .description(description)
                    .content("application/json", error)
                    .build(),
            ),
        );
    }
    for (path, item) in &mut document.paths.paths {
        for (method, operation) in operations(item) {
            let needed = key_needed(&method, path);
            operation.security = Some(match needed {
                KeyNeeded::Open => Vec::new(),
                KeyNeeded::Read => vec![requirement("read_key"), requirement("write_key")],
                KeyNeeded::Write => vec![requirement("write_key")],
            });
            let answers = &mut operation.responses.responses;
            for (status, name, _, applies) in CHECKS {
                let applies = match applies {
                    Applies::Every => true,
                    Applies::Keyed => needed != KeyNeeded::Open,
                    Applies::WithBody => method == Method::POST,
                };
                if applies {
                    answers
                        .entry(status.to_string())
                        .or_insert_with(|| RefOr::Ref(Ref::from_response_name(name)));
                }
            }
        }
    }
}

fn bearer(description: &str) -> SecurityScheme {
    SecurityScheme::Http(
        HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(description))
            .build(),
    )
}

fn requirement(scheme: &str) -> SecurityRequirement {
    SecurityRequirement::new(scheme, Vec::<String>::new())
}

/// The operations of a path, with their methods.
fn operations(item: &mut PathItem) -> impl Iterator<Item = (Method, &mut Operation)> {
    [
        (Method::GET, &mut item.get),
        (Method::PUT, &mut item.put),
        (Method::POST, &mut item.post),
        (Method::DELETE, &mut item.delete),
        (Method::OPTIONS, &mut item.options),
        (Method::HEAD, &mut item.head),
        (Method::PATCH, &mut item.patch),
        (Method::TRACE, &mut item.trace),
    ]
    .into_iter()
    .filter_map(|(method, operation)| Some((method, operation.as_mut()?)))
}
