//! The op lists must be byte-identical to the reference generator's: these are the values of
//! the fingerprint table in WORKLOAD.md, written out here so a change to the generator cannot
//! also change what it is checked against.

use std::process::Command;

use agent_memory_bench::workload::{self, Counts, Phase};

const TABLE: [(&str, &str, &str); 6] = [
    ("preload", "5f00048b2886b9ed", "put\tu0000\tpreferences\tk0000"),
    ("put_new", "9c4976085d8cbc1e", "put\tu0432\tpreferences\tn00000"),
    ("get", "702a7eedeb67f16c", "get\tu0956\tnotes\tk0001"),
    ("put_update", "df992badf463c825", "put\tu0255\tpreferences\tk0007"),
    ("list", "7570688f95509c85", "list\tu0497\tnotes"),
    ("delete", "7d227e3cdec75acd", "delete\tu0636\tpreferences\tn06291"),
];

#[test]
fn standard_op_lists_match_the_workload_table() {
    let found = workload::fingerprints(&Counts::standard());
    for (name, fingerprint, first) in TABLE {
        let (_, fp, op) = found.iter().find(|(n, _, _)| n == name).expect("every list is printed");
        assert_eq!(fp, fingerprint, "fingerprint of {name}");
        assert!(
            workload::line(op).starts_with(first),
            "first op of {name}: {:?}",
            workload::line(op)
        );
    }
}

#[test]
fn generator_and_content_match_the_reference() {
    assert_eq!(workload::SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(
        workload::content(0),
        "executive summary email prefers customer schedule customer meeting sync dark email \
         morning launch design meeting follow weekly customer email sync notes agent project \
         priority email team quarterly team"
    );
    let sizes: Vec<usize> =
        workload::preload().iter().map(|op| workload::content(op.content_index).len()).collect();
    assert_eq!(sizes.iter().min(), Some(&200));
    assert_eq!(sizes.iter().max(), Some(&209));
    let phrase = workload::preload()
        .iter()
        .filter(|op| workload::content(op.content_index).contains(workload::PHRASE))
        .count();
    assert_eq!(phrase, 2_000);
}

#[test]
fn extra_phases_draw_like_get_from_their_own_seeds() {
    let cas = workload::ops(Phase::PutCas, 5, 20_000);
    let search = workload::ops(Phase::Search, 5, 20_000);
    let mut rng = workload::SplitMix64::new(42_006);
    for op in &cas {
        assert_eq!(op.user, rng.below(1000));
        assert_eq!(op.ns, rng.below(2));
        assert_eq!(op.key, format!("k{:04}", rng.below(10)));
    }
    let mut rng = workload::SplitMix64::new(42_007);
    for op in &search {
        assert_eq!(op.user, rng.below(1000));
        assert_eq!(op.ns, rng.below(2));
        rng.below(10);
    }
}

#[test]
fn check_mode_prints_the_same_fingerprints() {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-memory-bench"))
        .arg("--check")
        .output()
        .expect("the harness runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "--check failed:\n{stdout}");
    for (name, fingerprint, _) in TABLE {
        let line = format!("fingerprint {name:10} = {fingerprint}");
        assert!(stdout.contains(&line), "missing {line:?} in:\n{stdout}");
    }
    assert!(stdout.contains("all reference fingerprints match"));
}
