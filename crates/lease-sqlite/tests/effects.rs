//! Effect rows this library never writes (a result without a settle time, an invalid id, a
//! result of the wrong type) are a typed `Protocol` error for every call that reads them,
//! never a panic, and change nothing; the other effects stay usable.

use lease_core::{
    Admission, EffectId, EffectState, ExecutionClient, ExecutionId, Json, LeaseError,
};
use lease_sqlite::{SqliteBackend, SqliteConfig};
use rusqlite::Connection;

fn effect(s: &str) -> EffectId {
    EffectId::new(s).expect("effect id")
}

fn assert_protocol<T: std::fmt::Debug>(r: lease_core::Result<T>, what: &str) {
    match r {
        Err(LeaseError::Protocol { reason, .. }) => assert!(!reason.is_empty(), "{what}"),
        other => panic!("{what}: expected Protocol, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_effect_rows_are_typed_errors_and_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("effects.db");
    let b = SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("open");
    let x = ExecutionId::new("order-42").expect("id");
    b.admit(&Admission::new(x.clone())).await.expect("admit");
    let e = b.effects().expect("effects");
    for name in ["no-settle-time", "wrong-type", "good"] {
        e.begin_effect(&effect(name), &x).await.expect("begin");
    }
    Connection::open(&path)
        .expect("raw open")
        .execute_batch(
            "UPDATE lease_effects SET result = '1' WHERE id = 'no-settle-time';
             UPDATE lease_effects SET begun_at = 'yesterday' WHERE id = 'wrong-type';",
        )
        .expect("corrupt rows");
    let one = Json::parse("result", "1").expect("json");
    for name in ["no-settle-time", "wrong-type"] {
        let id = effect(name);
        assert_protocol(e.read_effect(&id).await, "read");
        assert_protocol(e.begin_effect(&id, &x).await, "begin");
        assert_protocol(e.settle_effect(&id, &x, &one).await, "settle");
        assert_protocol(e.wait_effect(&id, &x).await, "wait");
    }
    let raw: (Option<String>, Option<i64>) = Connection::open(&path)
        .expect("raw open")
        .query_row(
            "SELECT result, settled_at FROM lease_effects WHERE id = 'no-settle-time'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("row");
    assert_eq!(raw, (Some("1".to_owned()), None), "nothing changed");
    let settled = e
        .settle_effect(&effect("good"), &x, &one)
        .await
        .expect("settle");
    assert_eq!(settled.record().state, EffectState::Settled(one));
}
