import PropertyBased
import SluiceCore
import SluicePolicyModels
import Testing

@Suite struct StatePropertyTests {
    @Test func rateLimitMatchesNaiveModel() async {
        let requests = zip(Gen.int(in: 0...400), Gen.int(in: 0...3)).array(of: 0...40)
        await propertyCheck(count: 300, input: Gen.int(in: 1...7), Gen.int(in: 0...4), requests) { count, burst, requests in
            let options = try! RateLimitOptions(count: count, per: .seconds(1), burst: burst)
            let emission = 1_000_000_000 / Int64(count)
            var real = RateLimitState()
            var naive = NaiveRateLimit(emission: emission, tolerance: emission * Int64(burst + 1), burst: burst)
            var t: Int64 = 0
            for (gap, quantity) in requests {
                t += Int64(gap) * 1_000_000
                let got = real.check(now: Instant(nanoseconds: t), options: options, quantity: quantity)
                let want = naive.check(t: t, quantity: quantity)
                #expect(got == want, "at \(t / 1_000_000) ms, quantity \(quantity)")
            }
        }
    }

    @Test func admitDecidesAndChangesStateLikeCheckForOneEvent() async {
        let gaps = Gen.int(in: 0...400).array(of: 0...40)
        await propertyCheck(count: 300, input: Gen.int(in: 1...7), Gen.int(in: 0...4), gaps) { count, burst, gaps in
            let options = try! RateLimitOptions(count: count, per: .seconds(1), burst: burst)
            var viaCheck = RateLimitState()
            var viaAdmit = RateLimitState()
            var t: Int64 = 0
            for gap in gaps {
                t += Int64(gap) * 1_000_000
                let decision = viaCheck.check(now: Instant(nanoseconds: t), options: options, quantity: 1)
                let wait = viaAdmit.admit(now: Instant(nanoseconds: t), options: options)
                #expect(wait == (decision.allowed ? nil : decision.retryAfter), "at \(t / 1_000_000) ms")
                #expect(viaAdmit == viaCheck, "state at \(t / 1_000_000) ms")
            }
        }
    }

    // MARK: - Idempotency

    @Test func idempotencyMatchesNaiveModelAndRunsAtMostOnce() async {
        // (kind, key, fingerprint, gap ms, pick)
        let ops = zip(Gen.int(in: 0...9), Gen.int(in: 0...1), Gen.int(in: 0...1), Gen.int(in: 0...1_500), Gen.int(in: 0...7)).array(of: 0...60)
        await propertyCheck(count: 300, input: Gen.int(in: 1...3), Gen.int(in: 1...5), Gen.bool, Gen.bool, ops) { lease, retention, reject, cacheErrors, ops in
            let options = try! IdempotencyOptions(
                retention: .seconds(retention),
                lease: .seconds(lease),
                concurrent: reject ? .reject : .join,
                cacheErrors: cacheErrors
            )
            var real = try! IdempotencyTable<Int, Int, String>(options: options, budget: .entries(64))
            var model = NaiveIdempotency(lease: Int64(lease) * 1_000, retention: Int64(retention) * 1_000, reject: reject, cacheErrors: cacheErrors)
            var t: Int64 = 0
            var tokens: [EventToken] = []
            var nextToken: UInt64 = 1
            for (kind, key, fingerprint, gap, pick) in ops {
                t += Int64(gap)
                let now = Instant(milliseconds: t)
                switch kind {
                case 0...4:
                    let token = EventToken(nextToken)
                    nextToken += 1
                    let got = try! real.begin(key: key, fingerprint: fingerprint, token: token, now: now)
                    let want = model.begin(key: key, fingerprint: fingerprint, token: token, t: t)
                    #expect(got == want, "begin \(key)/\(fingerprint) at \(t)")
                    if case .execute = got { tokens.append(token) }
                case 5...7 where !tokens.isEmpty:
                    let owner = tokens[pick % tokens.count]
                    let isError = kind == 7
                    let result = "r\(owner.rawValue)"
                    let got = real.complete(key: key, owner: owner, result: result, isError: isError, now: now)
                    let want = model.complete(key: key, owner: owner, result: result, isError: isError, t: t)
                    #expect(got == want, "complete \(key) by \(owner) at \(t)")
                case 8 where !tokens.isEmpty:
                    let owner = tokens[pick % tokens.count]
                    let got = real.cancel(key: key, owner: owner)
                    #expect(got == model.cancel(key: key, owner: owner, t: t))
                case 9 where !tokens.isEmpty:
                    let owner = tokens[pick % tokens.count]
                    let got = real.renewLease(key: key, owner: owner, now: now)
                    #expect(got == model.renew(key: key, owner: owner, t: t))
                default:
                    break
                }
            }
            // The invariant, checked on the model's log of what the real table decided: every
            // execution of a key had a reason to happen — its predecessor was released (cancel or
            // uncached error), its retention ran out, or its lease ran out (the owner is presumed
            // dead). Hence at most one execution per (key, fingerprint) inside retention, and none
            // for a mismatch.
            for key in 0...1 {
                let executions = model.log.filter { $0.key == key }
                for (previous, next) in zip(executions, executions.dropFirst()) {
                    let reason: Bool
                    switch previous.outcome {
                    case .released(let at): reason = at <= next.start
                    case .completed(let at, _): reason = at + model.retention <= next.start
                    case .running: reason = previous.leaseEnd <= next.start
                    }
                    #expect(reason, "execution at \(next.start) of key \(key) without release, expiry or takeover")
                }
            }
        }
    }

