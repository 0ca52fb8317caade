//! Store URLs: which provider one names, how to show it without secrets, how to ask for a pool
//! of exactly C connections, and the plain form the setup connections and the ceiling tools use.

use agent_memory::provider::ConnectionUrl;
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

/// redis-benchmark's flags for the server of a single-server Redis URL: `-h`, `-p`, `--user`
/// and `-a` when the URL names a user or a password, and `--dbnum`.
///
/// # Errors
/// When the URL is not a single-server Redis URL or has no host.
pub fn redis_benchmark_flags(url: &str) -> Result<Vec<String>, String> {
    let parsed =
        ConnectionUrl::parse(url).map_err(|err| format!("store url does not parse: {err}"))?;
    if parsed.scheme != "redis" {
        return Err("expected a redis url".to_owned());
    }
    let server = parsed.single_host().map_err(|err| err.to_string())?;
    let server = server.filter(|server| !server.host.is_empty()).ok_or("redis url has no host")?;
    let port = server.port.unwrap_or(6379).to_string();
    let mut flags = vec!["-h".to_owned(), server.host.clone(), "-p".to_owned(), port];
    if !parsed.username.is_empty() {
        flags.extend(["--user".to_owned(), parsed.username.clone()]);
    }
    if let Some(password) = parsed.password {
        flags.extend(["-a".to_owned(), password, "--no-auth-warning".to_owned()]);
    }
    let db = parsed.path.trim_start_matches('/').parse::<u32>().unwrap_or(0);
    flags.extend(["--dbnum".to_owned(), db.to_string()]);
    Ok(flags)
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
        let flags = redis_benchmark_flags("redis://:p%40ss@127.0.0.1:6390/2").expect("parses");
        let expected =
            ["-h", "127.0.0.1", "-p", "6390", "-a", "p@ss", "--no-auth-warning", "--dbnum", "2"];
        assert_eq!(flags, expected);
        let flags = redis_benchmark_flags("redis://al%40ce@h?pool_max_size=4").expect("parses");
        assert_eq!(flags, ["-h", "h", "-p", "6379", "--user", "al@ce", "--dbnum", "0"]);
        assert!(redis_benchmark_flags("rediss://h:1").is_err());
    }
}
