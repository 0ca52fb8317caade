//! [`MemoryScope`], the isolation boundary every operation runs in.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::validation;

/// The validated isolation boundary of a memory: an application, one of its users, and an
/// optional namespace.
///
/// Every operation applies the whole scope inside the datastore: two different scopes never
/// see each other's records, whatever characters their ids contain. `MemoryScope::new` and
/// [`with_namespace`](Self::with_namespace) are the only ways to build one, so a scope always
/// carries both the application and the user.
///
/// A scope belongs to trusted application code: build it from your authenticated session,
/// never from arguments a model supplied.
///
/// ```
/// use agent_memory::MemoryScope;
///
/// let scope = MemoryScope::new("support-bot", "user-42")?;
/// assert_eq!(scope.namespace(), None); // the default namespace
/// let prefs = scope.with_namespace("preferences")?;
/// assert_eq!(prefs.namespace(), Some("preferences"));
/// assert!(MemoryScope::new("support-bot", "").is_err());
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "ScopeFields", into = "ScopeFields")]
pub struct MemoryScope {
    // Shared text: every record a provider returns carries its scope, so cloning one must not
    // copy the ids.
    application_id: Arc<str>,
    user_id: Arc<str>,
    namespace: Option<Arc<str>>,
}

impl MemoryScope {
    /// A scope in the default namespace of `user_id` within `application_id`.
    ///
    /// # Errors
    /// [`Invalid`](crate::MemoryError::Invalid) when an id is empty, longer than 128 bytes, or
    /// holds a control character.
    pub fn new(application_id: impl Into<String>, user_id: impl Into<String>) -> Result<Self> {
        let application_id = application_id.into();
        let user_id = user_id.into();
        validation::id("application_id", &application_id)?;
        validation::id("user_id", &user_id)?;
        Ok(Self { application_id: application_id.into(), user_id: user_id.into(), namespace: None })
    }

    /// The same application and user in the named namespace.
    ///
    /// # Errors
    /// [`Invalid`](crate::MemoryError::Invalid) under the same rules as the ids.
    pub fn with_namespace(&self, namespace: impl Into<String>) -> Result<Self> {
        let namespace = namespace.into();
        validation::id("namespace", &namespace)?;
        Ok(Self { namespace: Some(namespace.into()), ..self.clone() })
    }

    /// The same application and user in the default namespace.
    pub fn with_default_namespace(&self) -> Self {
        Self { namespace: None, ..self.clone() }
    }

    /// The application id.
    pub fn application_id(&self) -> &str {
        &self.application_id
    }

    /// The user id.
    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    /// The namespace, or `None` for the default namespace.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The namespace as providers store it: the default namespace is the empty string, which no
    /// named namespace can be (names are at least one byte), and which sorts first.
    pub fn namespace_or_empty(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }

    /// The three columns a provider keys a scope's records by: application id, user id, and
    /// [`namespace_or_empty`](Self::namespace_or_empty), in that order (the order records
    /// sort in).
    ///
    /// ```
    /// # use agent_memory::MemoryScope;
    /// let scope = MemoryScope::new("app", "user-1")?;
    /// assert_eq!(scope.columns(), ("app", "user-1", ""));
    /// # Ok::<(), agent_memory::MemoryError>(())
    /// ```
    pub fn columns(&self) -> (&str, &str, &str) {
        (&self.application_id, &self.user_id, self.namespace_or_empty())
    }
}

impl fmt::Debug for MemoryScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryScope")
            .field("application_id", &self.application_id)
            .field("user_id", &self.user_id)
            .field("namespace", &self.namespace)
            .finish()
    }
}

/// The serialized form of a scope; deserializing validates it like [`MemoryScope::new`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScopeFields {
    application_id: String,
    user_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
}

impl TryFrom<ScopeFields> for MemoryScope {
    type Error = crate::MemoryError;

    fn try_from(fields: ScopeFields) -> Result<Self> {
        let scope = MemoryScope::new(fields.application_id, fields.user_id)?;
        match fields.namespace {
            Some(namespace) => scope.with_namespace(namespace),
            None => Ok(scope),
        }
    }
}

impl From<MemoryScope> for ScopeFields {
    fn from(scope: MemoryScope) -> Self {
        Self {
            application_id: scope.application_id.to_string(),
            user_id: scope.user_id.to_string(),
            namespace: scope.namespace.map(|ns| ns.to_string()),
        }
    }
}
