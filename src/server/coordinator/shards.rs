//! How a coordinator reaches its shards: HTTP/1.1 over pooled keep-alive connections, each
//! call bounded by a timeout, an unreachable or slow shard an error that names it.

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderValue, Method, Request, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::config::Secret;
use crate::server::error::ApiError;
use crate::{Error, Result};

/// One shard's answer: its status and body.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) body: Bytes,
}

/// Why a shard did not answer.
#[derive(Debug, Clone, thiserror::Error)]
#[error("shard {shard} ({url}) {reason}")]
pub(crate) struct Unavailable {
    /// Its number.
    pub(crate) shard: usize,
    /// Where it is.
    pub(crate) url: String,
    /// What happened.
    pub(crate) reason: String,
}

/// The shards of an index split by story, in shard order (`--shards URL,…`: the first is
/// shard 0).
pub(crate) struct Shards {
    urls: Vec<String>,
    client: Client<HttpConnector, Full<Bytes>>,
    /// The `Authorization` header the shards' internal routes need (the write key).
    authorization: Option<HeaderValue>,
}

impl Shards {
    /// The shards at `urls` (`http://host:port`, no path), called with `key`.
    pub(crate) fn new(urls: &[String], key: Option<&Secret>) -> Result<Self> {
        let mut checked = Vec::with_capacity(urls.len());
        for url in urls {
            let url = url.trim().trim_end_matches('/');
            let parsed: Uri = url.parse().map_err(|_| {
                Error::Config(format!(
                    "--shards: {url:?} is not a URL such as http://127.0.0.1:7701"
                ))
            })?;
            if parsed.scheme_str() != Some("http")
                || parsed.host().is_none()
                || parsed
                    .path_and_query()
                    .is_some_and(|path| path.as_str() != "/")
            {
                return Err(Error::Config(format!(
                    "--shards: {url:?} is not a shard's address such as http://127.0.0.1:7701 \
                     (plain HTTP, no path)"
                )));
            }
            checked.push(url.to_owned());
        }
        if checked.is_empty() {
            return Err(Error::Config(
                "--shards names no shard: give their URLs, comma-separated, shard 0 first"
                    .to_owned(),
            ));
        }
        let authorization = key
            .map(|key| HeaderValue::from_str(&key.bearer()))
            .transpose()
            .map_err(|_| Error::Config("the write key is not a valid header value".to_owned()))?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(Shards {
            urls: checked,
            client,
            authorization,
        })
    }

    /// How many shards there are.
    pub(crate) fn count(&self) -> usize {
        self.urls.len()
    }

    /// Shard `shard`'s URL.
    pub(crate) fn url(&self, shard: usize) -> &str {
        &self.urls[shard]
    }

    /// Calls `path_and_query` on shard `shard` with `body` (JSON or NDJSON by
    /// `content_type`), waiting at most `timeout`.
    pub(crate) async fn call(
        &self,
        shard: usize,
        method: Method,
        path_and_query: &str,
        body: Option<(Bytes, &'static str)>,
        timeout: Duration,
    ) -> std::result::Result<Answer, Unavailable> {
        let unavailable = |reason: String| Unavailable {
            shard,
            url: self.urls[shard].clone(),
            reason,
        };
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path_and_query}", self.urls[shard]));
        if let Some(authorization) = &self.authorization {
            request = request.header(header::AUTHORIZATION, authorization.clone());
        }
        let (bytes, content_type) = body.unwrap_or_default();
        if !content_type.is_empty() {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        let request = request
            .body(Full::new(bytes))
            .map_err(|error| unavailable(format!("could not be asked: {error}")))?;
        let exchange = async {
            let response = self.client.request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(Answer { status, body })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(answer)) if answer.status.is_server_error() => Err(unavailable(format!(
                "answered {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body).trim()
            ))),
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(error)) => Err(unavailable(format!("did not answer: {}", cause(&*error)))),
            Err(_) => Err(unavailable(format!(
                "did not answer within {}",
                humantime::format_duration(timeout)
            ))),
        }
    }
}

/// An error with its sources, for one log line.
fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// A shard's answer passed on as it came (JSON).
pub(crate) fn relay(answer: Answer) -> Response {
    let mut response = (answer.status, answer.body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// The 503 of a shard that did not answer.
pub(crate) fn shard_unavailable(error: &Unavailable) -> ApiError {
    tracing::warn!(%error, "shard unavailable");
    ApiError::unavailable(
        "shard_unavailable",
        format!("{error}; retry shortly (a re-sent document that was indexed is `unchanged`)"),
        2,
    )
}
