import FuzzModels
import FuzzSupport
import SluiceCore

// fuzz-timed: throttle and debounce (`TimedTable`, `TimedPolicy`) on a few keys, with time that
// never goes back, timers the policies request delivered by a timer queue, and sweeps.
//
// Input: [policy, options…] [mode, budget] then operations: events on four keys after a gap
// (three short keys and one long one, whose heap bytes count against a byte budget), longer
// time advances, sweeps.
//
// Exact mode (a table with room for every key, timers delivered on time): each key's trace
// (run, drop with retryAfter, hold, superseded) equals a naive model that keeps every run and
// held event and polls instead of using timers (the models of the project's property tests),
// and a single-key `TimedPolicy` decides key 0's events and timers like the table.
// Loose mode (a table of 1–8 keys or a byte budget, evicting, timers delivered up to 3 ticks
// late): invariants only. In both modes every event settles exactly once (run, dropped,
// superseded, evicted while held, or refused because its key does not fit the budget), a
// timer only runs an event its key holds, a throttle's runs of one key are at
// least an interval apart (unless the key was evicted between them), a trailing-only debounce
// runs the key's latest event, and the table never holds more keys than its capacity.


let keyCount = 4

/// What the harness knows of the policy under test beyond its state type.
struct Setup<State: TimedPolicyState> {
    var options: State.Options
    /// The naive trace of one key's events.
    var naive: ([ModelEvent]) -> [String]
    /// Minimum spacing of two runs of a key (throttle), if the policy promises one.
    var runSpacing: Int64?
    /// Whether a timer must run the key's latest event (trailing-only debounce).
    var runsLatest: Bool
}

/// One operation decoded from the input.
enum Operation {
    case event(key: Int, gap: Int64)
    case sweep(maxEntries: Int)
}

func decodeOperations(_ input: inout FuzzInput) -> [Operation] {
    var operations: [Operation] = []
    while !input.isExhausted, operations.count < 600 {
        let code = input.byte()
        switch code % 8 {
        case 0...4:
            operations.append(.event(key: Int(code / 8) % keyCount, gap: Int64(input.below(7))))
        case 5:
            operations.append(.event(key: Int(code / 8) % keyCount, gap: Int64(input.byte())))
        case 6:
            operations.append(.sweep(maxEntries: Int(code / 8) % 4))
        default:
            operations.append(.sweep(maxEntries: 1_000))
        }
    }
    return operations
}

