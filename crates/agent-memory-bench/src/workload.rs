//! The standard workload's data and op lists, generated exactly as the reference generator does.
//!
//! Everything here is deterministic: the SplitMix64 generator, the content text of any record,
//! the 20,000 preload records and the op list of every phase. [`fingerprints`] hashes the lists
//! the way the reference does, so a run can prove it drives the same operations before its
//! numbers are compared with anyone else's.
//!
//! Two phases are ours, not the reference's: `put_cas` (seed 42006) and `search` (seed 42007).
//! They draw `(user, namespace, key)` exactly like `get`, so their lists are as reproducible.

use sha2::{Digest, Sha256};

/// The application every benchmark record belongs to.
pub const APP: &str = "bench-app";
/// Users `u0000` … `u0999`.
pub const N_USERS: usize = 1000;
/// Namespace index 0 and 1, in this order.
pub const NAMESPACES: [&str; 2] = ["preferences", "notes"];
/// Preload keys per (user, namespace): `k0000` … `k0009`.
pub const KEYS_PER_NS: usize = 10;
/// 1,000 users × 2 namespaces × 10 keys.
pub const N_PRELOAD: usize = N_USERS * NAMESPACES.len() * KEYS_PER_NS;
/// The phrase every tenth content starts with, and the `search` phase's query.
pub const PHRASE: &str = "executive summary";

/// The `search_words` phase's query: the phrase's two words, in the other order and another
/// case, searched as `all_words` ignoring case, so it matches exactly the phrase's records.
pub const TWO_WORDS: &str = "SUMMARY Executive";
/// Contents grow word by word until they reach this many bytes.
pub const CONTENT_MIN_BYTES: usize = 200;
/// Page size of the `list` and `search` phases.
pub const LIST_LIMIT: usize = 20;

/// Who writes which content indices, beyond the preload's `0..20,000`: `put_new` `20,000 + j`,
/// `put_update` `40,000 + j` (the reference's choices), then ours: `put_cas` `60,000 + j` and the
/// scale mode's records from `1,000,000` on, so no two phases ever write the same text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// The `put_new` phase.
    PutNew,
    /// The `put_update` phase.
    PutUpdate,
    /// The `put_cas` phase.
    PutCas,
    /// The scale mode's records of other users.
    Scale,
}

impl Contents {
    /// The content index of the `j`-th record this writer writes.
    pub fn index(self, j: u64) -> u64 {
        let first = match self {
            Contents::PutNew => 20_000,
            Contents::PutUpdate => 40_000,
            Contents::PutCas => 60_000,
            Contents::Scale => 1_000_000,
        };
        first + j
    }
}

/// The 32 words content is made of; none contains either half of [`PHRASE`].
pub const WORDS: [&str; 32] = [
    "agent",
    "memory",
    "user",
    "prefers",
    "dark",
    "mode",
    "meeting",
    "notes",
    "project",
    "deadline",
    "budget",
    "review",
    "travel",
    "coffee",
    "morning",
    "report",
    "quarterly",
    "team",
    "customer",
    "feedback",
    "schedule",
    "email",
    "draft",
    "follow",
    "up",
    "priority",
    "high",
    "low",
    "weekly",
    "sync",
    "design",
    "launch",
];

/// SplitMix64 with all arithmetic modulo 2^64; `below` is a plain modulo (the bias is part of
/// the reference, so it stays).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose first step starts from `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `next_u64() % n`, as an index.
    ///
    /// # Panics
    /// When `n` is 0 (no caller asks for that).
    pub fn below(&mut self, n: usize) -> usize {
        let n64 = u64::try_from(n).expect("usize fits in u64");
        usize::try_from(self.next_u64() % n64).expect("a value below a usize fits in usize")
    }
}

/// The user id of user index `u`: `u` plus four zero-padded digits.
pub fn user_id(u: usize) -> String {
    format!("u{u:04}")
}

/// The content text of content index `i`: a fresh generator seeded `42 + i`, the phrase first
/// when `i % 10 == 0`, then words until at least 200 bytes.
pub fn content(i: u64) -> String {
    let mut rng = SplitMix64::new(42u64.wrapping_add(i));
    let mut text = String::with_capacity(CONTENT_MIN_BYTES + 16);
    if i.is_multiple_of(10) {
        text.push_str(PHRASE);
    }
    while text.len() < CONTENT_MIN_BYTES {
        let word = WORDS[rng.below(WORDS.len())];
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(word);
    }
    text
}

