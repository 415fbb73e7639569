/// The store's Lua scripts of idempotency records: each decision is one script, one round trip,
/// and reads the time from Redis (`TIME`), never from the instances. Times are microseconds;
/// every key gets a TTL. Throttles and rate limits, a plugin's own or its chain's, are decided by
/// ``RedisChainScripts/admit``.
enum RedisStoreScripts {
    /// Claims an idempotency record. KEYS: record (hash), fence counter, the store's epoch marker.
    /// ARGV: fingerprint, owner, lease (ms), fence counter TTL (ms). Returns {'claimed', counter,
    /// epoch}, {'running'}, {'completed', result} or {'mismatch', stored fingerprint}. A record
    /// whose lease ran out has expired and is claimed again with the next fence. The epoch
    /// marker (no TTL) is written at first use with Redis's clock, in milliseconds: a Redis that
    /// comes back without its data writes it again, later, so every fence it grants is greater
    /// than those granted before. The counter is refused past 2^22 - 1 (a fence's low bits).
    static let claim = RedisScript(
        """
        local epoch = redis.call('GET', KEYS[3])
        if not epoch then
          local t = redis.call('TIME')
          epoch = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
          redis.call('SET', KEYS[3], epoch)
        end
        local r = redis.call('HMGET', KEYS[1], 'fp', 'result')
        if r[1] then
          if r[1] ~= ARGV[1] then return {'mismatch', r[1]} end
          if r[2] then return {'completed', r[2]} end
          return {'running'}
        end
        local fence = redis.call('INCR', KEYS[2])
        if fence > 4194303 then return redis.error_reply('fence counter exhausted') end
        if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[4]) then redis.call('PEXPIRE', KEYS[2], ARGV[4]) end
        redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'owner', ARGV[2], 'fence', fence)
        redis.call('PEXPIRE', KEYS[1], ARGV[3])
        return {'claimed', fence, epoch}
        """)

    /// Renews a running owner's lease. KEYS: record, fence counter, epoch marker. ARGV: owner,
    /// fence counter, lease (ms), fingerprint, epoch. A lease of another epoch is not current (the
    /// store lost its data since). A lease that ran out while no one claimed the record since (the
    /// fence counter still names it) is renewed by opening the record again. Returns 1, or 0 when
    /// another owner claimed it. The counter is kept at least four leases.
    static let renew = RedisScript(
        """
        if redis.call('GET', KEYS[3]) ~= ARGV[5] then return 0 end
        local r = redis.call('HMGET', KEYS[1], 'owner', 'fence', 'result')
        if r[1] then
          if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] or r[3] then return 0 end
        elseif redis.call('GET', KEYS[2]) == ARGV[2] then
          redis.call('HSET', KEYS[1], 'fp', ARGV[4], 'owner', ARGV[1], 'fence', ARGV[2])
        else
          return 0
        end
        redis.call('PEXPIRE', KEYS[1], ARGV[3])
        local keep = tonumber(ARGV[3]) * 4
        if redis.call('PTTL', KEYS[2]) < keep then redis.call('PEXPIRE', KEYS[2], keep) end
        return 1
        """)

    /// Stores an owner's result. KEYS: record, fence counter, epoch marker. ARGV: owner, fence
    /// counter, result, retention (ms), fingerprint, epoch. Accepted when the epoch is the
    /// store's and the record is this lease's, or when it expired and no one claimed it since
    /// (the fence counter still names this lease); the fingerprint is kept with the result, and
    /// the counter outlives the record. Returns 1, or 0 for a stale owner.
    static let complete = RedisScript(
        """
        if redis.call('GET', KEYS[3]) ~= ARGV[6] then return 0 end
        local r = redis.call('HMGET', KEYS[1], 'owner', 'fence', 'result')
        if r[1] then
          if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] then return 0 end
          if r[3] then
            if r[3] == ARGV[3] then return 1 end
            return 0
          end
        elseif redis.call('GET', KEYS[2]) ~= ARGV[2] then
          return 0
        end
        redis.call('HSET', KEYS[1], 'fp', ARGV[5], 'owner', ARGV[1], 'fence', ARGV[2], 'result', ARGV[3])
        redis.call('PEXPIRE', KEYS[1], ARGV[4])
        redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[4]) + math.max(0, redis.call('PTTL', KEYS[2])))
        return 1
        """)

    /// Gives a record back (its execution did not commit). KEYS: record, epoch marker. ARGV:
    /// owner, fence counter ('0': whichever fence this owner holds — a claim whose answer was
    /// lost), epoch ('0': any). Returns 1, or 0 when the record is not this owner's, holds a
    /// result, or the lease is of another epoch.
    static let release = RedisScript(
        """
        if ARGV[3] ~= '0' and redis.call('GET', KEYS[2]) ~= ARGV[3] then return 0 end
        local r = redis.call('HMGET', KEYS[1], 'owner', 'fence', 'result')
        if r[1] ~= ARGV[1] or r[3] then return 0 end
        if ARGV[2] ~= '0' and r[2] ~= ARGV[2] then return 0 end
        redis.call('DEL', KEYS[1])
        return 1
        """)
}
