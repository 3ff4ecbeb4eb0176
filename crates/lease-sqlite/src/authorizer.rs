//! The authorizer that fences the application's SQL in: while a fenced closure
//! ([`crate::fenced`]) runs on a thread, the statements it prepares may not end the
//! transaction or write the library's `lease_` tables.

use std::cell::Cell;

use rusqlite::Connection;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};

thread_local! {
    /// The application's closure is running on this thread (see [`guard_app_sql`]).
    static IN_APP_SQL: Cell<bool> = const { Cell::new(false) };
}

/// Marks the application's closure as running on this thread until dropped (also on
/// panic).
struct AppSql;

impl AppSql {
    fn enter() -> Self {
        IN_APP_SQL.set(true);
        AppSql
    }
}

impl Drop for AppSql {
    fn drop(&mut self) {
        IN_APP_SQL.set(false);
    }
}

/// Runs the application's closure with its SQL guarded ([`guard_app_sql`]). The library's
/// own statements run outside: a statement first prepared in here would be refused.
pub(crate) fn app_sql<T>(f: impl FnOnce() -> T) -> T {
    let _guard = AppSql::enter();
    f()
}

/// Runs the library's own statements from inside the application's closure (an admission
/// in a fenced transaction, [`crate::SqliteBackend::admit_in_tx`]): unguarded while `f`
/// runs, the guard restored after it (also on panic).
pub(crate) fn library_sql<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            IN_APP_SQL.set(self.0);
        }
    }
    let _restore = Restore(IN_APP_SQL.replace(false));
    f()
}

/// Installs the authorizer that fences the application's SQL in: while a fenced closure
/// runs on the thread, statements it prepares may not begin, commit or roll back the
/// transaction, touch the library's savepoint, or write, create, alter or drop `lease_`
/// tables, indexes or triggers (reads are allowed). Elsewhere every statement is allowed.
/// Installed once per connection: setting an authorizer expires every prepared statement.
pub(crate) fn guard_app_sql(conn: &Connection) {
    conn.authorizer(Some(|ctx: AuthContext<'_>| {
        if IN_APP_SQL.get() && refused(&ctx.action) {
            Authorization::Deny
        } else {
            Authorization::Allow
        }
    }));
}

fn is_lease_name(name: &str) -> bool {
    name.get(..6)
        .is_some_and(|p| p.eq_ignore_ascii_case("lease_"))
}

/// The actions a fenced closure may not take.
fn refused(action: &AuthAction<'_>) -> bool {
    match *action {
        AuthAction::Transaction { .. } => true,
        AuthAction::Savepoint { savepoint_name, .. } => is_lease_name(savepoint_name),
        AuthAction::Insert { table_name }
        | AuthAction::Update { table_name, .. }
        | AuthAction::Delete { table_name }
        | AuthAction::CreateTable { table_name }
        | AuthAction::DropTable { table_name }
        | AuthAction::AlterTable { table_name, .. }
        | AuthAction::CreateIndex { table_name, .. }
        | AuthAction::DropIndex { table_name, .. }
        | AuthAction::CreateTrigger { table_name, .. }
        | AuthAction::DropTrigger { table_name, .. }
        | AuthAction::CreateTempTrigger { table_name, .. } => is_lease_name(table_name),
        _ => false,
    }
}
