//! The one parser of store URLs (`sqlite:`, `postgres://`, `redis://`, `redis+cluster://`, …),
//! built on the `url` crate, which every provider's `from_url` reads.
//!
//! A URL is split into its scheme, credentials, one or more `host[:port]` entries (the
//! PostgreSQL and Redis Cluster forms list several, separated by commas, which the `url` crate
//! alone does not accept), the path and the query parameters, all percent-decoded. A provider
//! then takes the parameters it knows with [`Params`] and calls [`Params::finish`], which
//! rejects whatever is left as [`Invalid`](MemoryError::Invalid) naming the parameter: a typo
//! in an option is an error, never silently ignored.
//!
//! No error message repeats the URL or any part of it but a parameter's name: URLs carry
//! passwords.
//!
//! Public as [`provider::ConnectionUrl`](crate::provider::ConnectionUrl), so a provider outside
//! this crate reads its URL exactly as the built-in ones do:
//!
//! ```
//! use agent_memory::provider::ConnectionUrl;
//!
//! let url = ConnectionUrl::parse("myprovider://user:pw@a:1,b:2/db?search_scan_limit=10")?;
//! assert_eq!(url.scheme, "myprovider");
//! assert_eq!(url.hosts.len(), 2);
//! assert_eq!(url.hosts[1].port, Some(2));
//! let mut params = url.params;
//! assert_eq!(params.take_parsed::<usize>("search_scan_limit")?, Some(10));
//! params.finish()?; // nothing left over: a typo would be an error here
//! # Ok::<(), agent_memory::MemoryError>(())
//! ```

use std::borrow::Cow;
use std::str::FromStr;
use std::time::Duration;

use percent_encoding::percent_decode_str;
use url::Url;

use crate::error::{MemoryError, Result};

/// One `host[:port]` of a URL's authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// The host name or address, without IPv6 brackets; empty when the URL names none.
    pub host: String,
    /// The port, when given.
    pub port: Option<u16>,
}

/// A parsed store URL. Its `Debug` shows the scheme, the hosts and the parameters' names only:
/// user names, passwords, paths and parameter values can be private.
pub struct ConnectionUrl {
    /// The scheme, lowercase.
    pub scheme: String,
    /// The user name, decoded; empty when the URL names none.
    pub username: String,
    /// The password, decoded.
    pub password: Option<String>,
    /// The hosts in the order written; empty for URLs without an authority (`sqlite:PATH`).
    pub hosts: Vec<HostPort>,
    /// The path, decoded, with its leading `/` (for `scheme:PATH` URLs, `PATH` as written).
    pub path: String,
    /// The query parameters.
    pub params: Params,
}

impl std::fmt::Debug for ConnectionUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionUrl")
            .field("scheme", &self.scheme)
            .field("hosts", &self.hosts)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

fn invalid_url(reason: &'static str) -> MemoryError {
    MemoryError::invalid("url", reason)
}

impl ConnectionUrl {
    /// Parses `text`.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` for text that is not a URL, a host list
    /// with an empty or malformed entry, a port out of range, a fragment, or text that does not
    /// decode as UTF-8. The message never repeats the URL.
    pub fn parse(text: &str) -> Result<Self> {
        let (scheme, rest) = text.split_once(':').ok_or_else(|| invalid_url("has no scheme"))?;
        if scheme.is_empty()
            || !scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            || !scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        {
            return Err(invalid_url("has no scheme"));
        }
        let scheme = scheme.to_ascii_lowercase();
        // The `url` crate takes one host per URL: a comma-separated list is parsed host by
        // host, and the URL itself with the first host only.
        let (first_url, extra_hosts) = match rest.strip_prefix("//") {
            Some(after_slashes) => {
                let end = after_slashes.find(['/', '?', '#']).unwrap_or(after_slashes.len());
                let (authority, tail) = after_slashes.split_at(end);
                let (userinfo, host_list) = match authority.rsplit_once('@') {
                    Some((userinfo, hosts)) => (Some(userinfo), hosts),
                    None => (None, authority),
                };
                let mut hosts = host_list.split(',');
                let first = hosts.next().unwrap_or("");
                let extra: Vec<&str> = hosts.collect();
                if extra.iter().any(|host| host.trim().is_empty())
                    || (first.is_empty() && !extra.is_empty())
                {
                    return Err(invalid_url("has an empty entry in its host list"));
                }
                let userinfo = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
                (format!("{scheme}://{userinfo}{first}{tail}"), extra)
            }
            None => (format!("{scheme}:{rest}"), Vec::new()),
        };
        let url = Url::parse(&first_url).map_err(|_| invalid_url("is not a valid URL"))?;
        if url.fragment().is_some() {
            return Err(invalid_url("must not have a #fragment"));
        }
        let mut hosts = Vec::with_capacity(1 + extra_hosts.len());
        if rest.starts_with("//") {
            hosts.push(host_port(&url)?);
            for host in extra_hosts {
                let parsed = Url::parse(&format!("{scheme}://{}", host.trim()))
                    .map_err(|_| invalid_url("has a malformed host in its host list"))?;
                if parsed.path() != "" || parsed.query().is_some() || !parsed.username().is_empty()
                {
                    return Err(invalid_url("has a malformed host in its host list"));
                }
                hosts.push(host_port(&parsed)?);
            }
        }
        Ok(Self {
            username: decode(url.username())?.into_owned(),
            password: url.password().map(decode).transpose()?.map(Cow::into_owned),
            hosts,
            path: decode(url.path())?.into_owned(),
            params: Params::of(&url)?,
            scheme,
        })
    }

