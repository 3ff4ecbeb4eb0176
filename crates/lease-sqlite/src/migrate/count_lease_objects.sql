SELECT count(*) FROM sqlite_master WHERE name LIKE 'lease\_%' ESCAPE '\'
