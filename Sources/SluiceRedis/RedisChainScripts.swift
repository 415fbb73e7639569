/// The Lua scripts of chains decided by the store (``RedisStore``'s `admit`, `giveBack` and
/// `renewSlots`): one key per stage, all of them in one hash slot. Times are microseconds, read
/// from Redis (`TIME`); every key gets a TTL.
enum RedisChainScripts {
    /// Decides every stage on the state as it is and writes only when all admit (a stage in
    /// shadow mode that would refuse is reported and skipped). KEYS: one per stage. ARGV: cost,
    /// owner, then four per stage: kind (`t` throttle, `g` GCRA, `c` concurrency), two
    /// parameters (`t`: interval µs; `g`: emission interval µs with a fraction, tolerance µs;
    /// `c`: limit, lease ms), and `1` for shadow mode. Returns {refusing stage (1-based, 0: none),
    /// verdicts, shadow stages (0-based)}; a verdict is {allowed, …}: for `t` {allowed, wait µs,
    /// window start µs}, for `g` {allowed, remaining, retry-after µs (-1: none), reset-after µs},
    /// for `c` {allowed, in flight}.
    static let admit = RedisScript(
        """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
        local q = tonumber(ARGV[1])
        local owner = ARGV[2]
        local verdicts = {}
        local shadows = {}
        local writes = {}
        for i = 1, #KEYS do
          local a = 3 + (i - 1) * 4
          local kind = ARGV[a]
          local p1 = tonumber(ARGV[a + 1])
          local p2 = tonumber(ARGV[a + 2])
          local allowed = 0
          local verdict
          if kind == 't' then
            local last = redis.call('GET', KEYS[i])
            local wait = 0
            if last then wait = tonumber(last) + p1 - now end
            if wait > 0 then
              verdict = {0, wait, tonumber(last)}
            else
              allowed = 1
              verdict = {1, 0, now}
              writes[#writes + 1] = {'t', i, now, math.max(1, math.ceil(p1 / 1000))}
            end
          elseif kind == 'g' then
            local tat = tonumber(redis.call('GET', KEYS[i]) or now)
            if tat < now then tat = now end
            local newTat = tat + q * p1
            local allowAt = newTat - p2
            local ttl, retry
            if allowAt <= now then
              allowed = 1
              ttl = newTat - now
              retry = -1
              if ttl > 0 then writes[#writes + 1] = {'g', i, newTat, math.max(1, math.ceil(ttl / 1000))} end
            else
              ttl = tat - now
              if q * p1 <= p2 then retry = allowAt - now else retry = -1 end
            end
            local nextValue = p2 - ttl
            local remaining = 0
            if nextValue > 0 then remaining = math.floor(nextValue / p1) end
            verdict = {allowed, remaining, retry, ttl}
          elseif kind == 'c' then
            redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
            local held = redis.call('ZCARD', KEYS[i])
            if held < p1 then
              allowed = 1
              verdict = {1, held + 1}
              writes[#writes + 1] = {'c', i, now + p2 * 1000, p2}
            else
              verdict = {0, held}
            end
          else
            return redis.error_reply('unknown stage kind')
          end
          verdicts[i] = verdict
          if allowed == 0 then
            if ARGV[a + 3] == '1' then
              shadows[#shadows + 1] = i - 1
            else
              return {i, verdicts, shadows}
            end
          end
        end
        for _, w in ipairs(writes) do
          local key = KEYS[w[2]]
          if w[1] == 'c' then
            redis.call('ZADD', key, w[3], owner)
            if redis.call('PTTL', key) < w[4] then redis.call('PEXPIRE', key, w[4]) end
          else
            redis.call('SET', key, w[3], 'PX', w[4])
          end
        end
        return {0, verdicts, shadows}
        """)

    /// Gives back what an admitted request holds. KEYS: one per stage held. ARGV: cost, owner,
    /// then two per stage: kind and a parameter (`t`: the window start it opened, closed only
    /// while it is still that window; `g`: the emission interval, `cost` of which is subtracted
    /// from the arrival time; `c`: unused, the owner's slot is freed). Returns 1.
    static let giveBack = RedisScript(
        """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
        local q = tonumber(ARGV[1])
        local owner = ARGV[2]
        for i = 1, #KEYS do
          local a = 3 + (i - 1) * 2
          local kind = ARGV[a]
          if kind == 't' then
            local start = redis.call('GET', KEYS[i])
            if start and tonumber(start) == tonumber(ARGV[a + 1]) then redis.call('DEL', KEYS[i]) end
          elseif kind == 'g' then
            local tat = redis.call('GET', KEYS[i])
            if tat and q > 0 then
              local back = tonumber(tat) - q * tonumber(ARGV[a + 1])
              if back <= now then
                redis.call('DEL', KEYS[i])
              else
                redis.call('SET', KEYS[i], back, 'PX', math.max(1, math.ceil((back - now) / 1000)))
              end
            end
          elseif kind == 'c' then
            redis.call('ZREM', KEYS[i], owner)
          end
        end
        return 1
        """)

    /// Extends an owner's slots. KEYS: one per concurrency stage. ARGV: owner, then each stage's
    /// lease (ms). A slot whose lease ran out is dropped, not taken again. Returns how many slots
    /// the owner still held.
    static let renewSlots = RedisScript(
        """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
        local owner = ARGV[1]
        local held = 0
        for i = 1, #KEYS do
          local lease = tonumber(ARGV[i + 1])
          local score = redis.call('ZSCORE', KEYS[i], owner)
          if score and tonumber(score) > now then
            redis.call('ZADD', KEYS[i], now + lease * 1000, owner)
            if redis.call('PTTL', KEYS[i]) < lease then redis.call('PEXPIRE', KEYS[i], lease) end
            held = held + 1
          elseif score then
            redis.call('ZREM', KEYS[i], owner)
          end
        end
        return held
        """)
}
