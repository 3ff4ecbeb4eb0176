-- `DROP SCHEMA ... CASCADE` (`drop_schema_forced`).
DROP SCHEMA IF EXISTS {s} CASCADE
