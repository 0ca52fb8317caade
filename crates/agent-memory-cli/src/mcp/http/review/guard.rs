//! What every review request passes: the Host allow-list, the response headers that keep the
//! page in its own origin (CSP, framing, sniffing, referrer, caching), and for every POST a
//! same-origin check and the session's CSRF token.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::Review;

/// No script, no third-party origin: styles and images from the page's own origin, forms
/// posting to it, and no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Middleware: refuses a Host outside the allow-list (DNS rebinding), then sets the security
/// headers on whatever the page answers.
pub async fn protect(
    State(review): State<std::sync::Arc<Review>>,
    mut request: Request,
    next: Next,
) -> Response {
    // HTTP/2 carries the host in the `:authority` pseudo-header, not in `Host`: name it there
    // too, so this check and the same-origin check read one header whatever the protocol.
    if !request.headers().contains_key(header::HOST) {
        let authority = request.uri().authority().map(|a| HeaderValue::from_str(a.as_str()));
        if let Some(Ok(value)) = authority {
            request.headers_mut().insert(header::HOST, value);
        }
    }
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok());
    let allowed = host.is_some_and(|host| review.host_allowed(host));
    let mut response = if allowed {
        next.run(request).await
    } else {
        (StatusCode::FORBIDDEN, "forbidden: this Host is not allowed\n").into_response()
    };
    let headers = response.headers_mut();
    headers
        .insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(
        header::HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

/// Whether a POST comes from the page itself. Browsers say so in `Sec-Fetch-Site`; without it
/// (older browsers), an `Origin` must name this host. `Origin: null` alone is not enough: with
/// `Referrer-Policy: no-referrer` a cross-site form sends it too.
pub fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return site.as_bytes() == b"same-origin";
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) else {
        // No browser signal at all: a non-browser client, which still needs the session
        // cookie and its CSRF token.
        return true;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin.strip_prefix("https://").or_else(|| origin.strip_prefix("http://"));
    matches!((origin_host, host), (Some(a), Some(b)) if a.eq_ignore_ascii_case(b))
}

/// Whether `sent` is the session's CSRF token, compared in constant time.
pub fn csrf_matches(sent: Option<&str>, expected: &str) -> bool {
    sent.is_some_and(|sent| bool::from(sent.as_bytes().ct_eq(expected.as_bytes())))
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue};

    use super::{csrf_matches, same_origin};

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn only_the_page_itself_may_post() {
        let host = ("host", "memory.example.com");
        assert!(same_origin(&headers(&[host, ("sec-fetch-site", "same-origin")])));
        assert!(same_origin(&headers(&[host, ("origin", "https://memory.example.com")])));
        // Not a browser at all: the cookie and the CSRF token still decide.
        assert!(same_origin(&headers(&[host])));
        for refused in [
            &[host, ("sec-fetch-site", "cross-site")][..],
            &[host, ("sec-fetch-site", "same-site")],
            &[host, ("sec-fetch-site", "cross-site"), ("origin", "null")],
            &[host, ("origin", "null")],
            &[host, ("origin", "https://evil.example")],
            &[host, ("origin", "https://memory.example.com.evil.example")],
        ] {
            assert!(!same_origin(&headers(refused)), "{refused:?}");
        }
    }

    #[test]
    fn the_csrf_token_must_match_exactly() {
        assert!(csrf_matches(Some("abc"), "abc"));
        assert!(!csrf_matches(Some("abd"), "abc"));
        assert!(!csrf_matches(Some(""), "abc"));
        assert!(!csrf_matches(None, "abc"));
    }
}
