import Sluice
import Synchronization
import SluicePluginTesting
import Testing

/// Every policy's outcomes through the typed API alone, on a manual clock.
@Suite struct GatePolicyTests {
    private func harness<Output>(_ plugin: ProbePlugin<Output>, budget: MemoryBudget = .bytes(1 << 20))
        throws -> (GateHarness, PluginHandle<ProbePlugin<Output>>)
    {
        var plugins = PluginRegistry()
        let handle = try plugins.register(plugin, budget: budget)
        return (try GateHarness(plugins: plugins), handle)
    }

    // MARK: - Throttle

    @Test func leadingThrottleRunsOncePerWindowAndSaysWhenToRetry() async throws {
        let (harness, probe) = try harness(ProbePlugin(policy: .throttle(try ThrottleOptions(interval: .seconds(1))), immediate))
        defer { harness.shutdown() }
        let gate = harness.gate
        let first = await gate.submit(probe, Probe(key: "k", payload: "a"))
        #expect(first.kind == "ran" && first.output == "a")
        await harness.advance(by: .milliseconds(400))
        guard case .throttled(let retryAfter) = await gate.submit(probe, Probe(key: "k", payload: "b")) else {
            Issue.record("expected throttled")
            return
        }
        #expect(retryAfter == .milliseconds(600))
        #expect(await gate.submit(probe, Probe(key: "other", payload: "c")).output == "c")
        await harness.advance(by: .milliseconds(600))
        #expect(await gate.submit(probe, Probe(key: "k", payload: "d")).output == "d")
        #expect(probe.plugin.counts.startedCount == 3)
    }

    @Test func trailingThrottleDeliversTheLatestAndSupersedesTheRest() async throws {
        let options = try ThrottleOptions(interval: .seconds(1), leading: true, trailing: true, delivers: .latest)
        let (harness, probe) = try harness(ProbePlugin(policy: .throttle(options), immediate))
        defer { harness.shutdown() }
        let gate = harness.gate
        #expect(await gate.submit(probe, Probe(key: "k", payload: "a")).output == "a")
        let b = await gate.start(gate.request(probe, Probe(key: "k", payload: "b")))
        let c = await gate.start(gate.request(probe, Probe(key: "k", payload: "c")))
        #expect(try await b.settledOutcome().kind == "superseded")
        await harness.advance(by: .seconds(1))
        let trailing = try await c.settledOutcome()
        #expect(trailing.kind == "ran" && trailing.output == "c")
    }

    @Test func trailingFirstKeepsTheFirstHeldAndDropsLaterOnes() async throws {
        let options = try ThrottleOptions(interval: .seconds(1), leading: true, trailing: true, delivers: .first)
        let (harness, probe) = try harness(ProbePlugin(policy: .throttle(options), immediate))
        defer { harness.shutdown() }
        let gate = harness.gate
        _ = await gate.submit(probe, Probe(key: "k", payload: "a"))
        let b = await gate.start(gate.request(probe, Probe(key: "k", payload: "b")))
        #expect(await gate.submit(probe, Probe(key: "k", payload: "c")).kind == "throttled")
        await harness.advance(by: .seconds(1))
        #expect(try await b.settledOutcome().output == "b")
    }

    // MARK: - Debounce

    @Test func debounceRunsTheLastOfABurstOnceQuiet() async throws {
        let options = try DebounceOptions(quiet: .milliseconds(100))
        let (harness, probe) = try harness(ProbePlugin(policy: .debounce(options, cancelInFlight: false), immediate))
        defer { harness.shutdown() }
        let gate = harness.gate
        let a = await gate.start(gate.request(probe, Probe(key: "k", payload: "a")))
        await harness.advance(by: .milliseconds(99))
        let b = await gate.start(gate.request(probe, Probe(key: "k", payload: "b")))
        #expect(try await a.settledOutcome().kind == "superseded")
        await harness.advance(by: .milliseconds(99))
        #expect(b.resolvedOutcome == nil)
        await harness.advance(by: .milliseconds(1))
        #expect(try await b.settledOutcome().output == "b")
        #expect(probe.plugin.counts.startedCount == 1)
    }

