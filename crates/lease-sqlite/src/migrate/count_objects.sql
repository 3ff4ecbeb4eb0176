SELECT count(*) FROM sqlite_master
