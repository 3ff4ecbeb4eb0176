INSERT INTO blobs (b) VALUES (zeroblob(6000000))