/// What one op does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// Write `key` with the content and metadata of `content_index`.
    Put,
    /// Read `key`.
    Get,
    /// Read the first page of the scope.
    List,
    /// Delete `key`.
    Delete,
    /// Read `key`, then write it back conditionally: with the revision just read, or create-only
    /// when it was absent (ours: `put_cas`).
    Cas,
    /// First page of a literal search for [`PHRASE`] in the scope (ours: `search`).
    Search,
    /// First page of an `all_words`, case-insensitive search for [`TWO_WORDS`] in the scope (ours:
    /// `search_words`).
    SearchWords,
    /// First page of the scope's records whose metadata `category` is the namespace's name,
    /// which every record of the workload has (ours: `list_meta`).
    ListMeta,
}

/// One operation of a phase (or one preload record, as a `Put`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// What the op does.
    pub kind: OpKind,
    /// User index, 0..1000 (the scale mode's records use their own numbering).
    pub user: usize,
    /// Namespace index into [`NAMESPACES`].
    pub ns: usize,
    /// The record key; empty for `List` and `Search`.
    pub key: String,
    /// The content index of a write (`Put`, `Cas`); 0 otherwise.
    pub content_index: u64,
}

impl Op {
    /// Index of the op's scope in a table laid out as `user * 2 + ns`.
    pub fn scope_index(&self) -> usize {
        self.user * NAMESPACES.len() + self.ns
    }

    /// The namespace name.
    pub fn namespace(&self) -> &'static str {
        NAMESPACES[self.ns]
    }

    /// The metadata written with content index `i` in namespace `ns`.
    pub fn metadata(&self) -> serde_json::Value {
        serde_json::json!({ "category": self.namespace(), "n": self.content_index })
    }

    fn put(user: usize, ns: usize, key: String, content_index: u64) -> Self {
        Self { kind: OpKind::Put, user, ns, key, content_index }
    }

    fn keyed(kind: OpKind, user: usize, ns: usize, key: String) -> Self {
        Self { kind, user, ns, key, content_index: 0 }
    }
}

/// The five standard phases and our two extra ones, in run order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// 1: insert keys that never existed.
    PutNew,
    /// 2: read existing keys.
    Get,
    /// 3: unconditional replace of existing keys.
    PutUpdate,
    /// 4: first page of a scope.
    List,
    /// 5: delete distinct existing keys.
    Delete,
    /// 6 (ours): read, then write with the expected revision.
    PutCas,
    /// 7 (ours): first page of a literal search.
    Search,
    /// 8 (ours): first page of a two-word, case-insensitive search.
    SearchWords,
    /// 9 (ours): first page of a list filtered by one metadata field.
    ListMeta,
}

impl Phase {
    /// The five phases of the standard workload, in order.
    pub const STANDARD: [Phase; 5] =
        [Phase::PutNew, Phase::Get, Phase::PutUpdate, Phase::List, Phase::Delete];
    /// Our extra phases, run after the standard five and reported separately.
    pub const EXTRA: [Phase; 4] =
        [Phase::PutCas, Phase::Search, Phase::SearchWords, Phase::ListMeta];

    /// The phase's name as WORKLOAD.md writes it.
    pub fn name(self) -> &'static str {
        match self {
            Phase::PutNew => "put_new",
            Phase::Get => "get",
            Phase::PutUpdate => "put_update",
            Phase::List => "list",
            Phase::Delete => "delete",
            Phase::PutCas => "put_cas",
            Phase::Search => "search",
            Phase::SearchWords => "search_words",
            Phase::ListMeta => "list_meta",
        }
    }

    /// Phase by name.
    pub fn from_name(name: &str) -> Option<Phase> {
        Phase::STANDARD.into_iter().chain(Phase::EXTRA).find(|p| p.name() == name)
    }

    /// The op-list generator's seed: 42,000 + phase number.
    pub fn seed(self) -> u64 {
        42_000
            + match self {
                Phase::PutNew => 1,
                Phase::Get => 2,
                Phase::PutUpdate => 3,
                Phase::List => 4,
                Phase::Delete => 5,
                Phase::PutCas => 6,
                Phase::Search => 7,
                Phase::SearchWords => 8,
                Phase::ListMeta => 9,
            }
    }

    /// Ops in the standard run.
    pub fn standard_ops(self) -> usize {
        match self {
            Phase::PutNew | Phase::PutUpdate | Phase::Delete | Phase::PutCas => 20_000,
            Phase::Get => 50_000,
            Phase::List | Phase::Search | Phase::SearchWords | Phase::ListMeta => 10_000,
        }
    }
}

