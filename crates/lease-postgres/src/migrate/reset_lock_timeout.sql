-- Back to the server's lock_timeout once the migration is over.
RESET lock_timeout
