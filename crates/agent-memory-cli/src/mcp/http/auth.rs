//! Who a request is: the `Authorization: Bearer` credential checked on every request to `/mcp`,
//! and the one log line each request gets.
//!
//! A credential that starts with `amk_` is an API key, checked against the key file; anything
//! else is an OAuth access token (a JWT), checked against the issuer's keys. The principal it
//! grants goes into the request's extensions, where the MCP handler reads it for every call of
//! that request; nothing else in the request (no header, path, query or argument) can name a
//! user. A request without a valid credential never reaches the MCP service: it gets `401` with
//! `WWW-Authenticate: Bearer …` (RFC 6750), pointing to the protected-resource metadata when
//! the server accepts OAuth tokens. When a credential file cannot be used, requests that need
//! it get `503`: the server fails closed (see [`super::reload`]).
//!
//! Each request is logged once, at `info` on the `agent_memory::http` target, with the
//! credential's id (an API key's id or a hash of the token's subject, never the key, the token
//! or the user id), the tool it called, the outcome, the HTTP status and the duration.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::api_keys::KeySet;
use super::jwt::{KeyRing, Refusal, Verifier};
use super::reload::Watched;
use crate::api_keys::KEY_PREFIX;
use crate::mcp::handler::CallNote;
use crate::mcp::Principal;

/// Marks the response to a request whose credential was accepted: only such requests keep a
/// connection open (see [`super::connections`]).
#[derive(Debug, Clone, Copy)]
pub struct Authenticated;

/// Checks the credentials of requests.
#[derive(Debug)]
pub struct Authenticator {
    api_keys: Option<Arc<Watched<KeySet>>>,
    jwt: Option<(Verifier, Arc<Watched<KeyRing>>)>,
    /// The `WWW-Authenticate` parameters every challenge starts with.
    challenge: String,
}

/// Why a request was not authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// No `Authorization: Bearer` credential.
    Missing,
    /// More than one `Authorization` header, or one that is not a bearer credential.
    BadHeader,
    /// An API key that is unknown, wrong or revoked (told apart only in nothing).
    ApiKey,
    /// An access token, refused for this reason.
    Token(Refusal),
    /// The credential file this credential needs cannot be used right now.
    Unavailable,
}

impl Authenticator {
    /// An authenticator for API keys, OAuth tokens or both. `resource_metadata` is the URL of
    /// the protected-resource metadata, named in challenges when tokens are accepted.
    pub fn new(
        api_keys: Option<Arc<Watched<KeySet>>>,
        jwt: Option<(Verifier, Arc<Watched<KeyRing>>)>,
        resource_metadata: Option<&str>,
    ) -> Self {
        let challenge = match resource_metadata {
            Some(url) if jwt.is_some() => format!("Bearer resource_metadata=\"{url}\""),
            _ => "Bearer realm=\"agent-memory\"".to_owned(),
        };
        Self { api_keys, jwt, challenge }
    }

    fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Failure> {
        let credential = bearer(headers)?;
        if credential.starts_with(KEY_PREFIX) || self.jwt.is_none() {
            let keys = self.api_keys.as_ref().ok_or(Failure::ApiKey)?;
            let keys = keys.current().ok_or(Failure::Unavailable)?;
            return keys.authenticate(credential).ok_or(Failure::ApiKey);
        }
        let (verifier, ring) = self.jwt.as_ref().ok_or(Failure::Token(Refusal::Malformed))?;
        let ring = ring.current().ok_or(Failure::Unavailable)?;
        verifier.verify(credential, &ring).map_err(Failure::Token)
    }

    /// The response to a request that failed with `failure`.
    fn refuse(&self, failure: Failure) -> Response {
        let (status, error, description) = match failure {
            Failure::Missing => (
                StatusCode::UNAUTHORIZED,
                None,
                "this server needs an Authorization: Bearer credential",
            ),
            Failure::BadHeader => (
                StatusCode::UNAUTHORIZED,
                Some("invalid_request"),
                "send exactly one Authorization header: Bearer and the credential",
            ),
            Failure::ApiKey => {
                (StatusCode::UNAUTHORIZED, Some("invalid_token"), "the API key is not valid")
            }
            Failure::Token(refusal) => {
                (StatusCode::UNAUTHORIZED, Some("invalid_token"), refusal.description())
            }
            Failure::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                "the server cannot check credentials right now; try again later",
            ),
        };
        let mut challenge = self.challenge.clone();
        if let Some(error) = error {
            challenge
                .push_str(&format!(", error=\"{error}\", error_description=\"{description}\""));
        }
        let body =
            json!({"error": error.unwrap_or("unauthorized"), "error_description": description});
        let mut response = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            if let Ok(value) = HeaderValue::from_str(&challenge) {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
            }
        }
        response
    }
}

/// The bearer credential of `headers`.
fn bearer(headers: &HeaderMap) -> Result<&str, Failure> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next().ok_or(Failure::Missing)?;
    if values.next().is_some() {
        return Err(Failure::BadHeader);
    }
    let value = value.to_str().map_err(|_| Failure::BadHeader)?;
    let (scheme, credential) = value.split_once(' ').ok_or(Failure::BadHeader)?;
    let credential = credential.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || credential.is_empty() {
        return Err(Failure::BadHeader);
    }
    Ok(credential)
}

/// Middleware: authenticates the request, hands its principal to the MCP service, and logs the
/// request once it is answered.
pub async fn authenticate(
    State(auth): State<Arc<Authenticator>>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    match auth.authenticate(request.headers()) {
        Ok(principal) => {
            let credential = principal.credential().to_string();
            let note = CallNote::default();
            // Nothing after this point needs the credential itself, so nothing after it (rmcp's
            // debug logs of whole requests included) can leak it.
            request.headers_mut().remove(header::AUTHORIZATION);
            request.extensions_mut().insert(principal);
            request.extensions_mut().insert(note.clone());
            let mut response = next.run(request).await;
            response.extensions_mut().insert(Authenticated);
            let (tool, outcome) = note.get().unwrap_or(("-", "-"));
            tracing::info!(
                target: "agent_memory::http",
                credential,
                %method,
                tool,
                outcome,
                status = response.status().as_u16(),
                duration_ms = started.elapsed().as_secs_f64() * 1000.0,
                "mcp request"
            );
            response
        }
        Err(failure) => {
            let outcome = match failure {
                Failure::Missing => "no_credential",
                Failure::BadHeader => "bad_header",
                Failure::ApiKey => "bad_api_key",
                Failure::Token(refusal) => refusal.word(),
                Failure::Unavailable => "credentials_unavailable",
            };
            let response = auth.refuse(failure);
            tracing::info!(
                target: "agent_memory::http",
                credential = "none",
                %method,
                tool = "-",
                outcome,
                status = response.status().as_u16(),
                duration_ms = started.elapsed().as_secs_f64() * 1000.0,
                "mcp request refused"
            );
            response
        }
    }
}
