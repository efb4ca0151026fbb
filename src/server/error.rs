//! Errors as the API answers them: a status and `{"error": {"code", "message"}}`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::Error;

/// An error answer: the status, a stable code for programs, and a message for people that says
/// what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable, machine-readable code such as `invalid_parameter`.
    pub code: &'static str,
    /// What went wrong and what to do about it.
    pub message: String,
    /// Seconds after which a retry may succeed (sent as `Retry-After`).
    pub retry_after: Option<u64>,
}

/// The JSON body of an error.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// The `error` object.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// A stable, machine-readable code such as `invalid_parameter` ([`ApiError::code`]).
    pub code: &'static str,
    /// What went wrong and what to do about it, for people ([`ApiError::message`]).
    pub message: String,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400: the request is wrong in a way the message explains.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 503 with `Retry-After`.
    pub fn unavailable(code: &'static str, message: impl Into<String>, retry_after: u64) -> Self {
        ApiError {
            retry_after: Some(retry_after),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message)
        }
    }

    /// 500: something on the server's side. `detail` (which may name files and carry the
    /// operating system's words) goes to the log only; the client is told to look there.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(%detail, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed to answer this request; its log says why",
        )
    }

    /// The same error under another code.
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = code;
        self
    }

    /// The JSON body.
    pub fn body(self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        }
    }
}

/// The code of a read that found the index damaged; `/healthz` answers it from then on.
pub(crate) const INDEX_DAMAGED: &str = "index_damaged";

/// The code of a page whose cursor's snapshot is no longer kept (410 Gone).
pub(crate) const CURSOR_EXPIRED: &str = "cursor_expired";

/// The code of a read that took longer than `[server] read_timeout`, waiting for a core
/// included.
pub(crate) const READ_TIMEOUT: &str = "read_timeout";

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        match error {
            Error::Query(message) => ApiError::bad_request("invalid_query", message),
            expired @ Error::CursorExpired => {
                ApiError::new(StatusCode::GONE, CURSOR_EXPIRED, expired.to_string())
            }
            full @ Error::TooManyWalks => {
                ApiError::unavailable("too_many_walks", full.to_string(), 5)
            }
            Error::DeadlineExceeded => ApiError::unavailable(
                READ_TIMEOUT,
                "the read took longer than the server allows (`[server] read_timeout`) and \
                 was stopped: narrow it (keywords, a time range, fewer facets) or retry when \
                 the server is less busy",
                1,
            ),
            // The error names the index directory, which is the log's to know.
            Error::Busy(_) => ApiError::unavailable(
                "busy",
                "the index is busy (another process holds its writer); retry shortly",
                1,
            ),
            // The paths are the log's to know; the operator is told what to run.
            damaged @ (Error::Damaged { .. } | Error::DamagedData { .. }) => {
                tracing::error!(error = %damaged, "a read found the index damaged");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    INDEX_DAMAGED,
                    "the index is damaged: a file of it cannot be read. Whoever runs the \
                     server: `tantivy-dedup check --index DIR` names the file; restore the \
                     index from a backup",
                )
            }
            other => ApiError::internal(other),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, retry_after) = (self.status, self.retry_after);
        let mut response = (status, Json(self.body())).into_response();
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
