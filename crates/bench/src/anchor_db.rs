//! The PostgreSQL database of one `--only anchors` row: created at the
//! start, dropped at the end, so every system's state (apalis keeps a fixed `apalis` schema)
//! lives apart from everything else on the shared server.

use crate::error::{BenchError, Result};

/// A database `lease_anchors_<hex>` on the server of the admin URL.
pub struct RunDatabase {
    admin: sqlx::PgPool,
    name: String,
    url: String,
}

/// `url` with its database replaced by `name` (the part after the authority, before `?`).
pub fn with_database(url: &str, name: &str) -> Result<String> {
    let bad = || BenchError::Setup("the PostgreSQL URL has no host part".into());
    let scheme_end = url.find("://").ok_or_else(bad)? + 3;
    let (head, query) = match url[scheme_end..].find('?') {
        Some(q) => url.split_at(scheme_end + q),
        None => (url, ""),
    };
    let authority_end = head[scheme_end..]
        .find('/')
        .map_or(head.len(), |i| scheme_end + i);
    Ok(format!("{}/{name}{query}", &head[..authority_end]))
}

impl RunDatabase {
    /// Creates the database.
    pub async fn create(admin_url: &str) -> Result<RunDatabase> {
        let admin = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(admin_url)
            .await
            .map_err(|e| BenchError::Setup(format!("PostgreSQL: {e}")))?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("lease_anchors_{}", &id[..12]);
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&admin)
            .await
            .map_err(|e| BenchError::Setup(format!("create database {name}: {e}")))?;
        let url = with_database(admin_url, &name)?;
        Ok(RunDatabase { admin, name, url })
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Drops the database (its sessions closed by force).
    pub async fn drop(self) -> Result<()> {
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let dropped = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&self.admin)
            .await
            .map_err(|e| BenchError::Setup(format!("drop database {}: {e}", self.name)));
        self.admin.close().await;
        dropped.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_part_of_a_url_is_replaced() {
        let cases = [
            (
                "postgres://postgres@127.0.0.1:5432/test",
                "postgres://postgres@127.0.0.1:5432/x",
            ),
            (
                "postgres://u:p@h/test?sslmode=disable",
                "postgres://u:p@h/x?sslmode=disable",
            ),
            ("postgres://h:5432", "postgres://h:5432/x"),
            (
                "postgres://h?sslmode=require",
                "postgres://h/x?sslmode=require",
            ),
        ];
        for (url, want) in cases {
            assert_eq!(with_database(url, "x").ok().as_deref(), Some(want), "{url}");
        }
        assert!(with_database("test", "x").is_err());
    }

    /// The database is created, reachable at its URL, and gone after `drop`.
    #[tokio::test]
    async fn the_run_database_is_created_and_dropped() {
        let admin = lease_testserver::postgres_url();
        let db = RunDatabase::create(&admin).await.expect("create");
        let name = db.name.clone();
        let pool = sqlx::PgPool::connect(db.url()).await.expect("connect");
        let (current,): (String,) = sqlx::query_as("SELECT current_database()::text")
            .fetch_one(&pool)
            .await
            .expect("query");
        assert_eq!(current, name);
        db.drop().await.expect("drop, the session still open");
        let check = sqlx::PgPool::connect(&admin).await.expect("admin");
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM pg_database WHERE datname = $1")
            .bind(&name)
            .fetch_one(&check)
            .await
            .expect("count");
        assert_eq!(n, 0);
    }
}
