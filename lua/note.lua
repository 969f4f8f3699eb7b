-- note.lua: fields of the record of a gateway ts written outside admission: who sent the message
-- and to which channel (before its client knows the ts), or that it was refused as its parent
-- was (a reply to a refused message), so a reply to it or an update of it is refused too.
--
-- KEYS[1] the record of the gateway ts (hash, see update.lua)
-- ARGV[1] the record's life (ms), then field, value pairs ('by', 'ch', 'r')
-- Returns 1.

redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
