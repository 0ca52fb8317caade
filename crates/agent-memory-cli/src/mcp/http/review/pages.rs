//! The review page's HTML. Every page is a `maud` template: text and attribute values are
//! escaped by the template engine, so stored content (untrusted: an agent wrote it from a
//! conversation) always shows as text. No page carries a script.

use agent_memory::MemoryRecord;
use maud::{html, Markup, DOCTYPE};

use crate::output::format_time;

/// The stylesheet, served from the page's own origin at `/review/style.css`.
pub const STYLE: &str = include_str!("style.css");

/// What the person's session shows on every page: the CSRF token for the sign-out form.
pub struct Chrome<'a> {
    pub csrf: &'a str,
}

/// One page: the header (with "Sign out" when signed in), `body`, the footer.
pub fn layout(title: &str, chrome: Option<&Chrome<'_>>, body: &Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) " · Your memories" }
                link rel="stylesheet" href="/review/style.css";
            }
            body {
                header.top {
                    div.wrap {
                        a.brand href="/review/" { "Your memories" }
                        @if let Some(chrome) = chrome {
                            form.signout method="post" action="/review/signout" {
                                input type="hidden" name="csrf" value=(chrome.csrf);
                                button.link type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main.wrap { (body) }
                footer.wrap {
                    p { "What the assistant remembers about you, kept by this application. \
                         You can correct, download or erase it at any time." }
                }
            }
        }
    }
}

/// A page with a heading and a few paragraphs, for the states without records: an invalid
/// link, an ended session, signed out, a conflict, an error.
pub fn message(title: &str, lines: &[&str], action: Option<(&str, &str)>) -> Markup {
    let body = html! {
        section.card.message {
            h1 { (title) }
            @for line in lines { p { (line) } }
            @if let Some((href, label)) = action {
                p { a.button href=(href) { (label) } }
            }
        }
    };
    layout(title, None, &body)
}

/// A namespace as the person sees it: its name, or "default".
pub fn namespace_label(namespace: &str) -> &str {
    if namespace.is_empty() {
        "default"
    } else {
        namespace
    }
}

/// What the list page shows.
pub struct ListView<'a> {
    pub csrf: &'a str,
    /// Every namespace, `""` for the default one.
    pub namespaces: &'a [String],
    pub more_namespaces: bool,
    /// The namespace shown.
    pub namespace: &'a str,
    /// The search text, when searching.
    pub query: Option<&'a str>,
    pub records: &'a [MemoryRecord],
    pub previous: Option<String>,
    pub next: Option<String>,
    /// A fixed confirmation ("Saved.", "Deleted.").
    pub notice: Option<&'static str>,
    /// The URL of this namespace's first page (for "Clear search").
    pub namespace_url: String,
    /// The edit URL of each record, in order.
    pub edit_urls: Vec<String>,
    /// The namespace links, in order.
    pub namespace_urls: Vec<String>,
}

/// The list page: namespaces, the search box, one card per record, paging, and the data
/// actions (download, erase).
pub fn list(view: &ListView<'_>) -> Markup {
    let body = html! {
        @if let Some(notice) = view.notice {
            p.notice role="status" { (notice) }
        }
        section.intro {
            h1 { "What the assistant remembers about you" }
            p { "Each memory below was saved by the assistant while helping you. Edit one that \
                 is wrong, delete one you do not want kept, download everything, or erase it all." }
            div.actions {
                a.button href="/review/download" download="my-memories.jsonl" { "Download my data" }
                a.button.danger href="/review/erase" { "Erase everything" }
            }
        }
        @if view.namespaces.len() > 1 || view.more_namespaces {
            nav.namespaces aria-label="Namespaces" {
                h2 { "Namespaces" }
                ul {
                    @for (name, url) in view.namespaces.iter().zip(&view.namespace_urls) {
                        li {
                            @if name == view.namespace {
                                a href=(url) aria-current="page" { (namespace_label(name)) }
                            } @else {
                                a href=(url) { (namespace_label(name)) }
                            }
                        }
                    }
                    @if view.more_namespaces { li { "and more" } }
                }
            }
        }
        form.search method="get" action="/review/" role="search" {
            input type="hidden" name="ns" value=(view.namespace);
            label for="q" { "Search your memories" }
            div.row {
                input #q type="search" name="q" value=(view.query.unwrap_or_default())
                    placeholder="Words to look for, in any order and any case";
                button type="submit" { "Search" }
            }
        }
        section.records aria-label="Memories" {
            h2 {
                @if let Some(query) = view.query {
                    "Memories with every word of “" (query) "”"
                } @else {
                    "Memories in " (namespace_label(view.namespace))
                }
            }
            @if view.query.is_some() {
                p { a href=(view.namespace_url) { "Clear search" } }
            }
            @if view.records.is_empty() {
                p.empty { @if view.query.is_some() { "No memory matches." } @else { "Nothing is stored here." } }
            }
            @for (record, edit_url) in view.records.iter().zip(&view.edit_urls) {
                (card(record, edit_url, view.csrf, view.namespace))
            }
            nav.paging aria-label="Pages" {
                @if let Some(previous) = &view.previous { a.button href=(previous) rel="prev" { "Previous" } }
                @if let Some(next) = &view.next { a.button href=(next) rel="next" { "Next" } }
            }
        }
    };
    layout("Your memories", Some(&Chrome { csrf: view.csrf }), &body)
}