    /// The single host of a URL that must name exactly one.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` when it lists several hosts.
    pub fn single_host(&self) -> Result<Option<&HostPort>> {
        match self.hosts.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            _ => Err(invalid_url("lists several hosts, but this form takes one")),
        }
    }
}

fn host_port(url: &Url) -> Result<HostPort> {
    let host = match url.host() {
        Some(url::Host::Ipv6(addr)) => addr.to_string(),
        Some(_) => decode(url.host_str().unwrap_or(""))?.into_owned(),
        None => String::new(),
    };
    Ok(HostPort { host, port: url.port() })
}

fn decode(text: &str) -> Result<Cow<'_, str>> {
    percent_decode_str(text).decode_utf8().map_err(|_| invalid_url("does not decode as UTF-8"))
}

/// The query parameters of a URL, taken one by one by the provider that knows them. Its
/// `Debug` lists the names left to take, never a value.
#[derive(Default)]
pub struct Params {
    // Name and value, decoded, in the order written. Values are never printed: they can be
    // credentials (a PostgreSQL `password=`).
    pairs: Vec<(String, String)>,
}

impl std::fmt::Debug for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.pairs.iter().map(|(name, _)| name)).finish()
    }
}

impl Params {
    fn of(url: &Url) -> Result<Self> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (name, value) in url.query_pairs() {
            if pairs.iter().any(|(seen, _)| *seen == name) {
                return Err(MemoryError::invalid(
                    "url",
                    format!("gives the parameter `{}` twice", printable(&name)),
                ));
            }
            pairs.push((name.into_owned(), value.into_owned()));
        }
        Ok(Self { pairs })
    }

    /// Takes the text of parameter `name`, if present.
    pub fn take(&mut self, name: &str) -> Option<String> {
        let at = self.pairs.iter().position(|(n, _)| n == name)?;
        Some(self.pairs.remove(at).1)
    }

    /// Takes parameter `name` as a number (or anything else that parses from text).
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` and the parameter when it does not parse.
    pub fn take_parsed<T: FromStr>(&mut self, name: &str) -> Result<Option<T>> {
        match self.take(name) {
            None => Ok(None),
            Some(text) => text.trim().parse().map(Some).map_err(|_| {
                MemoryError::invalid("url", format!("has a malformed value for `{name}`"))
            }),
        }
    }

    /// Takes parameter `name` as a boolean: `true`/`false`, `1`/`0`, `on`/`off`, `yes`/`no`.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` and the parameter for any other value.
    pub fn take_bool(&mut self, name: &str) -> Result<Option<bool>> {
        match self.take(name).as_deref() {
            None => Ok(None),
            Some("true" | "1" | "on" | "yes") => Ok(Some(true)),
            Some("false" | "0" | "off" | "no") => Ok(Some(false)),
            Some(_) => Err(MemoryError::invalid(
                "url",
                format!("has a value for `{name}` that is not true or false"),
            )),
        }
    }

    /// Takes parameter `name` as a duration in whole seconds, as libpq's `connect_timeout`.
    ///
    /// # Errors
    /// As [`take_parsed`](Self::take_parsed).
    pub fn take_seconds(&mut self, name: &str) -> Result<Option<Duration>> {
        Ok(self.take_parsed::<u64>(name)?.map(Duration::from_secs))
    }

    /// Checks that every parameter was taken.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` and the first parameter nobody took.
    pub fn finish(self) -> Result<()> {
        match self.pairs.first() {
            None => Ok(()),
            Some((name, _)) => Err(MemoryError::invalid(
                "url",
                format!("has an unknown parameter `{}`", printable(name)),
            )),
        }
    }
}

