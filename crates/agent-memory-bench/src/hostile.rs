//! The hostile search: how long one `search` call can hold the server.
//!
//! One user stores `records` records of 64 KiB of `a`; the search query is `a`s around one `b`,
//! in three shapes: `tail` (`a…ab`, the worst case of a matcher that compares from the front),
//! `head` (`ba…a`, the worst case of one that compares from the back, as PostgreSQL's `strpos`
//! does) and `split` (fifteen `a`s, `b`, then `a`s: the worst case of a 16-byte prefilter). Nothing matches, so a call ends at the provider's scan bounds.
//! The report gives the first call's duration (how long one call holds the server), the whole
//! scan to the end (every call and its slowest one) and, on a single Redis server, the slowest
//! `PING` answered by a second connection while the first call ran: Redis runs one script at a
//! time, so that is how long every other tenant waited.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::{MemoryScope, MemoryStore, MemoryWrite, PageRequest};
use serde::Serialize;

use crate::runner::describe;
use crate::target::provider_of;

/// Bytes of every hostile record's content (the contract's largest content).
pub const RECORD_BYTES: usize = 65_536;

/// Calls one hostile scan makes at most before giving up (a safety net, not a bound of the
/// contract).
const MAX_CALLS: usize = 100_000;

/// One hostile-search measurement.
#[derive(Debug, Clone, Serialize)]
pub struct HostileResult {
    /// The provider, as [`provider_of`] names it.
    pub provider: &'static str,
    /// `tail` (`a…ab`), `head` (`ba…a`), `split` (`a` × 15, `b`, `a…a`), or `words` (16
    /// words of `a…aB`, `all_words`, ignoring case).
    pub shape: &'static str,
    /// Query length in bytes.
    pub query_bytes: usize,
    /// Records of [`RECORD_BYTES`] searched.
    pub records: usize,
    /// Duration of the first call, in milliseconds.
    pub first_call_ms: f64,
    /// Calls until the cursor ran out.
    pub calls: usize,
    /// The slowest call of the whole scan, in milliseconds.
    pub slowest_call_ms: f64,
    /// The whole scan, in milliseconds.
    pub total_ms: f64,
    /// The slowest concurrent `PING` during the first call, in milliseconds (single Redis
    /// servers only).
    pub slowest_ping_ms: Option<f64>,
    /// Set when the store rejected the query (for example a query over the length limit).
    pub rejected: Option<String>,
}

/// The query of one shape: `bytes - 1` `a`s and one `b`, at the end (`tail`), the front
/// (`head`) or after the first fifteen `a`s (`split`); or, for `words` (searched with
/// `all_words` and `ignore_case`), the most words a query may hold, each `a`s and one `B`,
/// together at most `bytes` long.
pub fn query(shape: &str, bytes: usize) -> String {
    if shape == "words" {
        let words = agent_memory::MAX_QUERY_WORDS;
        let word = (bytes.saturating_sub(words - 1) / words).max(1);
        let one = format!("{}B", "a".repeat(word - 1));
        return vec![one; words].join(" ");
    }
    let at = match shape {
        "head" => 0,
        "split" => 15.min(bytes.saturating_sub(1)),
        _ => bytes.saturating_sub(1),
    };
    format!("{}b{}", "a".repeat(at), "a".repeat(bytes.saturating_sub(1 + at)))
}

/// Stores the hostile records under a fresh application id, runs every query shape and erases
/// the records again.
///
/// # Errors
/// When the store cannot be opened or written.
pub async fn run(
    url: &str,
    records: usize,
    query_bytes: usize,
) -> Result<Vec<HostileResult>, String> {
    let provider = provider_of(url)?;
    let store: Arc<dyn MemoryStore> =
        agent_memory::open(url).map_err(|err| format!("open: {}", describe(&err)))?;
    store.start().await.map_err(|err| format!("start: {}", describe(&err)))?;
    let app = format!("bench-hostile-{}", std::process::id());
    let scope = MemoryScope::new(&app, "hostile").map_err(|err| describe(&err))?;
    let content = "a".repeat(RECORD_BYTES);
    for n in 0..records {
        store
            .put(&scope, &format!("k{n:05}"), MemoryWrite::new(content.clone()))
            .await
            .map_err(|err| format!("put: {}", describe(&err)))?;
    }
    let mut out = Vec::new();
    for shape in ["tail", "head", "split", "words"] {
        let q = query(shape, query_bytes);
        out.push(scan(&store, url, provider, &scope, shape, &q, records).await?);
    }
    store.delete_user(&app, "hostile").await.map_err(|err| format!("erase: {}", describe(&err)))?;
    store.close().await.map_err(|err| format!("close: {}", describe(&err)))?;
    Ok(out)
}

