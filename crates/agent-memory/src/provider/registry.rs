//! The providers this build can open by URL: one [`Registration`] per provider, in one table
//! that [`open`](crate::open) dispatches through and that the CLI, the bench and the Python
//! package read instead of repeating the list.

use std::sync::Arc;

use crate::error::{MemoryError, Result};
use crate::store::MemoryStore;

/// Builds an unstarted store from a URL whose scheme is one of its provider's.
pub type Opener = fn(&str) -> Result<Arc<dyn MemoryStore>>;

/// One provider of this crate: its name, the URL schemes it answers to, the Cargo feature that
/// builds it, and, when this build has it, how to open a URL.
///
/// ```
/// let sqlite = agent_memory::provider::registration("sqlite:/tmp/m.db").expect("a known scheme");
/// assert_eq!(sqlite.name, "sqlite");
/// assert_eq!(sqlite.is_built(), cfg!(feature = "sqlite"));
/// assert!(agent_memory::provider::registration("ftp://example").is_none());
/// ```
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Registration {
    /// The provider's name: `memory`, `sqlite`, `postgres` or `redis`.
    pub name: &'static str,
    /// The URL schemes it opens, lowercase, without the colon.
    pub schemes: &'static [&'static str],
    /// How its URLs look, one form per scheme, for help texts and errors (`sqlite:PATH`,
    /// `postgres://…`).
    pub forms: &'static [&'static str],
    /// The Cargo feature that builds it; empty for a provider every build has.
    pub feature: &'static str,
    /// How to open a URL, when this build has the provider.
    pub opener: Option<Opener>,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("name", &self.name)
            .field("schemes", &self.schemes)
            .field("feature", &self.feature)
            .field("built", &self.is_built())
            .finish()
    }
}

impl Registration {
    /// True when this build can open the provider's URLs.
    pub fn is_built(&self) -> bool {
        self.opener.is_some()
    }

    /// An unstarted store for `url`; call [`start`](MemoryStore::start) before use.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` when this build lacks the provider
    /// (the message names the feature to enable) or the provider cannot parse the URL.
    pub fn open(&self, url: &str) -> Result<Arc<dyn MemoryStore>> {
        match self.opener {
            Some(open) => open(url),
            None => Err(MemoryError::invalid(
                "url",
                format!("needs the `{}` feature, which is not enabled", self.feature),
            )),
        }
    }
}

/// The opener of a provider behind a Cargo feature: `Some` of the store type's `from_url` when
/// this build has the feature, `None` otherwise (the type is then never named).
macro_rules! opener {
    ($feature:literal, $store:ty) => {{
        #[cfg(feature = $feature)]
        const OPENER: Option<Opener> = Some(|url| Ok(Arc::new(<$store>::from_url(url)?)));
        #[cfg(not(feature = $feature))]
        const OPENER: Option<Opener> = None;
        OPENER
    }};
}

/// Every provider of this crate, built or not. A new provider is one entry here, besides its
/// folder, its `mod` line in `lib.rs` and its feature in `Cargo.toml` (see CONTRIBUTING.md).
const PROVIDERS: &[Registration] = &[
    Registration {
        name: "sqlite",
        schemes: &["sqlite"],
        forms: &["sqlite:PATH"],
        feature: "sqlite",
        opener: opener!("sqlite", crate::sqlite::SqliteMemoryStore),
    },
    Registration {
        name: "postgres",
        schemes: &["postgres", "postgresql"],
        forms: &["postgres://…", "postgresql://…"],
        feature: "postgres",
        opener: opener!("postgres", crate::postgres::PostgresMemoryStore),
    },
    Registration {
        name: "redis",
        schemes: &["redis", "rediss", "redis+cluster", "rediss+cluster"],
        forms: &["redis://…", "rediss://…", "redis+cluster://…", "rediss+cluster://…"],
        feature: "redis",
        opener: opener!("redis", crate::redis::RedisMemoryStore),
    },
    Registration {
        name: "memory",
        schemes: &["memory"],
        forms: &["memory:"],
        feature: "",
        opener: Some(|url| Ok(Arc::new(crate::memory::InMemoryStore::from_url(url)?))),
    },
];

/// Every provider of this crate, whether this build has it or not (see
/// [`Registration::is_built`]): the default, SQLite, first; the in-process store last.
///
/// ```
/// let names: Vec<_> = agent_memory::provider::registrations().iter().map(|p| p.name).collect();
/// assert_eq!(names, ["sqlite", "postgres", "redis", "memory"]);
/// ```
pub fn registrations() -> &'static [Registration] {
    PROVIDERS
}

/// The provider whose scheme `url` starts with (compared without regard to ASCII case), built
/// or not; `None` for a scheme no provider has.
pub fn registration(url: &str) -> Option<&'static Registration> {
    let (scheme, _) = url.split_once(':')?;
    PROVIDERS
        .iter()
        .find(|provider| provider.schemes.iter().any(|known| known.eq_ignore_ascii_case(scheme)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_names_one_provider_in_any_case() {
        for provider in registrations() {
            assert_eq!(provider.forms.len(), provider.schemes.len(), "{}", provider.name);
            for scheme in provider.schemes {
                let url = format!("{}://x", scheme.to_ascii_uppercase());
                assert_eq!(registration(&url).map(|p| p.name), Some(provider.name));
            }
        }
        assert!(registration("no-colon").is_none());
        assert!(registration("mysql://x").is_none());
    }

    #[test]
    fn a_provider_this_build_lacks_names_its_feature() {
        let absent =
            Registration { name: "x", schemes: &["x"], forms: &["x:"], feature: "x", opener: None };
        let err = absent.open("x://secret@host").unwrap_err();
        assert_eq!(err.to_string(), "invalid url: needs the `x` feature, which is not enabled");
        assert!(!format!("{absent:?}").contains("secret"));
    }
}
