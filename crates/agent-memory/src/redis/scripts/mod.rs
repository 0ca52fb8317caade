//! What runs in Redis: one Lua script per operation, hashed once per process and called by
//! hash (`EVALSHA`).
//!
//! Each `.lua` file starts with a comment naming its keys, its arguments and its reply; the
//! record layout they read and write is in the provider's guide ("Data model").

use std::sync::LazyLock;

use redis::Script;

/// Declares the scripts once: the `Scripts` struct with one field per operation, its `all()`
/// for loading them at `start()`, and `SCRIPTS`, each built from its files in order (the
/// writes start with `usage.lua`, the quota helpers they call).
macro_rules! scripts {
    ($($(#[doc = $doc:literal])* $name:ident = $($file:literal)+;)+) => {
        /// The scripts, one per operation.
        pub(super) struct Scripts {
            $($(#[doc = $doc])* pub(super) $name: Script,)+
        }

        impl Scripts {
            /// Every script, for loading them all at `start()`.
            pub(super) fn all(&self) -> Vec<&Script> {
                vec![$(&self.$name),+]
            }
        }

        /// The scripts, hashed on first use: the hash is what every call sends.
        pub(super) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
            $($name: Script::new(concat!($(include_str!($file)),+)),)+
        });
    };
}

scripts! {
    /// Insert or replace one record, with its compare-and-set check.
    put = "usage.lua" "put.lua";
    /// Read one live record.
    get = "get.lua";
    /// One page of `list` or `search`.
    page = "page.lua";
    /// One page of `list_keys`.
    keys = "keys.lua";
    /// Delete one record, optionally only at an expected revision.
    delete = "usage.lua" "delete.lua";
    /// One batch of `delete_all`.
    delete_all = "usage.lua" "delete_all.lua";
    /// One batch of `delete_user`.
    delete_user = "delete_user.lua";
    /// One page of `list_namespaces`.
    namespaces = "namespaces.lua";
    /// One page of `purge_expired`.
    purge = "usage.lua" "purge.lua";
}

/// The ACL rules a Redis user needs for this provider and no more: its keys only (`~am:*`, the
/// prefix of every key it writes), no Pub/Sub channels, and only the commands the store sends
/// (`EVALSHA`, `SCRIPT LOAD`, `INFO`, `CLUSTER SLOTS` on a cluster, connection setup) and its
/// scripts call. Create the user with
/// `ACL SETUSER agent-memory on >PASSWORD ` followed by these rules.
///
/// `CONFIG GET` is left out on purpose: it reads every setting, passwords included. Without
/// it `start()` cannot verify the append-only file's fsync setting and says so (see
/// [`DurabilityReport::is_verified`](super::DurabilityReport::is_verified)). `CLIENT SETINFO`
/// is not needed either: the driver sends it but ignores a refusal.
///
/// The test `tests/redis_restricted.rs` runs the whole conformance suite as a user with exactly
/// these rules, so a script that starts calling another command fails there first.
pub const ACL_RULES: &str = "resetkeys ~am:* resetchannels -@all \
    +evalsha +script|load +info +ping +hello +auth +select +cluster|slots \
    +get +set +getrange +strlen +exists +del +time +zadd +zrem +zrange +zrangebylex \
    +zremrangebyrank +hmget +hset";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guide_shows_the_acl_rules_as_they_are() {
        let guide = include_str!("../docs.md");
        let line = guide.lines().find(|line| line.starts_with("ACL SETUSER")).expect("a line");
        let shown = line.split_once(">PASSWORD ").expect("the password placeholder").1;
        assert_eq!(shown, ACL_RULES.split_whitespace().collect::<Vec<_>>().join(" "));
    }
}
