//! The everyday flow an agent developer writes: bind a scope from the authenticated session,
//! save what the user asked to remember, read it back in a later turn, update it safely, search,
//! and honour an erasure request.
//!
//! ```text
//! cargo run -p agent-memory --example quickstart                  # in-process store
//! cargo run -p agent-memory --example quickstart -- sqlite:/tmp/m.db
//! ```

use std::sync::Arc;

use agent_memory::{
    MemoryError, MemoryScope, MemoryStore, MemoryWrite, PageRequest, ScopedMemory, Source,
};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), MemoryError> {
    let url = std::env::args().nth(1).unwrap_or_else(|| "memory:".to_owned());
    let store: Arc<dyn MemoryStore> = agent_memory::open(&url)?;
    store.start().await?;

    // Trusted code binds the scope; the model never chooses it.
    let scope = MemoryScope::new("support-bot", "user-42")?;
    let memory = ScopedMemory::new(Arc::clone(&store), scope.clone())
        .with_source(Source::default().session("session-1").agent("support-bot"));

    // The user asked us to remember a preference.
    let saved = memory
        .put(
            "report-format",
            MemoryWrite::new("Start with an executive summary.")
                .metadata(json!({"category": "preferences"})),
        )
        .await?;
    println!("saved report-format at revision {}", saved.revision);

    // A later turn: read it back and update it without overwriting a concurrent change.
    if let Some(current) = memory.get("report-format").await? {
        let write = MemoryWrite::new("Use bullet points and start with an executive summary.")
            .metadata(json!({"category": "preferences"}))
            .expected_revision(current.revision);
        match memory.put("report-format", write).await {
            Ok(updated) => println!("updated to revision {}", updated.revision),
            Err(MemoryError::Conflict { .. }) => println!("changed meanwhile; read it again"),
            Err(other) => return Err(other),
        }
    }

    // Namespaces organise one user's memories.
    let travel = memory.namespace("travel")?;
    travel.put("home-airport", "BER").await?;

    // Literal search, paged until the cursor runs out.
    let mut page = PageRequest::new(10);
    loop {
        let hits = memory.search("executive summary", page.clone()).await?;
        for record in &hits.items {
            println!("match: {}", record.key);
        }
        match hits.next_cursor {
            Some(cursor) => page = page.after(cursor),
            None => break,
        }
    }

    // An erasure request: every namespace of the user, physically deleted.
    let removed = store.delete_user(scope.application_id(), scope.user_id()).await?;
    println!("erased {removed} records for user-42");

    store.close().await
}
