import FuzzSupport
import SluiceCore

// fuzz-idempotency: `IdempotencyTable` (records in a `KeyTable` that refuses new keys when full
// of live records) on keys 0–3 with two fingerprints, with time that never goes back.
//
// Input: [options] [capacity] then operations: begins (renewable lease or held until released),
// completions (results, cached or uncached errors), cancellations and lease renewals by any
// owner that ever executed, sweeps, time advances.
//
// Checks:
// - every decision and completion equals a naive record per key (absent → in flight →
//   completed), and every record the table holds equals the naive one; a record the table
//   dropped (a sweep, or room made for a new key) was idle: absent, its lease ran out, or its
//   retention ended;
// - a new key is refused (`tableBusy`) exactly when the table is full of live records, and the
//   table never holds more keys than its capacity;
// - at most one execution per record: every execution of a key after the first had a reason —
//   its predecessor was released (cancelled, or an uncached error), its retention ended, or its
//   lease ran out; a replay returns the result the key's last execution stored, for the same
//   fingerprint; a join names the running owner.

typealias Table = IdempotencyTable<Int, Int, UInt64>
typealias Record = IdempotencyRecord<Int, UInt64>

struct Options {
    var lease: Int64
    var retention: Int64
    var reject: Bool
    var cacheErrors: Bool
}

/// The naive record of one key.
enum Naive: Equatable {
    case absent
    case inFlight(fingerprint: Int, owner: UInt64, leaseEnd: Int64)
    case completed(fingerprint: Int, result: UInt64, expiresAt: Int64)

    func isIdle(at t: Int64) -> Bool {
        switch self {
        case .absent: true
        case .inFlight(_, _, let leaseEnd): t >= leaseEnd
        case .completed(_, _, let expiresAt): t >= expiresAt
        }
    }

    var record: Record {
        switch self {
        case .absent: .absent
        case .inFlight(let fingerprint, let owner, let leaseEnd):
            .inFlight(fingerprint: fingerprint, owner: EventToken(owner), leaseEnd: leaseEnd)
        case .completed(let fingerprint, let result, let expiresAt):
            .completed(fingerprint: fingerprint, result: result, expiresAt: expiresAt)
        }
    }
}

/// One execution of a key, for the at-most-once check.
struct Execution {
    enum Outcome {
        case running
        case completed(at: Int64, result: UInt64)
        case released(at: Int64)
    }
    var fingerprint: Int
    var owner: UInt64
    var start: Int64
    var leaseEnd: Int64
    var outcome: Outcome
}

