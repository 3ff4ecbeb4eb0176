INSERT INTO {table} (execution, step, token, process, seq, value)
VALUES ($1, $2, $3, $4, $5, $6)
