import FuzzModels
import FuzzSupport
import SluiceCore

// fuzz-flight: `SingleFlight` and `SwitchLatest` driven side by side by one operation stream
// on keys 0–3 (and effect IDs 0–2 for switch-latest).
//
// Single-flight operations: requests (lead or join), completions by the leader or by a wrong
// token, forgets, and any token leaving. Checks, against a model of flights (leader, whether it
// still waits, joiners in arrival order): one execution per key at a time (a request leads only
// when none runs, else joins the running leader); a completion hands the result to exactly the
// joiners still waiting, and only when the leader completes; leaving answers notWaiting,
// stillShared(remaining) or abandoned(leader) as the waiters say; counts and waiter counts
// match.
//
// Switch-latest operations: starts and finishes (by any token ever started). Checks, against the
// history of starts and finishes: a start cancels exactly the effect still running for the
// same (key, effect ID); a finish reports whether that token was the one running; `running`
// and `count` match.

let keyCount = 4
let effectCount = 3

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    var flights = SingleFlight<Int>()
    var model = NaiveFlights<Int>()
    var issued: [UInt64] = []
    var switcher = SwitchLatest<Int, Int>()
    var starts: [(key: Int, effect: Int, token: UInt64)] = []
    var lastStart: [Int: UInt64] = [:]  // by key × effectCount + effect
    var finished = Set<UInt64>()
    var next: UInt64 = 1

    func running(_ key: Int, _ effect: Int) -> UInt64? {
        guard let last = lastStart[key * effectCount + effect] else { return nil }
        return finished.contains(last) ? nil : last
    }

    var operations = 0
    while !input.isExhausted, operations < 1_000 {
        operations += 1
        let code = input.byte()
        let key = Int(code >> 3) % keyCount
        let pick = Int(input.byte())
        switch code & 7 {
        case 0, 1:
            let token = next
            next += 1
            issued.append(token)
            let got = flights.begin(EventToken(token), key: key)
            let want = model.begin(token, key: key)
            require(got == want, "e\(token) on key \(key): \(got), the model says \(want)")
            require(flights.leader(for: key)?.rawValue == model[key]?.leader, "leader of key \(key)")
        case 2:
            // The real leader most of the time, a wrong token otherwise.
            let leader = pick < 200 ? (model[key]?.leader ?? 999_999) : UInt64(pick) + 1_000_000
            let got = flights.complete(key: key, leader: EventToken(leader))
            let want = model.complete(key: key, leader: leader)
            require(got == want, "complete key \(key) by e\(leader): \(got), the model says \(want)")
        case 3:
            let got = flights.forget(key: key)
            let want = model.forget(key: key)
            require(got?.leader.rawValue == want?.leader, "forget key \(key): leader \(String(describing: got?.leader))")
            require(got?.joiners.map(\.rawValue) == want?.joiners, "forget key \(key): joiners")
        case 4:
            guard !issued.isEmpty else { break }
            let token = issued[pick % issued.count]
            let got = flights.leave(EventToken(token), key: key)
            let want = model.leave(token, key: key)
            require(got == want, "e\(token) left key \(key): \(got), the model says \(want)")
        case 5, 6:
            let effect = pick % effectCount
            let want = running(key, effect)
            let got = switcher.start(EventToken(next), key: key, effect: effect)
            require(got?.rawValue == want, "start e\(next) on \(key)/\(effect) replaced \(String(describing: got)), the history says \(String(describing: want))")
            starts.append((key, effect, next))
            lastStart[key * effectCount + effect] = next
            next += 1
        default:
            guard !starts.isEmpty else { break }
            let victim = starts[pick % starts.count]
            let want = running(victim.key, victim.effect) == victim.token
            let got = switcher.finished(EventToken(victim.token), key: victim.key, effect: victim.effect)
            require(got == want, "finish e\(victim.token) on \(victim.key)/\(victim.effect): \(got)")
            finished.insert(victim.token)
        }
        require(flights.count == model.count, "\(flights.count) flights, the model \(model.count)")
        for key in 0..<keyCount {
            require(flights.waiterCount(for: key) == model.waiterCount(for: key), "waiters of key \(key)")
            require(flights.leader(for: key)?.rawValue == model[key]?.leader, "leader of key \(key)")
        }
        var runningCount = 0
        for key in 0..<keyCount {
            for effect in 0..<effectCount {
                let want = running(key, effect)
                if want != nil { runningCount += 1 }
                require(switcher.running(key: key, effect: effect)?.rawValue == want, "running on \(key)/\(effect)")
            }
        }
        require(switcher.count == runningCount, "\(switcher.count) effects running, the history \(runningCount)")
    }
    return 0
}
