//! The plans of the statements: each reads one range of the primary key.

use super::*;

/// The steps of the plan SQLite makes for `statement` on the records table, with "k" bound to
/// every parameter.
fn plan_of(statement: &str) -> Vec<String> {
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(crate::sqlite::schema::CREATE_RECORDS).unwrap();
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {statement}")).unwrap();
    let values = rusqlite::params_from_iter(vec!["k"; stmt.parameter_count()]);
    stmt.query_map(values, |row| row.get(3)).unwrap().map(Result::unwrap).collect()
}

/// Every shape of the range statements (`list`, `list_keys`, the bounded scan) seeks the
/// primary key with both of its key bounds: no row outside the range is read and filtered.
#[test]
fn range_statements_seek_both_ends_of_the_key_range() {
    let statements: [fn(bool, bool) -> &'static str; 3] =
        [list_statement, keys_statement, scan_statement];
    for (statement, (after, end, bounds)) in statements.into_iter().flat_map(|statement| {
        [
            (false, false, "key>?)"),
            (false, true, "key>? AND key<?)"),
            (true, false, "key>?)"),
            (true, true, "key>? AND key<?)"),
        ]
        .map(|shape| (statement, shape))
    }) {
        let expected = format!(
            "SEARCH memory_records USING PRIMARY KEY \
             (app_id=? AND user_id=? AND namespace=? AND {bounds}"
        );
        assert_eq!(plan_of(statement(after, end)), [expected], "after {after}, end {end}");
    }
}

/// Finding the next user is one seek on the primary key's first two columns.
#[test]
fn next_user_seeks_the_primary_key() {
    assert_eq!(
        plan_of(NEXT_USER),
        ["SEARCH memory_records USING PRIMARY KEY (app_id=? AND user_id>?)"]
    );
}

/// Finding the next application is one seek on the primary key's first column.
#[test]
fn next_application_seeks_the_primary_key() {
    assert_eq!(plan_of(NEXT_APPLICATION), ["SEARCH memory_records USING PRIMARY KEY (app_id>?)"]);
}
