//! The web page of `serve`: a small single-page app for analysts, embedded in the binary (plain
//! HTML, CSS and JavaScript under `src/server/web/`, no framework, nothing fetched from
//! elsewhere, so it works offline). One HTML shell answers every page's address (`/` the list
//! page, `/story/{root}` a story, `/check` the check before publishing); its script reads
//! `location.pathname` and calls the public API only, sending the read key when the server
//! asks for one.
//!
//! The shell and its files need no API key (a browser sends none when it follows a link), see
//! [`is_page`]; the `Host` check still applies. Every answer carries a strict
//! `Content-Security-Policy` (scripts, styles and requests from this server only, no inline
//! script), `Cache-Control: no-cache` with an `ETag`, so a browser revalidates and gets a 304
//! until the binary changes.

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::server::error::{ApiError, ErrorBody};

/// The addresses that answer the HTML shell besides `/story/{root}`.
const SHELL_ROUTES: [&str; 2] = ["/", "/check"];

/// Where the shell's files are.
const ASSETS_PREFIX: &str = "/assets/";

/// What the pages may load and run: only this server's own files and API, no inline script,
/// no plugin, no framing by another site, forms posted nowhere else.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// One embedded file and how it is served.
struct Asset {
    /// Its address.
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

/// The HTML shell of every page.
static SHELL: Asset = Asset {
    path: "/",
    content_type: "text/html; charset=utf-8",
    body: include_bytes!("web/index.html"),
};

/// The files the shell loads.
static ASSETS: [Asset; 3] = [
    Asset {
        path: "/assets/app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("web/app.js"),
    },
    Asset {
        path: "/assets/style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("web/style.css"),
    },
    Asset {
        path: "/assets/icon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("web/icon.svg"),
    },
];

/// `GET /`: the list page.
#[utoipa::path(
    get,
    path = "/",
    tag = "web",
    responses(
        (status = 200, description = "The web page's HTML shell; its script draws the list page \
            (`?q=…&sort=…`, the parameters of `/v1/search`)", content_type = "text/html", body = String),
        (status = 304, description = "The browser's copy (`If-None-Match`) is current"),
    ),
)]
pub(crate) async fn list_page(headers: HeaderMap) -> Response {
    serve(&SHELL, &headers)
}

/// `GET /story/{root}`: a story's page.
#[utoipa::path(
    get,
    path = "/story/{root}",
    tag = "web",
    params(("root" = String, Path, description = "The story's root hash, 16 hex digits")),
    responses(
        (status = 200, description = "The web page's HTML shell; its script draws the story \
            from `/v1/stories/{root}`", content_type = "text/html", body = String),
        (status = 304, description = "The browser's copy (`If-None-Match`) is current"),
    ),
)]
pub(crate) async fn story_page(headers: HeaderMap) -> Response {
    serve(&SHELL, &headers)
}

/// `GET /check`: the check before publishing.
#[utoipa::path(
    get,
    path = "/check",
    tag = "web",
    responses(
        (status = 200, description = "The web page's HTML shell; its script checks a pasted text \
            with `/v1/near-duplicates` (`?text=…` checks that text at once)",
            content_type = "text/html", body = String),
        (status = 304, description = "The browser's copy (`If-None-Match`) is current"),
    ),
)]
pub(crate) async fn check_page(headers: HeaderMap) -> Response {
    serve(&SHELL, &headers)
}

/// `GET /assets/{file}`: the page's script, style and icon.
#[utoipa::path(
    get,
    path = "/assets/{file}",
    tag = "web",
    params(("file" = String, Path, description = "`app.js`, `style.css` or `icon.svg`")),
    responses(
        (status = 200, description = "The file", content(
            (String = "text/javascript"), (String = "text/css"), (String = "image/svg+xml"))),
        (status = 304, description = "The browser's copy (`If-None-Match`) is current"),
        (status = 404, description = "No such file", body = ErrorBody),
    ),
)]
pub(crate) async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS
        .iter()
        .find(|asset| asset.path.strip_prefix(ASSETS_PREFIX) == Some(file.as_str()))
    {
        Some(asset) => serve(asset, &headers),
        None => ApiError::not_found(format!(
            "the page has no file {file:?}; its files are app.js, style.css and icon.svg"
        ))
        .into_response(),
    }
}

/// Whether `path` is the page or one of its files (`/story/{root}`, `/assets/{file}`, as
/// served or as the routes name them): what a browser loads without a key. None holds data.
pub(crate) fn is_page(path: &str) -> bool {
    let one_segment_under = |prefix: &str| {
        path.strip_prefix(prefix)
            .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
    };
    SHELL_ROUTES.contains(&path) || one_segment_under("/story/") || one_segment_under(ASSETS_PREFIX)
}

/// The file, or 304 when the browser's copy (`If-None-Match`) is current.
fn serve(asset: &'static Asset, headers: &HeaderMap) -> Response {
    let etag = format!("\"{:016x}\"", xxhash_rust::xxh3::xxh3_64(asset.body));
    let current = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| tag.trim() == etag || tag.trim() == "*");
    let answer_headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        // The page's own addresses carry the query; the outlets' sites need not see them.
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
    ];
    let etag = [(header::ETAG, etag)];
    if current {
        (StatusCode::NOT_MODIFIED, answer_headers, etag).into_response()
    } else {
        (answer_headers, etag, asset.body).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::is_page;

    #[test]
    fn only_the_page_and_its_files_are_pages() {
        for path in [
            "/",
            "/check",
            "/story/0123456789abcdef",
            "/story/{root}",
            "/assets/app.js",
            "/assets/{file}",
        ] {
            assert!(is_page(path), "{path}");
        }
        for path in [
            "/v1/search",
            "/story/",
            "/story/a/b",
            "/assets/",
            "/assets/a/b.js",
            "/checks",
            "/metrics",
        ] {
            assert!(!is_page(path), "{path}");
        }
    }
}