/// How many ops each phase runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Phase 1.
    pub put_new: usize,
    /// Phase 2.
    pub get: usize,
    /// Phase 3.
    pub put_update: usize,
    /// Phase 4.
    pub list: usize,
    /// Phase 5.
    pub delete: usize,
    /// Ours, after phase 5.
    pub put_cas: usize,
    /// Ours, after put_cas.
    pub search: usize,
    /// Ours, after search.
    pub search_words: usize,
    /// Ours, last.
    pub list_meta: usize,
}

/// The fewest ops a phase of a real (non-smoke) run may have, per WORKLOAD.md.
pub const MIN_OPS_PER_PHASE: usize = 2_000;

impl Counts {
    /// The standard run's counts.
    pub fn standard() -> Self {
        Self {
            put_new: 20_000,
            get: 50_000,
            put_update: 20_000,
            list: 10_000,
            delete: 20_000,
            put_cas: 20_000,
            search: 10_000,
            search_words: 10_000,
            list_meta: 10_000,
        }
    }

    /// The count of `phase`.
    pub fn of(&self, phase: Phase) -> usize {
        match phase {
            Phase::PutNew => self.put_new,
            Phase::Get => self.get,
            Phase::PutUpdate => self.put_update,
            Phase::List => self.list,
            Phase::Delete => self.delete,
            Phase::PutCas => self.put_cas,
            Phase::Search => self.search,
            Phase::SearchWords => self.search_words,
            Phase::ListMeta => self.list_meta,
        }
    }

    /// Sets the count of `phase`.
    pub fn set(&mut self, phase: Phase, n: usize) {
        let slot = match phase {
            Phase::PutNew => &mut self.put_new,
            Phase::Get => &mut self.get,
            Phase::PutUpdate => &mut self.put_update,
            Phase::List => &mut self.list,
            Phase::Delete => &mut self.delete,
            Phase::PutCas => &mut self.put_cas,
            Phase::Search => &mut self.search,
            Phase::SearchWords => &mut self.search_words,
            Phase::ListMeta => &mut self.list_meta,
        };
        *slot = n;
    }

    /// Records left after phase 5: `20,000 + put_new - delete`.
    pub fn records_after_delete(&self) -> usize {
        N_PRELOAD + self.put_new - self.delete
    }

    /// Checks that the lists can be generated: delete can only remove keys that exist.
    ///
    /// # Errors
    /// A readable reason when `delete` exceeds the keys that exist after phase 1.
    pub fn validate(&self) -> Result<(), String> {
        if self.delete > N_PRELOAD + self.put_new {
            return Err(format!(
                "delete count {} exceeds the {} keys that exist after put_new",
                self.delete,
                N_PRELOAD + self.put_new
            ));
        }
        Ok(())
    }
}

/// The 20,000 preload records in preload order, as `Put` ops.
pub fn preload() -> Vec<Op> {
    let mut out = Vec::with_capacity(N_PRELOAD);
    for u in 0..N_USERS {
        for ns in 0..NAMESPACES.len() {
            for k in 0..KEYS_PER_NS {
                let i = u * NAMESPACES.len() * KEYS_PER_NS + ns * KEYS_PER_NS + k;
                out.push(Op::put(u, ns, format!("k{k:04}"), to_u64(i)));
            }
        }
    }
    out
}

/// Draws `(user, namespace)`, the first two draws of every op.
fn draw_scope(rng: &mut SplitMix64) -> (usize, usize) {
    let u = rng.below(N_USERS);
    let ns = rng.below(NAMESPACES.len());
    (u, ns)
}

/// Draws `(user, namespace, preload key)`, the draws of `get` and the phases shaped like it.
fn draw_existing(rng: &mut SplitMix64) -> (usize, usize, String) {
    let (u, ns) = draw_scope(rng);
    let k = rng.below(KEYS_PER_NS);
    (u, ns, format!("k{k:04}"))
}

