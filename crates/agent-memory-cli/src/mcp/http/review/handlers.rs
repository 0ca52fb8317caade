//! One function per route. Each reads the session first (every route but sign-in and the
//! stylesheet needs one), and every POST passes the same-origin and CSRF checks before it
//! reads anything. The store calls use the session's user and the server's application only.

// The helpers return `Err(page)` with the page to answer instead, once per request, straight
// to the handler; boxing it would only add an allocation to every refusal.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::sync::Arc;

use agent_memory::review::verify_token;
use agent_memory::{
    Cursor, MemoryError, MemoryRecord, MemoryScope, MemoryWrite, PageRequest, Revision, Source,
    Timestamp,
};
use axum::body::Bytes;
use axum::extract::{FromRequestParts, RawQuery, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use cookie::{Cookie, SameSite};
use governor::clock::{Clock, DefaultClock};
use maud::Markup;

use super::session::{Session, SignInRefused};
use super::{guard, pages, Review, COOKIE};

/// Records per page.
const PAGE_SIZE: usize = 20;

/// Namespaces listed on the page (in one store page).
const MAX_NAMESPACES: usize = 100;

/// Store calls one search page may make to fill itself (a provider may return short pages).
const SEARCH_ROUNDS: usize = 10;

/// Cursors kept for "Previous" (older pages fall back to the first page).
const MAX_TRAIL: usize = 50;

/// The marker of "no cursor" (the first page) in a trail.
const FIRST: &str = "-";

/// The page's actions by kind (`agent_memory_review_actions_total` on `/metrics`).
const ACTIONS: &str = "agent_memory.review.actions";

/// Refused sign-in links by reason (`agent_memory_review_links_refused_total`).
const LINKS_REFUSED: &str = "agent_memory.review.links_refused";

/// The agent named in the source of a record the person edited.
const EDITED_BY: &str = "review-page";

type Params = HashMap<String, String>;

/// What a handler answers: its page, or the page a check answered instead.
type Answer = Result<Response, Response>;

fn params(text: &[u8]) -> Params {
    url::form_urlencoded::parse(text).into_owned().collect()
}

fn query_params(query: Option<String>) -> Params {
    params(query.unwrap_or_default().as_bytes())
}

/// `/review/?…` with these parameters, encoded.
fn page_url(pairs: &[(&str, &str)]) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        query.append_pair(name, value);
    }
    format!("/review/?{}", query.finish())
}

fn html(status: StatusCode, markup: &Markup) -> Response {
    (status, Html(markup.clone().into_string())).into_response()
}

fn count(action: &'static str) {
    metrics::counter!(ACTIONS, "action" => action).increment(1);
    tracing::info!(action, "review page");
}

fn ended() -> Response {
    html(
        StatusCode::UNAUTHORIZED,
        &pages::message(
            "Your session has ended",
            &["Open the page again from the application (for example its \"Your data\" menu) \
               to get a new link."],
            None,
        ),
    )
}

fn unavailable() -> Response {
    html(
        StatusCode::SERVICE_UNAVAILABLE,
        &pages::message(
            "This page is unavailable right now",
            &["Please try again in a few minutes."],
            None,
        ),
    )
}

fn forbidden() -> Response {
    html(
        StatusCode::FORBIDDEN,
        &pages::message(
            "This request was refused",
            &["It did not come from this page. Go back to the page and try again."],
            Some(("/review/", "Back to your memories")),
        ),
    )
}

fn store_error(err: &MemoryError) -> Response {
    match err {
        MemoryError::Invalid { .. } | MemoryError::QuotaExceeded { .. } => {
            // Fixed sentences naming a field and a rule: no content in them.
            let reason = err.to_string();
            html(
                StatusCode::BAD_REQUEST,
                &pages::message(
                    "That did not work",
                    &[&reason],
                    Some(("/review/", "Back to your memories")),
                ),
            )
        }
        MemoryError::Conflict { .. } => conflict(),
        _ => {
            tracing::warn!(error = %err, "review page: the store failed");
            unavailable()
        }
    }
}