/// A parameter name as an error message may show it: control characters escaped, and cut
/// short, since it came from outside.
fn printable(name: &str) -> String {
    let mut shown: String = name.chars().take(64).flat_map(char::escape_debug).collect();
    if name.chars().count() > 64 {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_user_password_path_or_value() {
        let url =
            ConnectionUrl::parse("postgres://who:s3cret@db:5432/private?password=pw2&table=t")
                .unwrap();
        let text = format!("{url:?}");
        for private in ["who", "s3cret", "private", "pw2"] {
            assert!(!text.contains(private), "{private} in {text}");
        }
        assert!(text.contains("\"db\"") && text.contains("\"password\""), "{text}");
    }

    #[test]
    fn credentials_hosts_path_and_params_are_decoded() {
        let url = ConnectionUrl::parse("postgres://us%40r:p%3Aw%2Fd@db.internal:6432/mem%20ories?table=t1&application_name=a%20b").unwrap();
        assert_eq!(url.scheme, "postgres");
        assert_eq!(url.username, "us@r");
        assert_eq!(url.password.as_deref(), Some("p:w/d"));
        assert_eq!(url.hosts, vec![HostPort { host: "db.internal".into(), port: Some(6432) }]);
        assert_eq!(url.path, "/mem ories");
        let mut params = url.params;
        assert_eq!(params.take("table").as_deref(), Some("t1"));
        assert_eq!(params.take("application_name").as_deref(), Some("a b"));
        params.finish().unwrap();
    }

    #[test]
    fn host_lists_are_parsed_host_by_host() {
        let url =
            ConnectionUrl::parse("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001, [::1]:7002")
                .unwrap();
        let hosts: Vec<(String, Option<u16>)> =
            url.hosts.iter().map(|h| (h.host.clone(), h.port)).collect();
        assert_eq!(
            hosts,
            vec![
                ("10.0.0.1".into(), Some(7000)),
                ("10.0.0.2".into(), Some(7001)),
                ("::1".into(), Some(7002))
            ]
        );
        assert_eq!(url.password.as_deref(), Some("pw"));
        assert!(url.single_host().is_err());
        for bad in [
            "redis+cluster://a:1,,b:2",
            "redis+cluster://a:1,b:99999",
            "redis+cluster://a:1,b:2:3",
            "redis+cluster://,a:1",
        ] {
            assert!(ConnectionUrl::parse(bad).expect_err(bad).is_invalid(), "{bad}");
        }
    }

    #[test]
    fn scheme_only_urls_keep_their_path() {
        let url = ConnectionUrl::parse("SQLITE:data/m%20x.db?mode=ro").unwrap();
        assert_eq!((url.scheme.as_str(), url.path.as_str()), ("sqlite", "data/m x.db"));
        assert!(url.hosts.is_empty());
        let url = ConnectionUrl::parse("sqlite:///srv/m.db").unwrap();
        assert_eq!(url.path, "/srv/m.db");
        assert_eq!(url.hosts, vec![HostPort { host: String::new(), port: None }]);
    }

    #[test]
    fn unknown_duplicate_and_malformed_params_are_invalid_naming_only_the_parameter() {
        let mut params = ConnectionUrl::parse("redis://:hunter2@h/0?tabel=x&n=7").unwrap().params;
        assert_eq!(params.take_parsed::<usize>("n").unwrap(), Some(7));
        let err = params.finish().unwrap_err();
        assert_eq!(err.to_string(), "invalid url: has an unknown parameter `tabel`");
        let err = ConnectionUrl::parse("redis://h/?a=1&a=2").err().unwrap();
        assert!(err.to_string().contains("`a` twice"));
        let mut params = ConnectionUrl::parse("redis://h/?n=hunter2&b=maybe").unwrap().params;
        let err = params.take_parsed::<usize>("n").unwrap_err();
        assert!(!err.to_string().contains("hunter2"));
        assert!(params.take_bool("b").is_err());
        for bad in ["no scheme here", "://h", "1redis://h", "redis://h:notaport/0", "redis://h/#x"]
        {
            let err = ConnectionUrl::parse(bad).expect_err(bad);
            assert!(err.is_invalid(), "{bad}");
        }
    }
}
