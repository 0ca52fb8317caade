//! "Download my data": every live record of the person, one JSON object per line in the CLI's
//! export format ([`crate::transfer`]), namespace by namespace and keys ascending within each,
//! as `agent-memory export` writes them. The body is streamed page by page, so its size never
//! matters; a store failure midway aborts the response, so a browser reports a failed download
//! instead of saving a short file.

use std::sync::Arc;

use agent_memory::{MemoryStore, PageRequest};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

/// Records per store page (the store's maximum).
const PAGE: usize = 100;

/// Pages encoded ahead of the client.
const AHEAD: usize = 4;

/// The streamed download of `user_id`'s records in `application_id`.
pub fn response(store: Arc<dyn MemoryStore>, application_id: String, user_id: String) -> Response {
    let (sender, receiver) = mpsc::channel::<std::io::Result<Bytes>>(AHEAD);
    tokio::spawn(async move {
        if let Err(err) = write(&*store, &application_id, &user_id, &sender).await {
            tracing::warn!(error = %err, "review page: the download failed midway");
            let _ = sender.send(Err(std::io::Error::other("the store failed"))).await;
        }
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    });
    let mut response = Body::from_stream(stream).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/jsonl"));
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"my-memories.jsonl\""),
    );
    response
}

/// Sends every page; stops quietly when the client went away.
async fn write(
    store: &dyn MemoryStore,
    application_id: &str,
    user_id: &str,
    sender: &mpsc::Sender<std::io::Result<Bytes>>,
) -> agent_memory::Result<()> {
    let mut namespace_cursor = None;
    loop {
        let request = PageRequest::new(PAGE).after_opt(namespace_cursor);
        let namespaces = store.list_namespaces(application_id, user_id, request).await?;
        for scope in &namespaces.items {
            let mut cursor = None;
            loop {
                let page = store.list(scope, PageRequest::new(PAGE).after_opt(cursor)).await?;
                let mut lines = Vec::new();
                for record in &page.items {
                    serde_json::to_writer(&mut lines, record)
                        .expect("a record always serializes to JSON");
                    lines.push(b'\n');
                }
                if sender.send(Ok(Bytes::from(lines))).await.is_err() {
                    return Ok(());
                }
                cursor = page.next_cursor;
                if cursor.is_none() {
                    break;
                }
            }
        }
        namespace_cursor = namespaces.next_cursor;
        if namespace_cursor.is_none() {
            return Ok(());
        }
    }
}
