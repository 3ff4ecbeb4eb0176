INSERT INTO lease_stores (namespace, store) VALUES (?1, ?2)
