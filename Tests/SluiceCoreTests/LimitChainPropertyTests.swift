import PropertyBased
import SluiceCore
import SluicePolicyModels
import Testing

@Suite struct LimitChainPropertyTests {
    /// Random chains of 2–6 stages (GCRA and concurrency, some in shadow mode) over random keys,
    /// times and costs, with executions ending in random order and admitted requests given back
    /// at once (the runtime refused them for another reason), against a model that decides on
    /// copies and keeps them only when every stage admitted. The chain takes each stage's part
    /// and subtracts it again on a later refusal: both must agree on every verdict and, after
    /// every step, on every stage's state for every key.
    @Test func chainMatchesAllOrNothingModel() async {
        // (kind, count or slots, burst, shadow)
        let stages = zip(Gen.int(in: 0...1), Gen.int(in: 1...4), Gen.int(in: 0...3), Gen.int(in: 0...4)).array(of: 2...6)
        // (what, key seed, gap in ms, cost)
        let steps = zip(Gen.int(in: 0...9), Gen.int(in: 0...728), Gen.int(in: 0...300), Gen.int(in: 1...3)).array(of: 0...80)
        await propertyCheck(count: 400, input: stages, steps) { specs, steps in
            let limits: [StageLimit] = try specs.map { kind, amount, burst, _ in
                kind == 0 ? .rate(try RateLimitOptions(count: amount, per: .seconds(1), burst: burst)) : .concurrency(amount)
            }
            let shadow = specs.map { $0.3 == 0 }
            let chainStages = try limits.indices.map {
                try ChainStage(name: "s\($0)", limit: limits[$0], shadow: shadow[$0])
            }
            var real = try LimitChain<Int>(stages: chainStages, budget: .entries(64))
            var model = NaiveLimitChain(stages: limits, shadow: shadow)
            var running: [(keys: [Int], hold: ChainHold, held: [Int])] = []
            var t: Int64 = 0
            for (what, seed, gap, cost) in steps {
                t += Int64(gap) * 1_000_000
                let now = Instant(nanoseconds: t)
                // Stage i's key: one of three, from the seed's digits in base 3.
                let keys = limits.indices.map { (seed / Self.power(3, $0)) % 3 }
                switch what {
                case 0...6:
                    let before = model
                    let got = real.admit(keys: keys, cost: cost, now: now)
                    let want = model.admit(keys: keys, cost: cost, t: t)
                    #expect(got.verdicts == want.verdicts, "at \(t / 1_000_000) ms, keys \(keys), cost \(cost)")
                    #expect(got.shadowRefusals == want.shadowRefusals)
                    switch got.result {
                    case .admitted:
                        #expect(want.refusedBy == nil)
                        #expect(limits.indices.filter { got.hold.contains($0) } == want.held)
                        if what == 6 {
                            // Refused after admission (a budget, a closed scope): every part
                            // given back at the same instant.
                            real.rollBack(got.hold, keys: keys, cost: cost, now: now)
                            model = before
                        } else {
                            running.append((keys, got.hold, want.held))
                        }
                    case .refused(let stage):
                        #expect(want.refusedBy == stage)
                        #expect(got.hold.isEmpty)
                    case .busy:
                        Issue.record("a table of 64 keys refused one of three keys")
                    }
                case 9:
                    // Idle keys leave the tables: a removal moves another key's entry, so a
                    // slot taken before is freed through a stale hint.
                    real.sweep(now: now, maxEntries: 64)
                default:
                    guard !running.isEmpty else { continue }
                    let ended = running.remove(at: seed % running.count)
                    real.release(ended.hold, keys: ended.keys)
                    model.release(held: ended.held, keys: ended.keys)
                }
                for stage in limits.indices {
                    for key in 0..<3 {
                        #expect(
                            real.peek(stage: stage, key: key, now: now) == model.peek(stage: stage, key: key, t: t),
                            "stage \(stage) key \(key) at \(t / 1_000_000) ms")
                    }
                }
            }
        }
    }

    static func power(_ base: Int, _ exponent: Int) -> Int {
        (0..<exponent).reduce(1) { result, _ in result * base }
    }

    /// The example of the docs: a payment refused by the concurrency stage leaves the account's
    /// rate exactly as it was, and one refused by the rate stage takes no slot.
    @Test func refusalByALaterStageGivesBackTheEarlierOnesPart() throws {
        let rate = try RateLimitOptions(count: 10, per: .seconds(1), burst: 4)
        var chain = try LimitChain<String>(
            stages: [
                ChainStage(name: "account-rate", limit: .rate(rate)),
                ChainStage(name: "account-concurrency", limit: .concurrency(1)),
            ],
            budget: .entries(16))
        let now = Instant(nanoseconds: 1_000_000_000)
        let first = chain.admit(keys: ["a", "a"], cost: 1, now: now)
        #expect(first.result == .admitted)
        let remaining = chain.peek(stage: 0, key: "a", now: now)
        let second = chain.admit(keys: ["a", "a"], cost: 1, now: now)
        #expect(second.result == .refused(stage: 1))
        #expect(second.verdicts.last == .concurrency(limit: 1, inFlight: 1, allowed: false))
        #expect(chain.peek(stage: 0, key: "a", now: now) == remaining)
        chain.release(first.hold, keys: ["a", "a"])
        #expect(chain.peek(stage: 1, key: "a", now: now) == .concurrency(limit: 1, inFlight: 0, allowed: true))
    }

    /// A hold remembers where the concurrency stage's table had its key. Once a removal moved
    /// that entry and another key took its place, the release still frees the hold's own key.
    @Test func aReleaseThroughAStaleEntryFreesItsOwnKey() throws {
        var chain = try LimitChain<String>(
            stages: [ChainStage(name: "in-flight", limit: .concurrency(2))], budget: .entries(16))
        let now = Instant(nanoseconds: 1_000_000_000)
        let x = chain.admit(keys: ["x"], cost: 1, now: now)
        let a = chain.admit(keys: ["a"], cost: 1, now: now)
        #expect(x.result == .admitted && a.result == .admitted)
        // "x" ends and leaves the table: "a" moves into its entry, and "z" takes the one "a" had.
        chain.release(x.hold, keys: ["x"])
        chain.sweep(now: now, maxEntries: 16)
        #expect(chain.keyCount == 1)
        let z = chain.admit(keys: ["z"], cost: 1, now: now)
        #expect(z.result == .admitted)
        chain.release(a.hold, keys: ["a"])
        #expect(chain.peek(stage: 0, key: "a", now: now) == .concurrency(limit: 2, inFlight: 0, allowed: true))
        #expect(chain.peek(stage: 0, key: "z", now: now) == .concurrency(limit: 2, inFlight: 1, allowed: true))
        // Holds of the same stages are equal, whatever entries they remember ("x" was at the
        // first, "a" at the second).
        var plain = ChainHold()
        plain.insert(0)
        #expect(x.hold == a.hold && a.hold == plain)
        #expect(x.hold.hashValue == a.hold.hashValue && a.hold.hashValue == plain.hashValue)
    }

    @Test func stageNamesAndLimitsAreValidated() {
        #expect(throws: SluiceError.self) { try ChainStage(name: "Bad Name", limit: .concurrency(1)) }
        #expect(throws: SluiceError.self) { try ChainStage(name: "c", limit: .concurrency(0)) }
        #expect(throws: SluiceError.self) {
            try LimitChain<String>(
                stages: [ChainStage(name: "c", limit: .concurrency(1)), ChainStage(name: "c", limit: .concurrency(2))],
                budget: .entries(4))
        }
    }
}