fn conflict() -> Response {
    html(
        StatusCode::CONFLICT,
        &pages::message(
            "Changed elsewhere",
            &["This memory was changed elsewhere (or removed) since you opened it, so nothing \
               was changed. Reload to see the current version."],
            Some(("/review/", "Reload")),
        ),
    )
}

/// The session the request's cookie names, within its rate; or the page to answer instead.
fn session(review: &Review, headers: &HeaderMap) -> Result<Session, Response> {
    let Some(secret) = review.secret.current() else { return Err(unavailable()) };
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|cookie| cookie.name() == COOKIE)
        .map(|cookie| cookie.value().to_owned());
    let Some(session) = cookie.and_then(|cookie| review.sessions.find(&cookie, &secret)) else {
        return Err(ended());
    };
    if let Err(not_until) = review.per_session.check_key(&session.key) {
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        let mut response = html(
            StatusCode::TOO_MANY_REQUESTS,
            &pages::message("Too many requests", &["Please wait a moment and try again."], None),
        );
        let seconds = wait.as_secs().max(1);
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        return Err(response);
    }
    Ok(session)
}

/// The session of a POST that came from the page itself and carries its CSRF token.
/// The signed-in session of a GET route, read before the handler runs; a request without one
/// is answered with the page [`session`] gives instead.
pub struct SignedIn(Session);

impl FromRequestParts<Arc<Review>> for SignedIn {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, review: &Arc<Review>) -> Result<Self, Response> {
        session(review, &parts.headers).map(SignedIn)
    }
}

fn post_session(review: &Review, headers: &HeaderMap, form: &Params) -> Result<Session, Response> {
    if !guard::same_origin(headers) {
        count("refused_cross_origin");
        return Err(forbidden());
    }
    let session = session(review, headers)?;
    if !guard::csrf_matches(form.get("csrf").map(String::as_str), &session.csrf) {
        count("refused_csrf");
        return Err(forbidden());
    }
    Ok(session)
}

fn scope(review: &Review, session: &Session, namespace: &str) -> Result<MemoryScope, Response> {
    let base = MemoryScope::new(review.app.clone(), session.user_id.clone())
        .map_err(|err| store_error(&err))?;
    if namespace.is_empty() {
        Ok(base)
    } else {
        base.with_namespace(namespace).map_err(|err| store_error(&err))
    }
}

/// The session cookie: script cannot read it, no other site's request carries it, and it is
/// sent only to the page's own paths (and only over TLS when `secure`).
fn session_cookie(secure: bool, value: String, max_age: std::time::Duration) -> Cookie<'static> {
    let seconds = i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX);
    Cookie::build((COOKIE, value))
        .path("/review/")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(secure)
        .max_age(cookie::time::Duration::seconds(seconds))
        .build()
}

fn with_cookie(mut response: Response, cookie: &Cookie<'_>) -> Response {
    if let Ok(value) = HeaderValue::from_str(&cookie.to_string()) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

fn cleared_cookie(review: &Review) -> Cookie<'static> {
    session_cookie(review.secure, String::new(), std::time::Duration::ZERO)
}

/// `GET /review`: to `/review/`.
pub async fn to_index() -> Redirect {
    Redirect::permanent("/review/")
}

/// `GET /review/style.css`.
pub async fn style() -> Response {
    let mut response = pages::STYLE.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/css; charset=utf-8"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=3600"));
    response
}

