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

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The addresses that answer the HTML shell; `/story/{root}` is matched by [`is_page`] too.
const SHELL_ROUTES: [&str; 3] = ["/", "/story/{root}", "/check"];

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

/// The routes of the page and its files, for any router state (they read none).
pub(crate) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut router = Router::new();
    for route in SHELL_ROUTES {
        router = router.route(route, get(|headers: HeaderMap| serve(&SHELL, headers)));
    }
    for asset in &ASSETS {
        router = router.route(
            asset.path,
            get(move |headers: HeaderMap| serve(asset, headers)),
        );
    }
    router
}

/// Whether `path` is the page or one of its files: what a browser loads without a key.
pub(crate) fn is_page(path: &str) -> bool {
    let is_story = path
        .strip_prefix("/story/")
        .is_some_and(|root| !root.is_empty() && !root.contains('/'));
    is_story || SHELL_ROUTES.contains(&path) || ASSETS.iter().any(|asset| asset.path == path)
}

/// The file, or 304 when the browser's copy (`If-None-Match`) is current.
async fn serve(asset: &'static Asset, headers: HeaderMap) -> Response {
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
        for path in ["/", "/check", "/story/0123456789abcdef", "/assets/app.js"] {
            assert!(is_page(path), "{path}");
        }
        for path in [
            "/v1/search",
            "/story/",
            "/story/a/b",
            "/assets/other.js",
            "/checks",
            "/metrics",
        ] {
            assert!(!is_page(path), "{path}");
        }
    }
}