    // MARK: - Single-flight and switch-latest

    @Test func singleFlightMatchesModel() async {
        let ops = zip(Gen.int(in: 0...5), Gen.int(in: 0...2), Gen.int(in: 0...9)).array(of: 0...60)
        await propertyCheck(count: 300, input: ops) { ops in
            var real = SingleFlight<Int>()
            var model = NaiveFlights<Int>()
            var issued: [UInt64] = []
            var next: UInt64 = 1
            for (kind, key, pick) in ops {
                switch kind {
                case 0, 1:
                    let token = next
                    issued.append(token)
                    next += 1
                    #expect(real.begin(EventToken(token), key: key) == model.begin(token, key: key))
                case 2:
                    // Complete with the real leader most of the time, a wrong token otherwise.
                    let leader = pick < 7 ? (model[key]?.leader ?? 999) : UInt64(pick + 1_000)
                    #expect(real.complete(key: key, leader: EventToken(leader)) == model.complete(key: key, leader: leader))
                case 3:
                    let got = real.forget(key: key)
                    let want = model.forget(key: key)
                    #expect(got?.leader.rawValue == want?.leader)
                    #expect(got?.joiners.map(\.rawValue) == want?.joiners)
                default:
                    // A waiter (or any issued token) leaves.
                    guard !issued.isEmpty else { break }
                    let token = issued[pick % issued.count]
                    #expect(real.leave(EventToken(token), key: key) == model.leave(token, key: key))
                }
                #expect(real.count == model.count)
                for key in 0...2 {
                    #expect(real.waiterCount(for: key) == model.waiterCount(for: key))
                }
            }
        }
    }

    @Test func switchLatestMatchesHistory() async {
        let ops = zip(Gen.int(in: 0...2), Gen.int(in: 0...2), Gen.int(in: 0...1), Gen.int(in: 0...9)).array(of: 0...60)
        await propertyCheck(count: 300, input: ops) { ops in
            var real = SwitchLatest<Int, Int>()
            var starts: [(key: Int, effect: Int, token: UInt64)] = []
            var finished: Set<UInt64> = []
            var next: UInt64 = 1
            /// Naive: the running effect is the last one started for (key, effect), unless it finished.
            func running(_ key: Int, _ effect: Int) -> UInt64? {
                guard let last = starts.last(where: { $0.key == key && $0.effect == effect }) else { return nil }
                return finished.contains(last.token) ? nil : last.token
            }
            for (kind, key, effect, pick) in ops {
                if kind < 2 {
                    let want = running(key, effect)
                    let got = real.start(EventToken(next), key: key, effect: effect)
                    #expect(got?.rawValue == want)
                    starts.append((key, effect, next))
                    next += 1
                } else if !starts.isEmpty {
                    let victim = starts[pick % starts.count]
                    let want = running(victim.key, victim.effect) == victim.token
                    let got = real.finished(EventToken(victim.token), key: victim.key, effect: victim.effect)
                    #expect(got == want)
                    finished.insert(victim.token)
                }
            }
        }
    }
}

/// A deliberately naive idempotency guard: a log of every execution, decisions recomputed from the
/// latest execution of the key.
struct NaiveIdempotency {
    enum Outcome {
        case running
        case completed(at: Int64, result: String)
        case released(at: Int64)
    }

    struct Execution {
        var key: Int
        var fingerprint: Int
        var owner: EventToken
        var start: Int64
        var leaseEnd: Int64
        var outcome: Outcome
    }

    var lease: Int64
    var retention: Int64
    var reject: Bool
    var cacheErrors: Bool
    var log: [Execution] = []

    mutating func begin(key: Int, fingerprint: Int, token: EventToken, t: Int64) -> IdempotencyDecision<String> {
        var decision: IdempotencyDecision<String> = .execute(takeover: nil)
        if let latest = log.last(where: { $0.key == key }) {
            switch latest.outcome {
            case .released:
                break
            case .running where t >= latest.leaseEnd:
                decision = .execute(takeover: latest.owner)
            case .running:
                if latest.fingerprint != fingerprint { return .mismatch }
                return reject ? .conflict : .join(owner: latest.owner)
            case .completed(let at, let result) where t < at + retention:
                return latest.fingerprint == fingerprint ? .replay(result) : .mismatch
            case .completed:
                break
            }
        }
        log.append(Execution(key: key, fingerprint: fingerprint, owner: token, start: t, leaseEnd: t + lease, outcome: .running))
        return decision
    }

    func ownedIndex(key: Int, owner: EventToken) -> Int? {
        guard let index = log.lastIndex(where: { $0.key == key }), log[index].owner == owner,
              case .running = log[index].outcome else { return nil }
        return index
    }

    mutating func complete(key: Int, owner: EventToken, result: String, isError: Bool, t: Int64) -> IdempotencyCompletion {
        guard let index = ownedIndex(key: key, owner: owner) else { return .notOwner }
        if isError && !cacheErrors {
            log[index].outcome = .released(at: t)
            return .released
        }
        log[index].outcome = .completed(at: t, result: result)
        return .stored
    }

    mutating func cancel(key: Int, owner: EventToken, t: Int64) -> Bool {
        guard let index = ownedIndex(key: key, owner: owner) else { return false }
        log[index].outcome = .released(at: t)
        return true
    }

    mutating func renew(key: Int, owner: EventToken, t: Int64) -> Bool {
        guard let index = ownedIndex(key: key, owner: owner) else { return false }
        log[index].leaseEnd = t + lease
        return true
    }
}
