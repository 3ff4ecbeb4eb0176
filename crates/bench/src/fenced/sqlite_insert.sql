INSERT INTO bench_charges (order_id, amount) VALUES (?1, ?2)