async fn scan(
    store: &Arc<dyn MemoryStore>,
    url: &str,
    provider: &'static str,
    scope: &MemoryScope,
    shape: &'static str,
    q: &str,
    records: usize,
) -> Result<HostileResult, String> {
    let mut result = HostileResult {
        provider,
        shape,
        query_bytes: q.len(),
        records,
        first_call_ms: 0.0,
        calls: 0,
        slowest_call_ms: 0.0,
        total_ms: 0.0,
        slowest_ping_ms: None,
        rejected: None,
    };
    // Plain TCP only (a `rediss` server would need the TLS setup of the store).
    let pinger = if provider == "redis" && url.starts_with("redis://") {
        Some(Pinger::start(url).await?)
    } else {
        None
    };
    let started = Instant::now();
    let mut after = None;
    loop {
        let mut page = PageRequest::new(20);
        if shape == "words" {
            page = page.all_words().ignore_case();
        }
        if let Some(cursor) = after.take() {
            page = page.after(cursor);
        }
        let call = Instant::now();
        let reply = store.search(scope, q, page).await;
        let took = ms(call.elapsed());
        if result.calls == 0 {
            result.first_call_ms = took;
            if let Some(pinger) = &pinger {
                result.slowest_ping_ms = Some(pinger.stop().await);
            }
        }
        result.calls += 1;
        result.slowest_call_ms = result.slowest_call_ms.max(took);
        match reply {
            Ok(page) => match page.next_cursor {
                Some(cursor) if result.calls < MAX_CALLS => after = Some(cursor),
                _ => break,
            },
            Err(err) => {
                result.rejected = Some(err.to_string());
                break;
            }
        }
    }
    result.total_ms = ms(started.elapsed());
    Ok(result)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

/// `PING`s on a plain TCP connection of its own, one after another, keeping the slowest
/// answer. Any answer counts, `-BUSY` included (what Redis replies once a script has run past
/// `busy-reply-threshold`): the time is how long the server kept this client waiting. No
/// client library in between, so no response timeout cuts the wait short.
struct Pinger {
    stop: Arc<AtomicBool>,
    task: tokio::sync::Mutex<Option<tokio::task::JoinHandle<f64>>>,
}

impl Pinger {
    async fn start(url: &str) -> Result<Self, String> {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

        let parsed = url::Url::parse(url).map_err(|err| format!("redis url: {err}"))?;
        let address = format!(
            "{}:{}",
            parsed.host_str().unwrap_or("127.0.0.1"),
            parsed.port().unwrap_or(6379)
        );
        // A call that outlived the store's response timeout may still be running on the
        // server: wait until the server answers again before measuring the next one.
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut stream = loop {
            let attempt = async {
                let mut stream = BufReader::new(tokio::net::TcpStream::connect(&address).await?);
                stream.get_mut().write_all(b"PING\r\n").await?;
                let mut line = String::new();
                stream.read_line(&mut line).await?;
                Ok::<_, std::io::Error>((stream, line))
            };
            match attempt.await {
                Ok((stream, line)) if line.starts_with("+PONG") => break stream,
                _ if Instant::now() > deadline => return Err("redis never answered PING".into()),
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let mut slowest = 0.0f64;
            let mut line = String::new();
            while !flag.load(Ordering::Relaxed) {
                let sent = Instant::now();
                line.clear();
                if stream.get_mut().write_all(b"PING\r\n").await.is_err()
                    || stream.read_line(&mut line).await.unwrap_or(0) == 0
                {
                    break;
                }
                slowest = slowest.max(ms(sent.elapsed()));
            }
            slowest
        });
        // Let the first PING go out before the search does.
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(Self { stop, task: tokio::sync::Mutex::new(Some(task)) })
    }

    async fn stop(&self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        match self.task.lock().await.take() {
            Some(task) => task.await.unwrap_or(f64::NAN),
            None => f64::NAN,
        }
    }
}

/// The results as a table.
pub fn table(results: &[HostileResult]) -> String {
    let mut out = String::from(
        "provider       shape  query  records  first call ms  calls  slowest ms  total ms  \
         slowest PING ms\n",
    );
    for r in results {
        let ping = r.slowest_ping_ms.map_or_else(|| "-".to_owned(), |p| format!("{p:.1}"));
        let first = match &r.rejected {
            Some(why) if r.calls == 1 => format!("rejected: {why}"),
            _ => format!("{:.1}", r.first_call_ms),
        };
        out.push_str(&format!(
            "{:<14} {:<6} {:>5}  {:>7}  {:>13}  {:>5}  {:>10.1}  {:>8.1}  {:>15}\n",
            r.provider,
            r.shape,
            r.query_bytes,
            r.records,
            first,
            r.calls,
            r.slowest_call_ms,
            r.total_ms,
            ping
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_have_their_shape_and_length() {
        assert_eq!(query("tail", 4), "aaab");
        assert_eq!(query("head", 4), "baaa");
        assert_eq!(query("split", 20), format!("{}b{}", "a".repeat(15), "a".repeat(4)));
        assert_eq!(query("tail", 1024).len(), 1024);
        let words = query("words", 1024);
        assert!(words.len() <= 1024 && words.split(' ').count() == 16, "{}", words.len());
    }
}