    @Test func debounceMaxWaitRunsAHeldRequestWhileTypingGoesOn() async throws {
        let options = try DebounceOptions(quiet: .milliseconds(100), maxWait: .milliseconds(300))
        let (harness, probe) = try harness(ProbePlugin(policy: .debounce(options, cancelInFlight: false), immediate))
        defer { harness.shutdown() }
        let gate = harness.gate
        var tickets: [GateTicket<String>] = []
        for payload in ["a", "b", "c", "d"] {
            tickets.append(await gate.start(gate.request(probe, Probe(key: "k", payload: payload))))
            await harness.advance(by: .milliseconds(80))
        }
        // d arrived at 240 ms and the burst began at 0: maxWait ran d at 300 ms, before its quiet
        // end at 340 ms.
        for ticket in tickets.prefix(3) { #expect(try await ticket.settledOutcome().kind == "superseded") }
        #expect(try await tickets[3].settledOutcome().output == "d")
    }

    @Test func leadingDebounceDropsTheRestOfTheBurst() async throws {
        let options = try DebounceOptions(quiet: .milliseconds(100), leading: true, trailing: false)
        let (harness, probe) = try harness(ProbePlugin(policy: .debounce(options, cancelInFlight: false), immediate))
        defer { harness.shutdown() }
        let gate = harness.gate
        #expect(await gate.submit(probe, Probe(key: "k", payload: "a")).output == "a")
        await harness.advance(by: .milliseconds(30))
        guard case .throttled(let retryAfter) = await gate.submit(probe, Probe(key: "k", payload: "b")) else {
            Issue.record("expected throttled")
            return
        }
        #expect(retryAfter == .milliseconds(100))  // each event restarts the quiet period
    }

    @Test func switchLatestDebounceCancelsTheRunningSearch() async throws {
        let options = try DebounceOptions(quiet: .milliseconds(100))
        let (harness, probe) = try harness(ProbePlugin(policy: .debounce(options, cancelInFlight: true), sleeping(.milliseconds(50))))
        defer { harness.shutdown() }
        let gate = harness.gate
        let a = await gate.start(gate.request(probe, Probe(key: "k", payload: "a")))
        await harness.advance(by: .milliseconds(100))  // a runs now, for 50 ms
        #expect(probe.plugin.counts.startedCount == 1)
        let b = await gate.start(gate.request(probe, Probe(key: "k", payload: "b")))
        #expect(try await a.settledOutcome().kind == "cancelled(replaced)")
        await harness.advance(by: .milliseconds(100))
        await harness.advance(by: .milliseconds(50))
        #expect(try await b.settledOutcome().output == "b")
        #expect(probe.plugin.counts.cancelledCount == 1)
    }

    @Test func switchLatestWithoutDebounceReplacesTheRunningEffect() async throws {
        let (harness, probe) = try harness(ProbePlugin(policy: .switchLatest, sleeping(.milliseconds(50))))
        defer { harness.shutdown() }
        let gate = harness.gate
        let a = await gate.start(gate.request(probe, Probe(key: "k", payload: "a")))
        let other = await gate.start(gate.request(probe, Probe(key: "k", payload: "x"), id: "other-id"))
        let b = await gate.start(gate.request(probe, Probe(key: "k", payload: "b")))
        #expect(try await a.settledOutcome().kind == "cancelled(replaced)")
        await harness.advance(by: .milliseconds(50))
        #expect(try await b.settledOutcome().output == "b")
        // Another effect ID for the same key is not replaced.
        #expect(try await other.settledOutcome().output == "x")
    }

    @Test func aReplacingEffectThatEndsAtOnceIsAnsweredBySubmitNowItself() async throws {
        // Replacing the running effect queues its cancel: the new effect, which never suspends,
        // still answers through `submitNow`'s return, and no completion is made for it.
        let (harness, probe) = try harness(
            ProbePlugin(policy: .switchLatest) { probe, context in
                if probe.payload == "slow" { try await context.sleep(for: .seconds(1)) }
                return probe.payload
            })
        defer { harness.shutdown() }
        let gate = harness.gate
        let slow = await gate.start(gate.request(probe, Probe(key: "k", payload: "slow")))
        let fast = gate.request(probe, Probe(key: "k", payload: "fast"))
        let completionsMade = CallCount()
        let outcome = await harness.group.loops[0].submit {
            gate.submitNow(fast) {
                completionsMade.increment()
                return { _ in }
            }
        }
        #expect(outcome?.output == "fast")
        #expect(completionsMade.value == 0)
        #expect(try await slow.settledOutcome().kind == "cancelled(replaced)")
    }

    // MARK: - Rate limit

    @Test func rateLimitReportsTheLimiterFieldsOnEveryOutcome() async throws {
        let options = try RateLimitOptions(count: 2, per: .seconds(1), burst: 1)  // 500 ms apart, limit 2
        let (harness, probe) = try harness(ProbePlugin(policy: .rateLimit(options), immediate))
        defer { harness.shutdown() }
        let gate = harness.gate
        let first = await gate.submit(probe, Probe(key: "k"))
        #expect(first.runInfo?.rateLimit == RateLimitDecision(
            allowed: true, limit: 2, remaining: 1, retryAfter: nil, resetAfter: .milliseconds(500)))
        let second = await gate.submit(probe, Probe(key: "k"))
        #expect(second.runInfo?.rateLimit?.remaining == 0)
        #expect(second.runInfo?.rateLimit?.resetAfter == .seconds(1))
        guard case .limited(let refused) = await gate.submit(probe, Probe(key: "k")) else {
            Issue.record("expected limited")
            return
        }
        #expect(refused.retryAfter == .milliseconds(500))
        #expect(refused.limit == 2 && refused.rateLimit?.remaining == 0 && refused.rateLimit?.resetAfter == .seconds(1))
        // A cost above the limit can never fit: no retry-after.
        guard case .limited(let never) = await gate.submit(probe, Probe(key: "fresh", cost: 3)) else {
            Issue.record("expected limited")
            return
        }
        #expect(never.retryAfter == nil)
        // Refusals spent nothing: 500 ms frees exactly one unit.
        await harness.advance(by: .milliseconds(500))
        #expect(await gate.submit(probe, Probe(key: "k")).kind == "ran")
        #expect(await gate.submit(probe, Probe(key: "k")).kind == "limited")
        #expect(await gate.submit(probe, Probe(key: "fresh", cost: 2)).runInfo?.rateLimit?.remaining == 0)
        #expect(probe.plugin.counts.startedCount == 4)
    }

    @Test func aRateLimitedRequestRefusedForItsBudgetSpendsNothing() async throws {
        // One per minute; a table of one key that forgets the keys it evicts (a summary the
        // size of this budget would overflow at once and refuse every new key).
        let options = try RateLimitOptions(count: 1, per: .seconds(60), burst: 0, whenFull: .forget)
        var plugins = PluginRegistry()
        // Room for one request in flight only (with no byte limit: 64 charges, two per request).
        let probe = try plugins.register(ProbePlugin(policy: .rateLimit(options), sleeping(.seconds(1))), budget: .entries(1))
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let gate = harness.gate
        var running: [GateTicket<String>] = []
        for n in 0..<32 { running.append(await gate.start(gate.request(probe, Probe(key: "k\(n)")))) }
        #expect(await gate.submit(probe, Probe(key: "victim")).kind == "busy")
        await harness.advance(by: .seconds(1))
        for ticket in running { #expect(try await ticket.settledOutcome().kind == "ran") }
        // The refused request spent nothing: the victim's one-per-minute unit is still there.
        let victim = await gate.start(gate.request(probe, Probe(key: "victim")))
        #expect(victim.resolvedOutcome == nil)  // running, not limited
        await harness.advance(by: .seconds(1))
        #expect(try await victim.settledOutcome().kind == "ran")
    }

    @Test func aRequestFromAClosedScopeLeavesThePolicyUntouched() async throws {
        let (harness, probe) = try harness(ProbePlugin(policy: .throttle(try ThrottleOptions(interval: .seconds(1))), immediate))
        defer { harness.shutdown() }
        let gate = harness.gate
        let scope = gate.openScope()
        gate.close(scope)
        #expect(await gate.submit(probe, Probe(key: "k"), in: scope).kind == "cancelled(scopeClosed)")
        #expect(await gate.submit(probe, Probe(key: "k")).kind == "ran")
    }

    // MARK: - Unrestricted, failures

    @Test func anErrorTheEffectThrowsReachesTheCallerAsThatError() async throws {
        let (harness, probe) = try harness(ProbePlugin<String>(policy: .unrestricted) { probe, _ in
            throw ProbeError(code: Int(probe.payload) ?? 0)
        })
        defer { harness.shutdown() }
        guard case .failed(let error, let info) = await harness.gate.submit(probe, Probe(key: "k", payload: "7")) else {
            Issue.record("expected failed")
            return
        }
        #expect(error as? ProbeError == ProbeError(code: 7))
        #expect(info.source == .executed)
    }

    @Test func unrestrictedRunsEveryRequestConcurrently() async throws {
        let (harness, probe) = try harness(ProbePlugin(policy: .unrestricted, sleeping(.milliseconds(10))))
        defer { harness.shutdown() }
        let gate = harness.gate
        var tickets: [GateTicket<String>] = []
        for n in 0..<5 { tickets.append(await gate.start(gate.request(probe, Probe(key: "k", payload: "\(n)")))) }
        await harness.advance(by: .milliseconds(10))
        for (n, ticket) in tickets.enumerated() { #expect(try await ticket.settledOutcome().output == "\(n)") }
    }
}

/// How many times something was called, from any thread.
private final class CallCount: Sendable {
    private let count = Atomic<Int>(0)

    func increment() { count.add(1, ordering: .relaxed) }

    var value: Int { count.load(ordering: .relaxed) }
}