let keyCount = 4

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let options = Options(
        lease: 1 + Int64(input.below(16)),
        retention: 1 + Int64(input.below(32)),
        reject: input.bool(),
        cacheErrors: input.bool()
    )
    let capacity = 1 + input.below(keyCount)
    var table = try! Table(
        options: try! IdempotencyOptions(
            retention: .nanoseconds(options.retention),
            lease: .nanoseconds(options.lease),
            concurrent: options.reject ? .reject : .join,
            cacheErrors: options.cacheErrors
        ),
        budget: .entries(capacity)
    )
    var naive = Array(repeating: Naive.absent, count: keyCount)
    var log = Array(repeating: [Execution](), count: keyCount)
    var owners: [UInt64] = []
    var nextToken: UInt64 = 1
    var clock: Int64 = 0

    func present(_ key: Int) -> Bool { table.table.index(of: key) != nil }

    /// Mirrors records the table dropped, and compares the records it holds.
    func sync(_ operation: String) {
        for key in 0..<keyCount {
            if let index = table.table.index(of: key) {
                require(naive[key] != .absent, "after \(operation): the table holds \(table.table[index]) for key \(key), the model nothing")
                require(table.table[index] == naive[key].record, "after \(operation): key \(key) is \(table.table[index]), the model \(naive[key])")
            } else if naive[key] != .absent {
                require(naive[key].isIdle(at: clock), "after \(operation): key \(key) was dropped while live: \(naive[key]) at \(clock)")
                naive[key] = .absent
            }
        }
        require(table.table.count <= capacity, "\(table.table.count) records, capacity \(capacity)")
    }

    func pickOwner() -> UInt64 {
        let pick = Int(input.byte())
        guard !owners.isEmpty else { return 999_999 }
        return pick < 250 ? owners[pick % owners.count] : UInt64(pick) + 1_000_000
    }

    var operations = 0
    while !input.isExhausted, operations < 600 {
        operations += 1
        let code = input.byte()
        let key = Int(code >> 4) % keyCount
        let gap = Int64(input.below(8))
        clock += gap
        let now = Instant(nanoseconds: clock)
        switch code & 15 {
        case 0...5:
            let fingerprint = Int(code >> 6) & 1
            let untilReleased = code & 15 == 5
            let token = nextToken
            nextToken += 1
            let full = !present(key) && table.table.count == capacity
            let allLive = (0..<keyCount).allSatisfy { !present($0) || !naive[$0].isIdle(at: clock) }
            let decision: IdempotencyDecision<UInt64>
            do {
                decision = try table.begin(
                    key: key, fingerprint: fingerprint, token: EventToken(token), now: now,
                    lease: untilReleased ? .untilReleased : .renewable)
            } catch {
                require(error.code == .tableBusy, "begin threw \(error)")
                require(full && allLive, "key \(key) refused, yet the table had room (\(table.table.count) of \(capacity), all live: \(allLive))")
                sync("a refused begin")
                continue
            }
            require(!(full && allLive), "key \(key) taken while the table was full of live records")
            // The naive record's decision.
            let leaseEnd = untilReleased ? Int64.max : clock + options.lease
            let want: IdempotencyDecision<UInt64>
            var executes = true
            var takeover: UInt64? = nil
            switch naive[key] {
            case .absent:
                want = .execute(takeover: nil)
            case .inFlight(let stored, let owner, let end):
                if clock >= end {
                    takeover = owner
                    want = .execute(takeover: EventToken(owner))
                } else if stored != fingerprint {
                    want = .mismatch
                    executes = false
                } else {
                    want = options.reject ? .conflict : .join(owner: EventToken(owner))
                    executes = false
                }
            case .completed(let stored, let result, let expiresAt):
                if clock < expiresAt {
                    want = stored == fingerprint ? .replay(result) : .mismatch
                    executes = false
                } else {
                    want = .execute(takeover: nil)
                }
            }
            require(decision == want, "begin key \(key) fingerprint \(fingerprint) at \(clock): \(decision), the model says \(want) from \(naive[key])")
            if executes {
                // At most once: the previous execution of the key had ended, or expired.
                if let previous = log[key].last {
                    let reason: Bool
                    switch previous.outcome {
                    case .released(let at): reason = at <= clock
                    case .completed(let at, _): reason = at + options.retention <= clock
                    case .running: reason = previous.leaseEnd <= clock && (takeover == previous.owner || takeover == nil)
                    }
                    require(reason, "key \(key) executed again at \(clock) without release, expiry or takeover: \(previous)")
                }
                naive[key] = .inFlight(fingerprint: fingerprint, owner: token, leaseEnd: leaseEnd)
                log[key].append(Execution(fingerprint: fingerprint, owner: token, start: clock, leaseEnd: leaseEnd, outcome: .running))
                owners.append(token)
            } else if case .replay(let result) = decision {
                guard let last = log[key].last, case .completed(_, let stored) = last.outcome else {
                    fatalError("key \(key) replayed \(result) with no completed execution")
                }
                require(stored == result && last.fingerprint == fingerprint, "key \(key) replayed \(result), stored \(stored)")
            } else if case .join(let owner) = decision {
                guard let last = log[key].last, case .running = last.outcome else {
                    fatalError("key \(key) joined \(owner) with no running execution")
                }
                require(last.owner == owner.rawValue, "key \(key) joined \(owner), running \(last.owner)")
            }
            sync("begin key \(key)")
        case 6...9:
            let owner = pickOwner()
            let isError = code & 15 >= 8
            let result = owner &* 2_654_435_761 ^ UInt64(clock)
            let got = table.complete(key: key, owner: EventToken(owner), result: result, isError: isError, now: now)
            let want: IdempotencyCompletion
            if case .inFlight(let fingerprint, let current, _) = naive[key], current == owner {
                if isError && !options.cacheErrors {
                    naive[key] = .absent
                    want = .released
                    log[key][log[key].count - 1].outcome = .released(at: clock)
                } else {
                    naive[key] = .completed(fingerprint: fingerprint, result: result, expiresAt: clock + options.retention)
                    want = .stored
                    log[key][log[key].count - 1].outcome = .completed(at: clock, result: result)
                }
            } else {
                want = .notOwner
            }
            require(got == want, "complete key \(key) by \(owner) at \(clock): \(got), the model says \(want)")
            sync("complete key \(key)")
        case 10, 11:
            let owner = pickOwner()
            let got = table.cancel(key: key, owner: EventToken(owner))
            var want = false
            if case .inFlight(_, let current, _) = naive[key], current == owner {
                want = true
                naive[key] = .absent
                log[key][log[key].count - 1].outcome = .released(at: clock)
            }
            require(got == want, "cancel key \(key) by \(owner): \(got)")
            sync("cancel key \(key)")
        case 12, 13:
            let owner = pickOwner()
            let got = table.renewLease(key: key, owner: EventToken(owner), now: now)
            var want = false
            if case .inFlight(let fingerprint, let current, let end) = naive[key], current == owner {
                want = true
                let renewed = Swift.max(end, clock + options.lease)
                naive[key] = .inFlight(fingerprint: fingerprint, owner: owner, leaseEnd: renewed)
                log[key][log[key].count - 1].leaseEnd = renewed
            }
            require(got == want, "renew key \(key) by \(owner): \(got)")
            sync("renew key \(key)")
        case 14:
            let before = table.table.count
            let maxEntries = Int(code >> 4)
            let removed = table.sweep(now: now, maxEntries: maxEntries)
            require(removed <= maxEntries && removed == before - table.table.count, "sweep removed \(removed) of \(before)")
            sync("sweep")
        default:
            clock += Int64(input.byte())
        }
    }
    return 0
}
