//! Store URLs: which provider one names, how to show it without secrets, how to ask for a pool
//! of exactly C connections, and the plain form the setup connections and the ceiling tools use.

use url::Url;

/// The provider a store URL selects, as the report names it.
///
/// # Errors
/// For a scheme `agent_memory::open` does not know.
pub fn provider_of(url: &str) -> Result<&'static str, String> {
    let scheme = url.split_once(':').map(|(s, _)| s.to_ascii_lowercase()).unwrap_or_default();
    match scheme.as_str() {
        "memory" => Ok("memory"),
        "sqlite" => Ok("sqlite"),
        "postgres" | "postgresql" => Ok("postgres"),
        "redis" | "rediss" => Ok("redis"),
        "redis+cluster" | "rediss+cluster" => Ok("redis-cluster"),
        _ => Err(format!("unknown store scheme {scheme:?}")),
    }
}

/// The URL without user, password or query, safe to print and to keep in reports.
pub fn redacted(url: &str) -> String {
    match Url::parse(url) {
        Ok(parsed) if parsed.has_host() => {
            let host = parsed.host_str().unwrap_or("");
            let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
            format!("{}://{host}{port}{}", parsed.scheme(), parsed.path())
        }
        _ => url.split('?').next().unwrap_or(url).to_owned(),
    }
}

/// `url` with `name=value` added to its query (replacing an earlier `name`).
///
/// # Errors
/// When `url` does not parse.
pub fn with_query(url: &str, name: &str, value: &str) -> Result<String, String> {
    let mut parsed = Url::parse(url).map_err(|err| format!("store url does not parse: {err}"))?;
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(k, _)| k != name)
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    {
        let mut pairs = parsed.query_pairs_mut();
        pairs.clear();
        for (k, v) in &kept {
            pairs.append_pair(k, v);
        }
        pairs.append_pair(name, value);
    }
    Ok(parsed.to_string())
}

fn without_query(url: &str, schemes: &[&str]) -> Result<Url, String> {
    let mut parsed = Url::parse(url).map_err(|err| format!("store url does not parse: {err}"))?;
    if !schemes.contains(&parsed.scheme()) {
        return Err(format!("expected a {} url", schemes.join(" or ")));
    }
    // The query holds the provider's own options (pool sizes and the like), which libpq,
    // pgbench and redis-benchmark would reject.
    parsed.set_query(None);
    Ok(parsed)
}

/// The PostgreSQL URL for tokio-postgres and pgbench: the store URL without its query.
///
/// # Errors
/// When the URL is not a PostgreSQL URL.
pub fn pg_admin_url(url: &str) -> Result<String, String> {
    without_query(url, &["postgres", "postgresql"]).map(String::from)
}

/// The Redis URL for the setup connection: the store URL without its query.
///
/// # Errors
/// When the URL is not a single-server Redis URL.
pub fn redis_admin_url(url: &str) -> Result<String, String> {
    without_query(url, &["redis", "rediss"]).map(String::from)
}

/// The TLS files a `rediss` store URL names (`cacert`, `cert`, `key`), for the setup
/// connection, which must trust the same CA and show the same client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisTlsFiles {
    /// `cacert`.
    pub cacert: Option<String>,
    /// `cert`.
    pub cert: Option<String>,
    /// `key`.
    pub key: Option<String>,
}

/// The TLS files of a Redis store URL's query.
///
/// # Errors
/// When the URL does not parse.
pub fn redis_tls_files(url: &str) -> Result<RedisTlsFiles, String> {
    let parsed = Url::parse(url).map_err(|err| format!("store url does not parse: {err}"))?;
    let mut files = RedisTlsFiles::default();
    for (name, value) in parsed.query_pairs() {
        match name.as_ref() {
            "cacert" => files.cacert = Some(value.into_owned()),
            "cert" => files.cert = Some(value.into_owned()),
            "key" => files.key = Some(value.into_owned()),
            _ => {}
        }
    }
    Ok(files)
}

/// A Redis URL's parts, for redis-benchmark's flags.
#[derive(Debug, Clone)]
pub struct RedisParts {
    /// `-h`.
    pub host: String,
    /// `-p`.
    pub port: u16,
    /// `--user`.
    pub user: Option<String>,
    /// `-a`.
    pub password: Option<String>,
    /// `--dbnum`.
    pub db: u32,
}

/// Splits a single-server Redis URL.
///
/// # Errors
/// When the URL is not a single-server Redis URL or has no host.
pub fn redis_parts(url: &str) -> Result<RedisParts, String> {
    let parsed = without_query(url, &["redis"])?;
    let host = parsed.host_str().ok_or("redis url has no host")?.to_owned();
    let user = Some(decode(parsed.username())).filter(|u| !u.is_empty());
    let password = parsed.password().map(decode);
    let db = parsed.path().trim_start_matches('/').parse::<u32>().unwrap_or(0);
    Ok(RedisParts { host, port: parsed.port().unwrap_or(6379), user, password, db })
}

/// Percent-decoding of URL user info.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_providers() {
        assert_eq!(provider_of("memory:"), Ok("memory"));
        assert_eq!(provider_of("sqlite:/tmp/x.db"), Ok("sqlite"));
        assert_eq!(provider_of("postgresql://h/db"), Ok("postgres"));
        assert_eq!(provider_of("redis://h:6390"), Ok("redis"));
        assert!(provider_of("ftp://x").is_err());
    }

    #[test]
    fn reads_the_tls_files_of_a_rediss_url() {
        let files = redis_tls_files("rediss://h:1?cacert=/ca.pem&cert=/c.pem&key=/k.pem&x=1");
        assert_eq!(
            files.unwrap(),
            RedisTlsFiles {
                cacert: Some("/ca.pem".into()),
                cert: Some("/c.pem".into()),
                key: Some("/k.pem".into())
            }
        );
        assert_eq!(redis_tls_files("redis://h:1").unwrap(), RedisTlsFiles::default());
    }

    #[test]
    fn redacts_secrets_and_options() {
        let url = "postgres://alice:s3cret@127.0.0.1:5432/test?pool_max_size=16";
        assert_eq!(redacted(url), "postgres://127.0.0.1:5432/test");
        assert_eq!(redacted("sqlite:/tmp/b.db"), "sqlite:/tmp/b.db");
    }

    #[test]
    fn adds_and_strips_query_options() {
        let url = with_query("postgres://postgres@127.0.0.1:5432/test?a=1", "pool_max_size", "16")
            .expect("parses");
        assert_eq!(url, "postgres://postgres@127.0.0.1:5432/test?a=1&pool_max_size=16");
        assert_eq!(pg_admin_url(&url).expect("pg"), "postgres://postgres@127.0.0.1:5432/test");
    }

    #[test]
    fn splits_redis_urls() {
        let parts = redis_parts("redis://:p%40ss@127.0.0.1:6390/2").expect("parses");
        assert_eq!(parts.host, "127.0.0.1");
        assert_eq!(parts.port, 6390);
        assert_eq!(parts.password.as_deref(), Some("p@ss"));
        assert_eq!(parts.user, None);
        assert_eq!(parts.db, 2);
    }
}