/// `GET /review/open?token=…`: a valid, unused link becomes a session cookie and a redirect
/// to the page without the token; anything else is a plain 401 page and no cookie.
pub async fn open(State(review): State<Arc<Review>>, RawQuery(query): RawQuery) -> Response {
    let Some(secret) = review.secret.current() else { return unavailable() };
    let token = query_params(query).remove("token").unwrap_or_default();
    let refused = |kind: &'static str| {
        metrics::counter!(LINKS_REFUSED, "reason" => kind).increment(1);
        tracing::info!(reason = kind, "review page: a sign-in link was refused");
        html(
            StatusCode::UNAUTHORIZED,
            &pages::message(
                "This link is no longer valid",
                &[
                    "Links to this page work once, for a short time.",
                    "Open the page again from the application (for example its \"Your data\" \
                     menu) to get a new link.",
                ],
                None,
            ),
        )
    };
    let claims = match verify_token(&secret, &token, Timestamp::now()) {
        Ok(claims) => claims,
        Err(why) => return refused(why.kind()),
    };
    if claims.application_id != review.app {
        return refused("other_application");
    }
    let (value, lifetime) = match review.sessions.sign_in(&claims, &secret) {
        Ok(made) => made,
        Err(SignInRefused::Reused) => return refused("reused"),
        Err(SignInRefused::Unavailable) => return unavailable(),
    };
    count("sign_in");
    let cookie = session_cookie(review.secure, value, lifetime);
    with_cookie(Redirect::to("/review/").into_response(), &cookie)
}

/// `GET /review/?ns=…&q=…&after=…&trail=…`: one page of a namespace, or of a search in it.
pub async fn index(
    State(review): State<Arc<Review>>,
    SignedIn(session): SignedIn,
    RawQuery(query): RawQuery,
) -> Answer {
    let markup = list_page(&review, &session, &query_params(query)).await?;
    Ok(html(StatusCode::OK, &markup))
}