/// The first `n` ops of `phase`; `delete` also needs the `put_new` count of the run, since its
/// candidates are the keys that exist after phase 1.
pub fn ops(phase: Phase, n: usize, n_put_new: usize) -> Vec<Op> {
    let mut rng = SplitMix64::new(phase.seed());
    match phase {
        Phase::PutNew => (0..n)
            .map(|j| {
                let (u, ns) = draw_scope(&mut rng);
                Op::put(u, ns, format!("n{j:05}"), Contents::PutNew.index(to_u64(j)))
            })
            .collect(),
        Phase::Get => (0..n)
            .map(|_| {
                let (u, ns, key) = draw_existing(&mut rng);
                Op::keyed(OpKind::Get, u, ns, key)
            })
            .collect(),
        Phase::PutUpdate => (0..n)
            .map(|j| {
                let (u, ns, key) = draw_existing(&mut rng);
                Op::put(u, ns, key, Contents::PutUpdate.index(to_u64(j)))
            })
            .collect(),
        Phase::List => (0..n)
            .map(|_| {
                let (u, ns) = draw_scope(&mut rng);
                Op::keyed(OpKind::List, u, ns, String::new())
            })
            .collect(),
        Phase::Delete => delete_ops(n, n_put_new),
        Phase::PutCas => (0..n)
            .map(|j| {
                let (u, ns, key) = draw_existing(&mut rng);
                Op {
                    kind: OpKind::Cas,
                    user: u,
                    ns,
                    key,
                    content_index: Contents::PutCas.index(to_u64(j)),
                }
            })
            .collect(),
        Phase::Search | Phase::SearchWords | Phase::ListMeta => {
            let kind = match phase {
                Phase::Search => OpKind::Search,
                Phase::SearchWords => OpKind::SearchWords,
                _ => OpKind::ListMeta,
            };
            (0..n)
                .map(|_| {
                    let (u, ns, _key) = draw_existing(&mut rng);
                    Op::keyed(kind, u, ns, String::new())
                })
                .collect()
        }
    }
}

/// Distinct existing keys: the preload keys in preload order, then the `put_new` keys in op
/// order, shuffled with Fisher–Yates on the 42005 generator; the first `n`.
fn delete_ops(n: usize, n_put_new: usize) -> Vec<Op> {
    let mut keys: Vec<(usize, usize, String)> =
        preload().into_iter().map(|op| (op.user, op.ns, op.key)).collect();
    let mut rng = SplitMix64::new(Phase::PutNew.seed());
    for j in 0..n_put_new {
        let (u, ns) = draw_scope(&mut rng);
        keys.push((u, ns, format!("n{j:05}")));
    }
    let mut rng = SplitMix64::new(Phase::Delete.seed());
    for idx in (1..keys.len()).rev() {
        let r = rng.below(idx + 1);
        keys.swap(idx, r);
    }
    keys.truncate(n);
    keys.into_iter().map(|(u, ns, key)| Op::keyed(OpKind::Delete, u, ns, key)).collect()
}

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).expect("usize fits in u64")
}

/// One op as the reference writes it: `kind, user, namespace[, key[, content, category, n]]`,
/// tab-separated, newline-terminated. Our extra kinds use their own names (`cas`, `search`).
pub fn line(op: &Op) -> String {
    let kind = match op.kind {
        OpKind::Put => "put",
        OpKind::Get => "get",
        OpKind::List => "list",
        OpKind::Delete => "delete",
        OpKind::Cas => "cas",
        OpKind::Search => "search",
        OpKind::SearchWords => "search_words",
        OpKind::ListMeta => "list_meta",
    };
    let mut parts = vec![kind.to_owned(), user_id(op.user), op.namespace().to_owned()];
    match op.kind {
        OpKind::List | OpKind::Search | OpKind::SearchWords | OpKind::ListMeta => {}
        OpKind::Get | OpKind::Delete => parts.push(op.key.clone()),
        OpKind::Put | OpKind::Cas => {
            parts.push(op.key.clone());
            parts.push(content(op.content_index));
            parts.push(op.namespace().to_owned());
            parts.push(op.content_index.to_string());
        }
    }
    let mut text = parts.join("\t");
    text.push('\n');
    text
}

