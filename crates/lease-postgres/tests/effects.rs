//! Effect rows this library never writes (a result without a settle time, an invalid id)
//! are a typed `Protocol` error for every call that reads them, never a panic, and change
//! nothing; the other effects stay usable.

mod common;

use lease_core::{
    Admission, EffectId, EffectState, ExecutionClient, ExecutionId, Json, LeaseError,
};
use lease_postgres::{PostgresBackend, PostgresConfig};
use sqlx::{AssertSqlSafe, Connection, PgConnection};

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
    let schema = common::fresh_schema();
    let config = PostgresConfig::new(common::url())
        .schema(schema.clone())
        .max_connections(2);
    common::cleaning_up(schema.clone(), async move {
        let b = PostgresBackend::connect(config).await.expect("connect");
        let x = ExecutionId::new("order-42").expect("id");
        b.admit(&Admission::new(x.clone())).await.expect("admit");
        let e = b.effects().expect("effects");
        for name in ["no-settle-time", "bad-owner", "good"] {
            e.begin_effect(&effect(name), &x).await.expect("begin");
        }
        let mut admin = PgConnection::connect(&common::url()).await.expect("admin");
        sqlx::raw_sql(AssertSqlSafe(format!(
            "UPDATE \"{schema}\".effects SET result = '1' WHERE id = 'no-settle-time';
             UPDATE \"{schema}\".effects SET execution_id = '' WHERE id = 'bad-owner';"
        )))
        .execute(&mut admin)
        .await
        .expect("corrupt rows");
        let one = Json::parse("result", "1").expect("json");
        for name in ["no-settle-time", "bad-owner"] {
            let id = effect(name);
            assert_protocol(e.read_effect(&id).await, "read");
            assert_protocol(e.settle_effect(&id, &x, &one).await, "settle");
            assert_protocol(e.wait_effect(&id, &x).await, "wait");
        }
        let raw: (Option<String>, Option<i64>) = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT result, settled_at FROM \"{schema}\".effects WHERE id = 'no-settle-time'"
        )))
        .fetch_one(&mut admin)
        .await
        .expect("row");
        assert_eq!(raw, (Some("1".to_owned()), None), "nothing changed");
        let settled = e
            .settle_effect(&effect("good"), &x, &one)
            .await
            .expect("settle");
        assert_eq!(settled.record().state, EffectState::Settled(one));
    })
    .await;
}
