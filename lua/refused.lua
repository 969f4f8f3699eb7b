-- refused.lua: the record of a gateway ts whose message was refused at the door, as its parent
-- was (a reply to a refused message), so a reply to it or an update of it is refused too.
--
-- KEYS[1] the record of the gateway ts (hash, see update.lua)
-- ARGV[1] the refusing level's name, ARGV[2] the record's life (ms)
-- Returns 1.

redis.call('HSET', KEYS[1], 'r', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
