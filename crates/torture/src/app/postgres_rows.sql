SELECT execution, step, token, process, seq, value FROM {table} ORDER BY id
