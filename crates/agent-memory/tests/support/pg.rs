//! What the PostgreSQL tests need beside the store: fresh names, and plain driver connections.

use tokio_postgres::NoTls;

/// A fresh name, so tests sharing the server never share a table, a role or a session name.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

/// A plain driver connection to `url` (without TLS), for inspecting and disturbing the server.
pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("connect");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}