async fn list_page(
    review: &Review,
    session: &Session,
    params: &Params,
) -> Result<Markup, Response> {
    let user = &session.user_id;
    let names = review
        .store
        .list_namespaces(&review.app, user, PageRequest::new(MAX_NAMESPACES))
        .await
        .map_err(|err| store_error(&err))?;
    let more_namespaces = names.next_cursor.is_some();
    let mut namespaces: Vec<String> =
        names.items.iter().map(|scope| scope.namespace_or_empty().to_owned()).collect();
    let namespace = match params.get("ns") {
        Some(ns) => ns.clone(),
        None => namespaces.first().cloned().unwrap_or_default(),
    };
    if !namespaces.contains(&namespace) {
        namespaces.push(namespace.clone());
    }
    let scope = scope(review, session, &namespace)?;
    let query = params.get("q").map(|q| q.trim().to_owned()).filter(|q| !q.is_empty());
    let after = match params.get("after").filter(|a| !a.is_empty() && a.as_str() != FIRST) {
        Some(token) => Some(Cursor::parse(token).map_err(|err| store_error(&err))?),
        None => None,
    };
    let mut trail: Vec<String> = params
        .get("trail")
        .map(|t| t.split('.').filter(|s| !s.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default();
    let (records, next_cursor) = match &query {
        None => {
            let page = review
                .store
                .list(&scope, PageRequest::new(PAGE_SIZE).after_opt(after.clone()))
                .await
                .map_err(|err| store_error(&err))?;
            (page.items, page.next_cursor)
        }
        Some(text) => search(review, &scope, text, after.clone()).await?,
    };
    count(if query.is_some() { "search" } else { "view" });

    let q = query.as_deref().unwrap_or_default();
    let mut base: Vec<(&str, &str)> = vec![("ns", namespace.as_str())];
    if query.is_some() {
        base.push(("q", q));
    }
    let previous = trail.split_last().map(|(last, rest)| {
        let rest = rest.join(".");
        let mut pairs = base.clone();
        pairs.push(("after", last));
        pairs.push(("trail", &rest));
        page_url(&pairs)
    });
    let here = after.as_ref().map_or(FIRST, Cursor::as_str).to_owned();
    trail.push(here);
    if trail.len() > MAX_TRAIL {
        trail.remove(0);
    }
    let next = next_cursor.as_ref().map(|cursor| {
        let trail = trail.join(".");
        let mut pairs = base.clone();
        pairs.push(("after", cursor.as_str()));
        pairs.push(("trail", &trail));
        page_url(&pairs)
    });
    let namespace_urls = namespaces.iter().map(|ns| page_url(&[("ns", ns)])).collect();
    let edit_urls = records
        .iter()
        .map(|record| {
            let mut query = url::form_urlencoded::Serializer::new(String::new());
            query.append_pair("ns", &namespace).append_pair("key", &record.key);
            format!("/review/edit?{}", query.finish())
        })
        .collect();
    let notice = match params.get("done").map(String::as_str) {
        Some("saved") => Some("Saved."),
        Some("deleted") => Some("Deleted."),
        _ => None,
    };
    Ok(pages::list(&pages::ListView {
        csrf: &session.csrf,
        namespaces: &namespaces,
        more_namespaces,
        namespace: &namespace,
        query: query.as_deref(),
        records: &records,
        previous,
        next,
        notice,
        namespace_url: page_url(&[("ns", &namespace)]),
        edit_urls,
        namespace_urls,
    }))
}

/// Up to a page of matches, calling the store until the page is full, the search is done, or
/// [`SEARCH_ROUNDS`] calls were made (a provider may inspect a bounded number of keys per call).
/// A person types words, not substrings: a record matches when it holds every word, in any
/// order and any case.
async fn search(
    review: &Review,
    scope: &MemoryScope,
    text: &str,
    mut after: Option<Cursor>,
) -> Result<(Vec<MemoryRecord>, Option<Cursor>), Response> {
    let mut found = Vec::new();
    for _ in 0..SEARCH_ROUNDS {
        let request = PageRequest::new(PAGE_SIZE - found.len())
            .all_words()
            .ignore_case()
            .after_opt(after.take());
        let page =
            review.store.search(scope, text, request).await.map_err(|err| store_error(&err))?;
        found.extend(page.items);
        after = page.next_cursor;
        if after.is_none() || found.len() >= PAGE_SIZE {
            break;
        }
    }
    Ok((found, after))
}

/// `GET /review/edit?ns=…&key=…`: the edit form, carrying the record's revision.
pub async fn edit_form(
    State(review): State<Arc<Review>>,
    SignedIn(session): SignedIn,
    RawQuery(query): RawQuery,
) -> Answer {
    let params = query_params(query);
    let namespace = params.get("ns").cloned().unwrap_or_default();
    let key = params.get("key").cloned().unwrap_or_default();
    let scope = scope(&review, &session, &namespace)?;
    Ok(match review.store.get(&scope, &key).await {
        Ok(Some(record)) => {
            let back = page_url(&[("ns", &namespace)]);
            html(StatusCode::OK, &pages::edit(&record, &namespace, &session.csrf, &back))
        }
        Ok(None) => conflict(),
        Err(err) => store_error(&err),
    })
}

/// The fields a record form posts.
struct RecordForm {
    namespace: String,
    key: String,
    revision: Revision,
}

fn record_form(form: &Params) -> Result<RecordForm, Response> {
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    let revision = Revision::new(field("revision")).map_err(|err| store_error(&err))?;
    Ok(RecordForm { namespace: field("ns"), key: field("key"), revision })
}

/// What a POST about one record passes first: the session's checks, the record's form and
/// the person's scope for its namespace.
fn record_post(
    review: &Review,
    headers: &HeaderMap,
    form: &Params,
) -> Result<(RecordForm, MemoryScope), Response> {
    let session = post_session(review, headers, form)?;
    let target = record_form(form)?;
    let scope = scope(review, &session, &target.namespace)?;
    Ok((target, scope))
}

/// `POST /review/edit`: new content for a record, written only over the revision the form
/// was made from; metadata and expiry stay, the source says the person edited it.
pub async fn edit(State(review): State<Arc<Review>>, headers: HeaderMap, body: Bytes) -> Answer {
    let form = params(&body);
    let (target, scope) = record_post(&review, &headers, &form)?;
    // Browsers send textarea line breaks as CRLF.
    let content = form.get("content").map(|c| c.replace("\r\n", "\n")).unwrap_or_default();
    let current = match review.store.get(&scope, &target.key).await {
        Ok(Some(record)) if record.revision == target.revision => record,
        Ok(_) => {
            count("edit_conflict");
            return Err(conflict());
        }
        Err(err) => return Err(store_error(&err)),
    };
    let write = MemoryWrite::new(content)
        .metadata(serde_json::Value::Object(current.metadata))
        .expires_at_opt(current.expires_at)
        .source(Source::default().agent(EDITED_BY))
        .expected_revision(target.revision);
    Ok(match review.store.put(&scope, &target.key, write).await {
        Ok(_) => {
            count("edit");
            Redirect::to(&page_url(&[("ns", &target.namespace), ("done", "saved")])).into_response()
        }
        Err(err) => {
            if matches!(err, MemoryError::Conflict { .. }) {
                count("edit_conflict");
            }
            store_error(&err)
        }
    })
}

/// `POST /review/delete`: removes a record, only at the revision the page showed.
pub async fn delete(State(review): State<Arc<Review>>, headers: HeaderMap, body: Bytes) -> Answer {
    let form = params(&body);
    let (target, scope) = record_post(&review, &headers, &form)?;
    Ok(match review.store.delete(&scope, &target.key, Some(&target.revision)).await {
        Ok(true) => {
            count("delete");
            Redirect::to(&page_url(&[("ns", &target.namespace), ("done", "deleted")]))
                .into_response()
        }
        Ok(false) => conflict(),
        Err(err) => store_error(&err),
    })
}

/// `GET /review/download`: every record of the person, as the CLI's export writes them.
pub async fn download(State(review): State<Arc<Review>>, SignedIn(session): SignedIn) -> Answer {
    count("download");
    Ok(super::download::response(Arc::clone(&review.store), review.app.clone(), session.user_id))
}

/// `GET /review/erase`: the confirmation step.
pub async fn erase_form(SignedIn(session): SignedIn) -> Answer {
    Ok(html(StatusCode::OK, &pages::erase_form(&session.csrf, None)))
}

/// `POST /review/erase`: with `ERASE` typed, every record of the person in this application
/// goes (`delete_user`), the session ends, and the page says how many went and what erasure
/// reaches.
pub async fn erase(State(review): State<Arc<Review>>, headers: HeaderMap, body: Bytes) -> Answer {
    let form = params(&body);
    let session = post_session(&review, &headers, &form)?;
    if form.get("confirm").map(|c| c.trim()) != Some("ERASE") {
        return Err(html(
            StatusCode::BAD_REQUEST,
            &pages::erase_form(
                &session.csrf,
                Some("Nothing was erased: type ERASE, in capital letters, to confirm."),
            ),
        ));
    }
    Ok(match review.store.delete_user(&review.app, &session.user_id).await {
        Ok(erased) => {
            count("erase");
            review.sessions.end(&session.key);
            let page = html(StatusCode::OK, &pages::erased(erased, review.provider));
            with_cookie(page, &cleared_cookie(&review))
        }
        Err(err) => store_error(&err),
    })
}

/// `POST /review/signout`: ends the session and clears the cookie.
pub async fn sign_out(
    State(review): State<Arc<Review>>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let form = params(&body);
    let session = post_session(&review, &headers, &form)?;
    review.sessions.end(&session.key);
    count("sign_out");
    let page = html(
        StatusCode::OK,
        &pages::message(
            "You are signed out",
            &["To see your memories again, open the page from the application."],
            None,
        ),
    );
    Ok(with_cookie(page, &cleared_cookie(&review)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::session_cookie;

    #[test]
    fn the_session_cookie_carries_its_flags_and_secure_over_tls() {
        let plain = session_cookie(false, "v".into(), Duration::from_secs(60)).to_string();
        assert_eq!(
            plain,
            "agent_memory_review=v; HttpOnly; SameSite=Strict; Path=/review/; Max-Age=60"
        );
        let tls = session_cookie(true, "v".into(), Duration::from_secs(60)).to_string();
        assert!(tls.contains("; Secure"), "{tls}");
    }
}
