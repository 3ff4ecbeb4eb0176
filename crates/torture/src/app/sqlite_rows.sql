SELECT execution, step, token, process, seq, value FROM torture_app_rows ORDER BY rowid
