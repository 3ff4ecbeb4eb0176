INSERT INTO {table} (order_id, amount) VALUES ($1, $2)
