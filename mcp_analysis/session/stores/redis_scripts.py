"""The Lua scripts of the Redis session store: each one atomic step on the keys of redis.py.

Times are Redis's own clock (TIME), so replicas with skewed clocks agree on what expired.
A stored version is a decimal integer; a record whose ``v`` field is missing or is not one
reads as version -1 (a damaged record a new session may overwrite, never a crash).

Saving checks everything before it writes anything, and its first write is one that needs
memory: a Redis at its maxmemory (noeviction) refuses it before any change, so a full
store stays exactly as it was. (Redis lets a script that has written once go on writing
past maxmemory, to keep scripts atomic: that is why the order matters.)
"""

from __future__ import annotations

_NOW = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
"""

_VERSION = """
local function stored_version(key)
  local raw = redis.call('HGET', key, 'v')
  if not raw then
    if redis.call('EXISTS', key) == 1 then return -1 end
    return 0
  end
  if string.len(raw) > 15 or not string.match(raw, '^%d+$') then return -1 end
  return tonumber(raw)
end
"""

# Forget expired sessions in the index and their sizes in the running total, and lapsed
# "was kept" markers. The first write is HDEL (needs no memory), so pruning works when full.
_PRUNE = """
local function prune(idx, sz, total, kept, now)
  local gone = redis.call('ZRANGEBYSCORE', idx, '-inf', now)
  for _, k in ipairs(gone) do
    local b = tonumber(redis.call('HGET', sz, k) or '0')
    redis.call('HDEL', sz, k)
    if b > 0 then redis.call('DECRBY', total, b) end
  end
  redis.call('ZREMRANGEBYSCORE', idx, '-inf', now)
  redis.call('ZREMRANGEBYSCORE', kept, '-inf', now)
end
"""

#: KEYS idx, sz, bytes, kept -> {sessions, bytes of sessions, markers}
COUNT = (
    _NOW
    + _PRUNE
    + """
prune(KEYS[1], KEYS[2], KEYS[3], KEYS[4], now)
return {redis.call('ZCARD', KEYS[1]), tonumber(redis.call('GET', KEYS[3]) or '0'), redis.call('ZCARD', KEYS[4])}
"""
)

#: KEYS 1 s, 2 idx, 3 idx:<owner>, 4 sz, 5 bytes, 6 kept, 7 epoch, 8 c (the dump's chunks)
#: ARGV 1 expected, 2 new version, 3 ttl ms, 4 marker ttl ms, 5 max stored, 6 max per principal,
#:      7 max bytes, 8 member, 9 epoch, 10 estimated bytes, 11 index bytes, 12 marker bytes,
#:      13 owner, 14 format, 15 key id, 16 mac, 17 rec, 18 has chunks, 19 chunk listing,
#:      20.. field, value of each chunk sent (those the store may not hold)
#: -> new version, or -1 conflict, -2 total, -3 principal, -4 bytes, -5 epoch changed,
#:    -6 a listed chunk not sent is not held (send them all)
#: The record's chunks are kept under their name and key id (sealed.py); chunks it no longer
#: lists go in the same step, so a reader (MULTI over both keys) sees a record with all its chunks.
SAVE = (
    _NOW
    + _VERSION
    + _PRUNE
    + """
if redis.call('GET', KEYS[7]) ~= ARGV[9] then return -5 end
local cur = stored_version(KEYS[1])
if cur ~= tonumber(ARGV[1]) then return -1 end
local v = tonumber(ARGV[2])
if v <= cur then return -1 end
local member = ARGV[8]
if cur == 0 then
  if redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf') >= tonumber(ARGV[5]) then return -2 end
  if redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') >= tonumber(ARGV[6]) then return -3 end
end
local held = tonumber(redis.call('GET', KEYS[5]) or '0')
for _, k in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do
  if k ~= member then held = held - tonumber(redis.call('HGET', KEYS[4], k) or '0') end
end
local before = tonumber(redis.call('HGET', KEYS[4], member) or '0')
local markers = redis.call('ZCOUNT', KEYS[6], '(' .. now, '+inf')
if not redis.call('ZSCORE', KEYS[6], member) then markers = markers + 1 end
local needed = held - before + tonumber(ARGV[10]) + markers * tonumber(ARGV[12])
if needed > tonumber(ARGV[7]) then return -4 end
local wanted = {}
local listing = ARGV[19]
for i = 1, string.len(listing), 40 do wanted[string.sub(listing, i, i + 39) .. ARGV[15]] = true end
local sent = {}
for i = 20, #ARGV, 2 do sent[ARGV[i]] = true end
for f, _ in pairs(wanted) do
  if not sent[f] and redis.call('HEXISTS', KEYS[8], f) == 0 then return -6 end
end
for i = 20, #ARGV, 1000 do redis.call('HSET', KEYS[8], unpack(ARGV, i, math.min(i + 999, #ARGV))) end
redis.call('HSET', KEYS[1], 'v', v, 'f', ARGV[14], 'k', ARGV[15], 'mac', ARGV[16], 'owner', ARGV[13], 'rec', ARGV[17])
redis.call('HDEL', KEYS[1], 'blob', 'c')
if ARGV[18] == '1' then redis.call('HSET', KEYS[1], 'c', listing) end
local stale = {}
for _, f in ipairs(redis.call('HKEYS', KEYS[8])) do
  if not wanted[f] then table.insert(stale, f) end
end
for i = 1, #stale, 1000 do redis.call('HDEL', KEYS[8], unpack(stale, i, math.min(i + 999, #stale))) end
local ttl = tonumber(ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[8], ttl)
prune(KEYS[2], KEYS[4], KEYS[5], KEYS[6], now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZADD', KEYS[2], now + ttl, member)
redis.call('ZADD', KEYS[3], now + ttl, member)
redis.call('ZADD', KEYS[6], now + tonumber(ARGV[4]), member)
local measured = redis.pcall('MEMORY', 'USAGE', KEYS[1], 'SAMPLES', '0')
local size = tonumber(ARGV[10])
if type(measured) == 'number' then
  size = measured + tonumber(ARGV[11])
  local pieces = redis.pcall('MEMORY', 'USAGE', KEYS[8], 'SAMPLES', '0')
  if type(pieces) == 'number' then size = size + pieces end
end
local counted = tonumber(redis.call('HGET', KEYS[4], member) or '0')
redis.call('HSET', KEYS[4], member, size)
redis.call('INCRBY', KEYS[5], size - counted)
return v
"""
)

#: KEYS s, idx, c; ARGV ttl ms, member, idx:<owner> prefix -> version (-1 damaged) or nil
TOUCH = (
    _NOW
    + _VERSION
    + """
local v = stored_version(KEYS[1])
if v == 0 then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[1])
local expiry = now + tonumber(ARGV[1])
redis.call('ZADD', KEYS[2], 'XX', expiry, ARGV[2])
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner then redis.call('ZADD', ARGV[3] .. owner, 'XX', expiry, ARGV[2]) end
return v
"""
)

#: KEYS s, idx, sz, bytes, c; ARGV member, idx:<owner> prefix (the "was kept" marker stays)
DELETE = """
local owner = redis.call('HGET', KEYS[1], 'owner')
redis.call('DEL', KEYS[1], KEYS[5])
redis.call('ZREM', KEYS[2], ARGV[1])
if owner then redis.call('ZREM', ARGV[2] .. owner, ARGV[1]) end
local b = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
redis.call('HDEL', KEYS[3], ARGV[1])
if b > 0 then redis.call('DECRBY', KEYS[4], b) end
return 1
"""