/// One record: key, content, details, and its "Edit" and "Delete" actions.
fn card(record: &MemoryRecord, edit_url: &str, csrf: &str, namespace: &str) -> Markup {
    html! {
        article.card {
            h3.key { (record.key) }
            p.content { (record.content) }
            dl.details {
                dt { "Saved" } dd { (format_time(record.created_at)) }
                dt { "Last changed" } dd { (format_time(record.updated_at)) }
                dt { "Expires" } dd {
                    @match record.expires_at { Some(at) => (format_time(at)), None => "never" }
                }
                @if !record.source.is_empty() {
                    dt { "Source" } dd { (source_text(record)) }
                }
                @if !record.metadata.is_empty() {
                    dt { "Details" }
                    dd { code.metadata { (serde_json::Value::Object(record.metadata.clone())) } }
                }
            }
            div.actions {
                a.button href=(edit_url) aria-label={ "Edit " (record.key) } { "Edit" }
                form method="post" action="/review/delete" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="ns" value=(namespace);
                    input type="hidden" name="key" value=(record.key);
                    input type="hidden" name="revision" value=(record.revision.as_str());
                    button.danger type="submit" aria-label={ "Delete " (record.key) } { "Delete" }
                }
            }
        }
    }
}

fn source_text(record: &MemoryRecord) -> String {
    let source = &record.source;
    [("agent", &source.agent), ("session", &source.session_id), ("run", &source.invocation_id)]
        .iter()
        .filter_map(|(what, value)| value.as_deref().map(|value| format!("{what} {value}")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The edit form of one record, carrying its revision.
pub fn edit(record: &MemoryRecord, namespace: &str, csrf: &str, back: &str) -> Markup {
    let body = html! {
        section.card {
            h1 { "Edit a memory" }
            p.key { (record.key) }
            form.edit method="post" action="/review/edit" {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="ns" value=(namespace);
                input type="hidden" name="key" value=(record.key);
                input type="hidden" name="revision" value=(record.revision.as_str());
                label for="content" { "Content" }
                textarea #content name="content" rows="8" required { (record.content) }
                p.hint { "Its details and expiry stay as they are." }
                div.actions {
                    button type="submit" { "Save" }
                    a.button.quiet href=(back) { "Cancel" }
                }
            }
        }
    };
    layout("Edit a memory", Some(&Chrome { csrf }), &body)
}

/// The confirmation step of "Erase everything".
pub fn erase_form(csrf: &str, error: Option<&str>) -> Markup {
    let body = html! {
        section.card {
            h1 { "Erase everything" }
            p { "This erases every memory the assistant keeps about you in this application, in \
                 every namespace. It cannot be undone. You may want to download your data first." }
            p { a href="/review/download" download="my-memories.jsonl" { "Download my data" } }
            form method="post" action="/review/erase" {
                input type="hidden" name="csrf" value=(csrf);
                @if let Some(error) = error { p.error role="alert" { (error) } }
                label for="confirm" { "Type ERASE to confirm" }
                input #confirm type="text" name="confirm" autocomplete="off" required;
                div.actions {
                    button.danger type="submit" { "Erase everything" }
                    a.button.quiet href="/review/" { "Cancel" }
                }
            }
        }
    };
    layout("Erase everything", Some(&Chrome { csrf }), &body)
}

/// After the erasure: how many memories went, and what erasure does and does not reach.
pub fn erased(count: u64, provider: &str) -> Markup {
    let what = if count == 1 { "memory was" } else { "memories were" };
    let body = html! {
        section.card.message {
            h1 { "Your memories are erased" }
            p.count role="status" { (count) " " (what) " erased." }
            h2 { "What erasure reaches" }
            p { "Nothing the assistant reads can return them any more: they are gone from every \
                 list, search and export, in every namespace. You have been signed out." }
            p { (provider_note(provider)) }
            p { "Erasure does not reach copies outside this store: the application's own logs or \
                 databases, or the records the application's model provider keeps of past \
                 conversations. Ask the application about those." }
        }
    };
    layout("Erased", None, &body)
}

/// What remains after an erasure on each provider, in plain words (SECURITY.md has the
/// operator's version, with what to run).
fn provider_note(provider: &str) -> &'static str {
    match provider {
        "postgres" => {
            "In the database, the space the erased data took is marked free and reused by later \
             writes; until then, and in the database's transaction logs and the operator's \
             backups, traces remain until they are recycled or deleted under the operator's \
             retention policy."
        }
        "redis" => {
            "The store's own files (its append-only log and snapshots, on every replica) keep \
             traces until the operator rewrites or replaces them; backups keep them until they \
             are deleted under the operator's retention policy."
        }
        "memory" => "The store lives in memory only; nothing of yours is kept on disk.",
        _ => {
            "In the database file, the space your data took is overwritten with zeros at once. \
             Copies of the file made earlier, such as backups, keep it until they are deleted \
             under the operator's retention policy."
        }
    }
}
