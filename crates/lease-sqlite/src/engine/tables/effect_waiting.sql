-- `$1 namespace, $2 id, $3 waiting`: marks or unmarks the effect's owner as waiting.
UPDATE lease_effects SET waiting = ?3 WHERE namespace = ?1 AND id = ?2
