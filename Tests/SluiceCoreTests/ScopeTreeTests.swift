import SluiceCore
import Testing

@Suite struct ScopeTreeTests {
    @Test func cancelByIDCoversTheSubtreeOnly() throws {
        var tree = ScopeTree<String, String>()
        let connA = try tree.openScope(in: tree.root)
        let connB = try tree.openScope(in: tree.root)
        let keyA = try tree.openScope(in: connA)
        let search1 = try tree.register(id: "search", key: "k", in: connA)
        let search2 = try tree.register(id: "search", key: "k", in: keyA)
        let other = try tree.register(id: "upload", key: "k", in: keyA)
        let searchB = try tree.register(id: "search", key: "k", in: connB)
        for token in [search1, search2, other, searchB] { #expect(start(&tree, token)) }
        #expect(tree.cancel(id: "search", in: connA) == [search1, search2])
        #expect(tree.isCancelled(search1) && tree.isCancelled(search2))
        #expect(!tree.isCancelled(other) && !tree.isCancelled(searchB))
        // Cancelling again reports nothing new.
        #expect(tree.cancel(id: "search", in: connA) == [])
        #expect(tree.cancel(id: "search", in: tree.root) == [searchB])
    }

    @Test func cancelBeforeStartWins() throws {
        var tree = ScopeTree<String, Int>()
        let scope = try tree.openScope(in: tree.root)
        let token = try tree.register(id: 7, key: "k", in: scope)
        #expect(tree.state(of: token) == .pending)
        #expect(tree.cancel(id: 7, in: scope) == [token])
        #expect(!start(&tree, token))
        tree.finished(token)
        #expect(tree.state(of: token) == nil)
        #expect(tree.effectCount == 0)
    }

    @Test func closingAScopeCancelsItsDescendants() throws {
        var tree = ScopeTree<String, String>()
        let connection = try tree.openScope(in: tree.root)
        let key = try tree.openScope(in: connection)
        let paymentScope = try tree.openScope(in: tree.root)  // payments live in the key's server-level scope
        let a = try tree.register(id: "echo", key: "k", in: connection)
        let b = try tree.register(id: "search", key: "k", in: key)
        let payment = try tree.register(id: "pay", key: "k", in: paymentScope)
        #expect(start(&tree, a))
        #expect(tree.close(connection) == [a, b])
        #expect(!tree.isOpen(connection) && !tree.isOpen(key))
        #expect(tree.isOpen(paymentScope))
        #expect(tree.state(of: payment) == .pending)
        #expect(!start(&tree, b))
        #expect(throws: SluiceError.self) { _ = try tree.register(id: "echo", key: "k", in: key) }
        #expect(throws: SluiceError.self) { _ = try tree.openScope(in: connection) }
        #expect(tree.close(connection) == [])
        tree.finished(a)
        tree.finished(b)
        #expect(tree.effectCount == 1)
        #expect(tree.scopeCount == 2)
    }

    @Test func finishedEffectsAreNotCancelled() throws {
        var tree = ScopeTree<String, String>()
        let token = try tree.register(id: "x", key: "k", in: tree.root)
        #expect(start(&tree, token))
        tree.finished(token)
        #expect(tree.cancel(id: "x", in: tree.root) == [])
        #expect(tree.cancelAll(in: tree.root) == [])
    }
}

@Suite struct SingleFlightTests {
    @Test func joinersShareTheLeadersExecution() {
        var flights = SingleFlight<String>()
        #expect(flights.begin(EventToken(1), key: "report") == .lead)
        #expect(flights.begin(EventToken(2), key: "report") == .join(leader: EventToken(1)))
        #expect(flights.begin(EventToken(3), key: "other") == .lead)
        #expect(flights.begin(EventToken(4), key: "report") == .join(leader: EventToken(1)))
        #expect(flights.complete(key: "report", leader: EventToken(9)) == [])
        #expect(flights.complete(key: "report", leader: EventToken(1)) == [EventToken(2), EventToken(4)])
        // Nothing is kept after completion.
        #expect(flights.begin(EventToken(5), key: "report") == .lead)
        #expect(flights.count == 2)
    }

    @Test func forget() {
        var flights = SingleFlight<String>()
        _ = flights.begin(EventToken(1), key: "k")
        _ = flights.begin(EventToken(2), key: "k")
        let forgotten = flights.forget(key: "k")
        #expect(forgotten?.leader == EventToken(1))
        #expect(forgotten?.joiners == [EventToken(2)])
        #expect(flights.begin(EventToken(3), key: "k") == .lead)
        #expect(flights.complete(key: "k", leader: EventToken(1)) == [])
    }
}

@Suite struct SwitchLatestTests {
    @Test func newEventCancelsTheRunningEffectOfTheSameID() {
        var latest = SwitchLatest<String, String>()
        #expect(latest.start(EventToken(1), key: "user42", effect: "search") == nil)
        #expect(latest.start(EventToken(2), key: "user42", effect: "search") == EventToken(1))
        #expect(latest.start(EventToken(3), key: "user42", effect: "save") == nil)
        #expect(latest.start(EventToken(4), key: "user7", effect: "search") == nil)
        // The cancelled effect's late completion changes nothing.
        let staleFinished = latest.finished(EventToken(1), key: "user42", effect: "search")
        #expect(!staleFinished)
        #expect(latest.running(key: "user42", effect: "search") == EventToken(2))
        let finished = latest.finished(EventToken(2), key: "user42", effect: "search")
        #expect(finished)
        #expect(latest.start(EventToken(5), key: "user42", effect: "search") == nil)
        #expect(latest.count == 3)
    }
}

@Suite struct OptionsTests {
    @Test func invalidOptionsThrowCodedErrors() {
        #expect(throws: SluiceError.self) { try ThrottleOptions(interval: .zero) }
        #expect(throws: SluiceError.self) { try ThrottleOptions(interval: .seconds(1), leading: false, trailing: false) }
        #expect(throws: SluiceError.self) { try DebounceOptions(quiet: .seconds(-1)) }
        #expect(throws: SluiceError.self) { try DebounceOptions(quiet: .seconds(2), maxWait: .seconds(1)) }
        #expect(throws: SluiceError.self) { try RateLimitOptions(count: 0, per: .seconds(1), burst: 1) }
        #expect(throws: SluiceError.self) { try RateLimitOptions(count: 1, per: .seconds(1), burst: -1) }
        #expect(throws: SluiceError.self) { try IdempotencyOptions(retention: .zero, lease: .seconds(1)) }
        #expect(throws: SluiceError.self) { try KeyTable<String, ThrottleState>(capacity: 0, whenFull: .refuse) }
        do {
            _ = try ThrottleOptions(interval: .milliseconds(-5))
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .invalidOption)
            #expect(error.value == "-0.005 seconds")
            #expect(error.message.contains("greater than zero"))
            #expect(error.description.hasPrefix("SluiceError(invalidOption)"))
        }
    }
}

/// `tree.start(token)` outside `#expect` (the macro cannot capture a mutating call).
func start<Key, ID>(_ tree: inout ScopeTree<Key, ID>, _ token: EffectToken) -> Bool {
    tree.start(token)
}
