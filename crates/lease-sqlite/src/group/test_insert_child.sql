INSERT INTO t_child (p) VALUES (42)