func run<State: TimedPolicyState>(
    _ setup: Setup<State>,
    _ operations: [Operation],
    exact: Bool,
    budget: MemoryBudget,
    longKeyLength: Int,
    lateness: Int64
) {
    let names = ["k0", "k1", "k2", "long-" + String(repeating: "x", count: longKeyLength)]
    var table: TimedTable<String, State>
    do {
        table = try TimedTable<String, State>(options: setup.options, budget: budget)
    } catch {
        require(!exact && budget.bytes != nil, "a budget of \(budget) refused: \(error)")
        return
    }
    var single = TimedPolicy<State>(options: setup.options)
    var queue = TimerQueue<Int>()
    var clock: Int64 = 0
    var nextToken: UInt64 = 1
    var lines = Array(repeating: [String](), count: keyCount)
    var events = Array(repeating: [ModelEvent](), count: keyCount)
    var held = Array(repeating: Set<UInt64>(), count: keyCount)
    var latest = Array(repeating: UInt64(0), count: keyCount)
    var settled = Set<UInt64>()
    var lastRun = Array(repeating: Int64?.none, count: keyCount)

    func settle(_ token: UInt64, _ how: String) {
        require(!settled.contains(token), "e\(token) settled twice (now \(how))")
        settled.insert(token)
    }

    func ran(_ key: Int, at time: Int64) {
        if let spacing = setup.runSpacing, let previous = lastRun[key] {
            require(time - previous >= spacing, "key \(key) ran at \(previous) and \(time), interval \(spacing)")
        }
        lastRun[key] = time
    }

    /// Which keys hold live (not idle) state now.
    func liveKeys(at now: Int64) -> [Bool] {
        (0..<keyCount).map { key in
            guard let index = table.table.index(of: names[key]) else { return false }
            return !table.table[index].isIdle(at: Instant(nanoseconds: now))
        }
    }

    /// A key whose live state vanished was evicted: its spacing starts again.
    func noteEvictions(liveBefore: [Bool], except current: Int?) {
        for key in 0..<keyCount where key != current && liveBefore[key] && table.table.index(of: names[key]) == nil {
            require(!exact, "exact mode evicted key \(key)")
            lastRun[key] = nil
        }
    }

    func fire(key: Int, at now: Int64) {
        let instant = Instant(nanoseconds: now)
        let decision = table.fire(key: names[key], now: instant)
        if exact && key == 0 {
            let want = single.fire(now: instant)
            require(decision == want, "key 0 fire at \(now): table \(decision), single policy \(want)")
        }
        switch decision {
        case .run(let token):
            require(held[key].contains(token.rawValue), "a timer of key \(key) ran e\(token.rawValue), which it does not hold")
            if setup.runsLatest { require(token.rawValue == latest[key], "key \(key) ran e\(token.rawValue), not its latest e\(latest[key])") }
            held[key].remove(token.rawValue)
            settle(token.rawValue, "run by a timer")
            lines[key].append("\(now) run e\(token.rawValue)")
            ran(key, at: now)
        case .reschedule(let deadline):
            require(deadline.nanoseconds > now, "key \(key) rescheduled at \(deadline.nanoseconds), now \(now)")
            queue.schedule(at: deadline.nanoseconds + lateness, key)
        case .none:
            break
        }
    }

    func deliverTimers(upTo time: Int64) {
        var fired = 0
        while let due = queue.popDue(now: time) {
            clock = Swift.max(clock, due.deadline)
            fire(key: due.payload, at: clock)
            fired += 1
            require(fired < 100_000, "timers keep rescheduling at \(clock)")
        }
    }

    for operation in operations {
        switch operation {
        case .event(let key, let gap):
            let now = clock + gap
            deliverTimers(upTo: now)
            clock = now
            let token = nextToken
            nextToken += 1
            events[key].append((now, token))
            latest[key] = token
            let instant = Instant(nanoseconds: now)
            let live = liveKeys(at: now)
            let keyed: KeyedDecision
            do {
                keyed = try table.event(EventToken(token), key: names[key], now: instant)
            } catch {
                // Only a key larger than what the budget leaves is refused.
                require(error.code == .tableBusy && budget.bytes != nil && key == keyCount - 1, "key \(key) refused: \(error)")
                noteEvictions(liveBefore: live, except: key)
                settle(token, "refused")
                continue
            }
            noteEvictions(liveBefore: live, except: key)
            require(table.table.count <= table.table.capacity, "\(table.table.count) keys, capacity \(table.table.capacity)")
            for evicted in keyed.evictedPending {
                require(!exact, "exact mode evicted e\(evicted.rawValue)")
                guard let owner = held.firstIndex(where: { $0.contains(evicted.rawValue) }) else {
                    fatalError("evicted e\(evicted.rawValue), which no key holds")
                }
                require(owner != key, "key \(key) evicted its own held e\(evicted.rawValue)")
                held[owner].remove(evicted.rawValue)
                settle(evicted.rawValue, "evicted")
            }
            if exact && key == 0 {
                let want = single.event(EventToken(token), now: instant)
                require(keyed.decision == want, "key 0 event e\(token) at \(now): table \(keyed.decision), single policy \(want)")
            }
            switch keyed.decision {
            case .run:
                settle(token, "run")
                lines[key].append("\(now) run e\(token)")
                ran(key, at: now)
            case .drop(let retryAfter):
                require(retryAfter >= .zero, "negative retryAfter \(retryAfter)")
                settle(token, "dropped")
                lines[key].append("\(now) drop e\(token) retry \(retryAfter.nanosecondsClamped)")
            case .hold(let schedule, let superseded):
                if let schedule {
                    require(schedule.nanoseconds > now, "a timer requested at \(schedule.nanoseconds), now \(now)")
                    queue.schedule(at: schedule.nanoseconds + lateness, key)
                }
                if let superseded {
                    require(held[key].contains(superseded.rawValue), "key \(key) superseded e\(superseded.rawValue), which it does not hold")
                    held[key].remove(superseded.rawValue)
                    settle(superseded.rawValue, "superseded")
                    lines[key].append("\(now) superseded e\(superseded.rawValue)")
                }
                held[key].insert(token)
                lines[key].append("\(now) hold e\(token)")
                require(queue.contains { $0 == key }, "key \(key) holds e\(token) with no timer outstanding")
            }
        case .sweep(let maxEntries):
            let before = table.table.count
            let removed = table.sweep(now: Instant(nanoseconds: clock), maxEntries: maxEntries)
            require(removed <= maxEntries && removed == before - table.table.count, "sweep removed \(removed) of \(before), max \(maxEntries)")
        }
    }
    // Deliver every timer left.
    var rounds = 0
    while let deadline = queue.nextDeadline {
        deliverTimers(upTo: Swift.max(deadline, clock))
        rounds += 1
        require(rounds < 100_000, "timers never settle")
    }
    require(held.allSatisfy(\.isEmpty), "events still held after every timer fired: \(held)")
    require(settled.count == Int(nextToken - 1), "\(Int(nextToken - 1) - settled.count) events never settled")
    if exact {
        for key in 0..<keyCount {
            let want = setup.naive(events[key])
            require(lines[key] == want, "key \(key): \(lines[key]) but the naive model gives \(want)")
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let isThrottle = input.bool()
    let first = input.byte()
    let second = input.byte()
    let third = input.byte()
    let mode = input.byte()
    let size = input.byte()
    let exact = mode & 1 == 0
    let budget: MemoryBudget
    if exact {
        budget = .entries(8)
    } else if mode & 2 == 0 {
        budget = .entries(1 + Int(mode >> 2) % 8)
    } else {
        budget = .bytes(128 + Int(size) * 16)
    }
    let longKeyLength = 16 + Int(mode >> 5) * 128
    let lateness: Int64 = exact ? 0 : Int64(mode >> 3) % 4
    let operations = decodeOperations(&input)
    if isThrottle {
        let interval = 1 + Int64(first % 8)
        let (leading, trailing, deliversFirst) = [(true, false, false), (true, true, false), (true, true, true), (false, true, false), (false, true, true)][Int(second % 5)]
        let options = try! ThrottleOptions(
            interval: .nanoseconds(interval), leading: leading, trailing: trailing, delivers: deliversFirst ? .first : .latest)
        let setup = Setup<ThrottleState>(
            options: options,
            naive: { naiveThrottle($0, interval: interval, leading: leading, trailing: trailing, first: deliversFirst) },
            runSpacing: interval,
            runsLatest: false
        )
        run(setup, operations, exact: exact, budget: budget, longKeyLength: longKeyLength, lateness: lateness)
    } else {
        let quiet = 1 + Int64(first % 6)
        let extra = Int64(third % 8)
        let maxWait: Int64? = extra == 0 ? nil : quiet + extra - 1
        let (leading, trailing) = [(false, true), (true, true), (true, false)][Int(second % 3)]
        let options = try! DebounceOptions(
            quiet: .nanoseconds(quiet), maxWait: maxWait.map { .nanoseconds($0) }, leading: leading, trailing: trailing)
        let setup = Setup<DebounceState>(
            options: options,
            naive: { naiveDebounce($0, quiet: quiet, maxWait: maxWait, leading: leading, trailing: trailing) },
            runSpacing: nil,
            runsLatest: trailing && !leading
        )
        run(setup, operations, exact: exact, budget: budget, longKeyLength: longKeyLength, lateness: lateness)
    }
    return 0
}