/// First 16 hex digits of SHA-256 over the concatenated [`line()`]s.
pub fn fingerprint(ops: &[Op]) -> String {
    let mut hasher = Sha256::new();
    for op in ops {
        hasher.update(line(op).as_bytes());
    }
    let digest = hasher.finalize();
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The fingerprints WORKLOAD.md publishes for the standard counts, which `--check` must
/// reproduce: `(list, fingerprint)`.
pub const REFERENCE_FINGERPRINTS: [(&str, &str); 6] = [
    ("preload", "5f00048b2886b9ed"),
    ("put_new", "9c4976085d8cbc1e"),
    ("get", "702a7eedeb67f16c"),
    ("put_update", "df992badf463c825"),
    ("list", "7570688f95509c85"),
    ("delete", "7d227e3cdec75acd"),
];

/// `content(0)` as WORKLOAD.md prints it.
pub const REFERENCE_CONTENT_0: &str = "executive summary email prefers customer schedule customer \
meeting sync dark email morning launch design meeting follow weekly customer email sync notes \
agent project priority email team quarterly team";

/// The fingerprint of the preload and of every phase (standard and extra) at `counts`, in run
/// order: `(name, fingerprint, first op)`.
pub fn fingerprints(counts: &Counts) -> Vec<(String, String, Op)> {
    let mut out = Vec::new();
    let pre = preload();
    out.push(("preload".to_owned(), fingerprint(&pre), pre[0].clone()));
    for phase in Phase::STANDARD.into_iter().chain(Phase::EXTRA) {
        let list = ops(phase, counts.of(phase), counts.put_new);
        let first =
            list.first().cloned().unwrap_or_else(|| Op::keyed(OpKind::Get, 0, 0, "".into()));
        out.push((phase.name().to_owned(), fingerprint(&list), first));
    }
    out
}

/// The `--check` report: generator checks, content statistics and every fingerprint, each
/// reference one marked `ok` or `MISMATCH`. Returns the text and whether everything matched.
pub fn check_report() -> (String, bool) {
    use std::fmt::Write as _;
    let mut text = String::new();
    let mut all_ok = true;
    let mut mark = |ok: bool| {
        all_ok &= ok;
        if ok {
            "ok"
        } else {
            "MISMATCH"
        }
    };

    let mut zero = SplitMix64::new(0);
    let first_zero = zero.next_u64();
    let mut rng = SplitMix64::new(42);
    let first42 = [rng.next_u64(), rng.next_u64(), rng.next_u64()];
    let _ = writeln!(
        text,
        "SplitMix64(0) first = {first_zero:#018X}  [{}]",
        mark(first_zero == 0xE220_A839_7B1D_CDAF)
    );
    let _ = writeln!(
        text,
        "first 3 SplitMix64(42) outputs: {first42:?}  [{}]",
        mark(
            first42
                == [
                    13_679_457_532_755_275_413,
                    2_949_826_092_126_892_291,
                    5_139_283_748_462_763_858
                ]
        )
    );

    let pre = preload();
    let sizes: Vec<usize> = pre.iter().map(|op| content(op.content_index).len()).collect();
    let with_phrase = pre.iter().filter(|op| content(op.content_index).contains(PHRASE)).count();
    let min = sizes.iter().copied().min().unwrap_or(0);
    let max = sizes.iter().copied().max().unwrap_or(0);
    let total: usize = sizes.iter().sum();
    let _ = writeln!(
        text,
        "preload records: {}  content bytes min/avg/max: {min}/{:.1}/{max}  with phrase: {with_phrase}",
        pre.len(),
        total as f64 / sizes.len().max(1) as f64,
    );
    let c0 = content(0);
    let _ = writeln!(text, "content(0)  = {c0:?}  [{}]", mark(c0 == REFERENCE_CONTENT_0));
    let _ = writeln!(text, "content(1)  = {:?}", content(1));

    for (name, fp, first) in fingerprints(&Counts::standard()) {
        let reference = REFERENCE_FINGERPRINTS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f);
        let verdict = match reference {
            Some(expected) => mark(fp == expected),
            None => "ours, no reference",
        };
        let first_text = line(&first);
        let first_fields: Vec<&str> = first_text.trim_end().split('\t').take(4).collect();
        let _ = writeln!(text, "fingerprint {name:10} = {fp}  first={first_fields:?}  [{verdict}]");
    }
    (text, all_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_reference_values() {
        assert_eq!(SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
        let mut rng = SplitMix64::new(42);
        assert_eq!(rng.next_u64(), 13_679_457_532_755_275_413);
        assert_eq!(rng.next_u64(), 2_949_826_092_126_892_291);
        assert_eq!(rng.next_u64(), 5_139_283_748_462_763_858);
    }

    #[test]
    fn content_zero_matches_the_reference() {
        assert_eq!(content(0), REFERENCE_CONTENT_0);
        assert!(!content(1).contains(PHRASE));
    }

    #[test]
    fn scaled_delete_targets_are_distinct() {
        let list = ops(Phase::Delete, 3_000, 2_000);
        let mut seen: Vec<(usize, usize, String)> =
            list.iter().map(|op| (op.user, op.ns, op.key.clone())).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 3_000);
    }

    #[test]
    fn scaled_lists_are_prefixes_of_the_standard_ones() {
        let full = ops(Phase::Get, 50_000, 20_000);
        let short = ops(Phase::Get, 2_000, 20_000);
        assert_eq!(&full[..2_000], &short[..]);
    }
}
