#if Hummingbird
import HTTPTypes
import Hummingbird
import NIOCore
import Sluice
@testable import SluiceHummingbird
import SluiceCore
import SluicePluginTesting
import Testing

/// How the pay route fails after it has charged.
enum RouteFailure: Sendable, CaseIterable, CustomTestStringConvertible {
    /// It throws an error of its own.
    case plainError
    /// It throws `CancellationError`.
    case cancellation
    /// It throws `HTTPError(.serviceUnavailable)`: "unknown", from the route.
    case unavailable
    /// Its response body's writer throws after the handler returned.
    case bodyWriter

    struct ChargeFailed: Error {}
    struct BodyLost: Error {}

    /// What the route throws, or `nil` when its body writer fails instead.
    var thrown: (any Error)? {
        switch self {
        case .plainError: ChargeFailed()
        case .cancellation: CancellationError()
        case .unavailable: HTTPError(.serviceUnavailable)
        case .bodyWriter: nil
        }
    }

    /// The status stored and replayed.
    var status: HTTPResponse.Status {
        self == .unavailable ? .serviceUnavailable : .internalServerError
    }

    var testDescription: String { "\(self)" }
}

@Suite struct IdempotencyMiddlewareTests {
    /// An app with `POST /pay` behind idempotency (scoped by `Authorization`) and, with
    /// `limit`, a rate limit after it; the route counts its runs, waits on `latch` when given,
    /// and answers 201 with `Location` and a body naming the charge and echoing the request's.
    private struct App: Sendable {
        let fixture: Fixture
        let runs = PluginCounter("test_pay_runs")

        static func make(
            options: IdempotencyMiddlewareOptions = .payment, limit: RateLimitOptions? = nil, latch: Latch? = nil,
            responseBody: String? = nil, store: PluginStore = .memory, failure: RouteFailure? = nil,
            validates: Bool = false
        ) throws -> (App, Router<BasicRequestContext>) {
            var plugins = PluginRegistry()
            let payments = try IdempotencyRule(name: "pay", options: options, store: store, in: &plugins)
            let clock = ManualGateClock()
            let limits = try limit.map { try RateLimitRule(name: "pay-limit", limit: $0, in: &plugins) }
            let app = App(fixture: try Fixture(plugins, clock: clock))
            let fixture = app.fixture
            let router = Router()
            let group = router.group("pay")
                .add(middleware: IdempotencyMiddleware(payments, gate: fixture.gate) { request, _ in request.headers[.authorization] })
            if let limits {
                group.add(middleware: RateLimitMiddleware(limits, gate: fixture.gate) { request, _ in request.headers[.authorization] })
            }
            let runs = app.runs
            group.post { request, _ -> Response in
                // Validation before the route acts: a body "bad" is refused, nothing charged.
                if validates, String(buffer: try await request.body.collect(upTo: 1 << 20)) == "bad" {
                    throw HTTPError(.badRequest, message: "the body is not a valid payment")
                }
                let run = runs.current + 1
                runs.increment()
                if let latch { await latch.wait() }
                let body = try await request.body.collect(upTo: 1 << 20)
                // The charge is made: the failure comes after it.
                if let failure {
                    if let error = failure.thrown { throw error }
                    return Response(status: .created, body: ResponseBody { _ in throw RouteFailure.BodyLost() })
                }
                var headers = HTTPFields()
                headers[.location] = "/charges/ch_\(run)"
                return Response(
                    status: .created, headers: headers,
                    body: ResponseBody(byteBuffer: ByteBuffer(string: responseBody ?? "charge ch_\(run) for \(String(buffer: body))")))
            }
            return (app, router)
        }
    }

    @Test(arguments: testModes)
    func theFirstRequestRunsAndARetryGetsItsResponseReplayed(mode: ServingMode) async throws {
        let (app, appRouter) = try App.make()
        try await app.fixture.test(appRouter, mode) { client in
            let first = try await client.send(.post, "/pay", headers: user("ann", idempotencyKey: #""order-1""#), body: "500")
            #expect(first.status == .created)
            #expect(first.body == "charge ch_1 for 500")
            #expect(first.headers[.location] == "/charges/ch_1")
            #expect(first.headers[.idempotentReplayedForTests] == nil)

            let retry = try await client.send(.post, "/pay", headers: user("ann", idempotencyKey: #""order-1""#), body: "500")
            #expect(retry.status == .created)
            #expect(retry.body == "charge ch_1 for 500")
            #expect(retry.headers[.location] == "/charges/ch_1")
            #expect(retry.headers[.idempotentReplayedForTests] == "true")

            // The same Idempotency-Key of another user is another record.
            let other = try await client.send(.post, "/pay", headers: user("bob", idempotencyKey: #""order-1""#), body: "500")
            #expect(other.body == "charge ch_2 for 500")
            #expect(other.headers[.idempotentReplayedForTests] == nil)
            #expect(app.runs.current == 2)
        }
    }

    @Test(arguments: testModes)
    func aDuplicateWhileTheFirstRunsIs409(mode: ServingMode) async throws {
        let latch = Latch()
        let (app, appRouter) = try App.make(latch: latch)
        try await app.fixture.test(appRouter, mode) { client in
            let headers = user("ann", idempotencyKey: #""order-2""#)
            async let first = client.sendAlone(.post, "/pay", headers: headers, body: "700")
            // Declared after the request: on a failure it opens the latch before the request's
            // task is awaited, so a parked route cannot hold the test.
            defer { latch.open() }
            try await latch.waitForEntries()
            let duplicate = try await client.send(.post, "/pay", headers: headers, body: "700")
            #expect(duplicate.status == .conflict)
            #expect(duplicate.headers[.retryAfter] == "1")
            #expect(duplicate.body.contains(#""type":"urn:sluice:problem:conflict""#))
            latch.open()
            let led = try await first
            #expect(led.status == .created)
            #expect(led.body == "charge ch_1 for 700")
            let retry = try await client.send(.post, "/pay", headers: headers, body: "700")
            #expect(retry.body == "charge ch_1 for 700")
            #expect(retry.headers[.idempotentReplayedForTests] == "true")
            #expect(app.runs.current == 1)
        }
    }

    @Test(arguments: testModes)
    func withJoinADuplicateWhileTheFirstRunsGetsItsResponse(mode: ServingMode) async throws {
        let latch = Latch()
        var options = IdempotencyMiddlewareOptions.payment
        options.concurrent = .join
        let (app, appRouter) = try App.make(options: options, latch: latch)
        try await app.fixture.test(appRouter, mode) { client in
            let headers = user("ann", idempotencyKey: #""order-3""#)
            async let first = client.sendAlone(.post, "/pay", headers: headers, body: "900")
            // Declared after each request: on a failure they open the latch before its task is
            // awaited, so a parked route (or a duplicate waiting for it) cannot hold the test.
            defer { latch.open() }
            try await latch.waitForEntries()
            async let second = client.sendAlone(.post, "/pay", headers: headers, body: "900")
            defer { latch.open() }
            // The leader and the duplicate both wait on the gate for the one execution.
            try await eventually("the duplicate joined") { await app.fixture.gate.statistics().waiters == 2 }
            latch.open()
            let (led, joined) = try await (first, second)
            #expect(led.status == .created)
            #expect(led.headers[.idempotentReplayedForTests] == nil)
            #expect(joined.status == .created)
            #expect(joined.body == led.body)
            #expect(joined.headers[.idempotentReplayedForTests] == "true")
            #expect(app.runs.current == 1)
        }
    }

    /// Through the router, so that the test can cancel the request's task (a live server's
    /// client cannot).
    @Test func aCallerCancelledWhileItsChainRunsGetsTheResponseItStored() async throws {
        let latch = Latch()
        let (app, appRouter) = try App.make(latch: latch)
        try await app.fixture.test(appRouter, .router) { client in
            let headers = user("ann", idempotencyKey: #""order-11""#)
            let first = Task { try await client.send(.post, "/pay", headers: headers, body: "1100") }
            // On a failure the parked route goes on, so that the gate's shutdown does not wait
            // for it for ever.
            defer { latch.open() }
            try await latch.waitForEntries()
            try await eventually("the first request waits on the gate") { await app.fixture.gate.statistics().waiters == 1 }
            first.cancel()
            // The gate answers the cancelled caller at once; its chain runs on.
            try await eventually("the cancelled request left the gate") { await app.fixture.gate.statistics().waiters == 0 }
            latch.open()
            let led = try await first.value
            #expect(led.status == .created)
            #expect(led.body == "charge ch_1 for 1100")
            #expect(led.headers[.idempotentReplayedForTests] == nil)
            let retry = try await client.send(.post, "/pay", headers: headers, body: "1100")
            #expect(retry.body == "charge ch_1 for 1100")
            #expect(retry.headers[.idempotentReplayedForTests] == "true")
            #expect(app.runs.current == 1)
        }
    }

    @Test(arguments: testModes)
    func theSameKeyWithAnotherBodyIs422(mode: ServingMode) async throws {
        let (app, appRouter) = try App.make()
        try await app.fixture.test(appRouter, mode) { client in
            let headers = user("ann", idempotencyKey: #""order-4""#)
            #expect(try await client.send(.post, "/pay", headers: headers, body: "500").status == .created)
            let other = try await client.send(.post, "/pay", headers: headers, body: "501")
            #expect(other.status == .unprocessableContent)
            #expect(other.body.contains(#""type":"urn:sluice:problem:mismatch""#))
            #expect(app.runs.current == 1)
        }
    }

    @Test(arguments: testModes)
    func theSameKeyWithAnotherQueryIs422(mode: ServingMode) async throws {
        let (app, appRouter) = try App.make()
        try await app.fixture.test(appRouter, mode) { client in
            let headers = user("ann", idempotencyKey: #""order-10""#)
            #expect(try await client.send(.post, "/pay?currency=eur", headers: headers, body: "500").status == .created)
            let other = try await client.send(.post, "/pay?currency=usd", headers: headers, body: "500")
            #expect(other.status == .unprocessableContent)
            #expect(other.body.contains(#""type":"urn:sluice:problem:mismatch""#))
            let none = try await client.send(.post, "/pay", headers: headers, body: "500")
            #expect(none.status == .unprocessableContent)
            let same = try await client.send(.post, "/pay?currency=eur", headers: headers, body: "500")
            #expect(same.status == .created)
            #expect(same.headers[.idempotentReplayedForTests] == "true")
            #expect(app.runs.current == 1)
        }
    }

    @Test(arguments: testModes)
    func aMissingKeyIs400WhenRequiredAndPassesThroughOtherwise(mode: ServingMode) async throws {
        let (required, requiredRouter) = try App.make()
        try await required.fixture.test(requiredRouter, mode) { client in
            let missing = try await client.send(.post, "/pay", headers: user("ann"), body: "500")
            #expect(missing.status == .badRequest)
            #expect(missing.body.contains(#""type":"urn:sluice:problem:missing-idempotency-key""#))
            var twice = user("ann", idempotencyKey: #""a""#)
            twice.append(HTTPField(name: .idempotencyKeyForTests, value: #""b""#))
            let repeated = try await client.send(.post, "/pay", headers: twice, body: "500")
            #expect(repeated.status == .badRequest)
            #expect(repeated.body.contains(#""type":"urn:sluice:problem:bad-idempotency-key""#))
            #expect(required.runs.current == 0)
        }
        let (optional, optionalRouter) = try App.make(options: .optionalKey)
        try await optional.fixture.test(optionalRouter, mode) { client in
            for _ in 1...2 {
                let plain = try await client.send(.post, "/pay", headers: user("ann"), body: "500")
                #expect(plain.status == .created)
                #expect(plain.headers[.idempotentReplayedForTests] == nil)
            }
            #expect(optional.runs.current == 2)
        }
    }

    @Test(arguments: testModes)
    func aRequestBodyOverTheLimitIs413AndNothingRuns(mode: ServingMode) async throws {
        var options = IdempotencyMiddlewareOptions.payment
        options.requestBodyLimit = 16
        let (app, appRouter) = try App.make(options: options)
        try await app.fixture.test(appRouter, mode) { client in
            let headers = user("ann", idempotencyKey: #""order-5""#)
            let large = try await client.send(.post, "/pay", headers: headers, body: String(repeating: "7", count: 17))
            #expect(large.status == .contentTooLarge)
            #expect(large.body.contains(#""type":"urn:sluice:problem:body-too-large""#))
            let fits = try await client.send(.post, "/pay", headers: headers, body: String(repeating: "7", count: 16))
            #expect(fits.status == .created)
            #expect(app.runs.current == 1)
        }
    }

    @Test(arguments: testModes)
    func aResponseOverTheStoredLimitIsA500ThatIsKeptAndTheRouteRunsOnce(mode: ServingMode) async throws {
        var options = IdempotencyMiddlewareOptions.payment
        options.storedBodyLimit = 8
        let (app, appRouter) = try App.make(options: options, responseBody: "a body of twenty-one")
        try await app.fixture.test(appRouter, mode) { client in
            let headers = user("ann", idempotencyKey: #""order-6""#)
            let first = try await client.send(.post, "/pay", headers: headers, body: "500")
            #expect(first.status == .internalServerError)
            #expect(first.body.contains(#""type":"urn:sluice:problem:response-not-stored""#))
            let retry = try await client.send(.post, "/pay", headers: headers, body: "500")
            #expect(retry.status == .internalServerError)
            #expect(retry.body == first.body)
            #expect(retry.headers[.idempotentReplayedForTests] == "true")
            #expect(app.runs.current == 1)
        }
    }

    @Test(arguments: testModes)
    func aReplaySpendsNoQuotaOfTheRateLimitBehindIt(mode: ServingMode) async throws {
        let (app, appRouter) = try App.make(limit: try RateLimitOptions(count: 2, per: .seconds(60), burst: 1))
        try await app.fixture.test(appRouter, mode) { client in
            let first = try await client.send(.post, "/pay", headers: user("ann", idempotencyKey: "k1"), body: "1")
            #expect(first.status == .created)
            #expect(first.headers[.rateLimitForTests] == #""pay-limit";r=1;t=30"#)
            for _ in 1...3 {
                let replay = try await client.send(.post, "/pay", headers: user("ann", idempotencyKey: "k1"), body: "1")
                #expect(replay.status == .created)
                #expect(replay.headers[.idempotentReplayedForTests] == "true")
                // The first answer's decision is not the replay's: no fields from it.
                #expect(replay.headers[.rateLimitForTests] == nil)
                #expect(replay.headers[.rateLimitPolicyForTests] == nil)
                #expect(replay.headers[.retryAfter] == nil)
                #expect(replay.headers[.location] == "/charges/ch_1")
            }
            // The replays spent nothing: the second unit is still there.
            let second = try await client.send(.post, "/pay", headers: user("ann", idempotencyKey: "k2"), body: "2")
            #expect(second.status == .created)
            #expect(second.headers[.rateLimitForTests] == #""pay-limit";r=0;t=60"#)
            // Over the limit: 429, and the 429 is not stored (a retry is decided again).
            for _ in 1...2 {
                let limited = try await client.send(.post, "/pay", headers: user("ann", idempotencyKey: "k3"), body: "3")
                #expect(limited.status == .tooManyRequests)
                #expect(limited.headers[.retryAfter] == "30")
                #expect(limited.headers[.idempotentReplayedForTests] == nil)
            }
            // And the replay of the first still gets its stored answer with the quota spent.
            let replay = try await client.send(.post, "/pay", headers: user("ann", idempotencyKey: "k1"), body: "1")
            #expect(replay.status == .created)
            #expect(replay.body == "charge ch_1 for 1")
            #expect(replay.headers[.rateLimitForTests] == nil)
            #expect(app.runs.current == 2)
        }
    }

    @Test(arguments: testModes, RouteFailure.allCases)
    func aFailureAfterTheRouteStartedIsStoredAndTheRetryIsAReplay(mode: ServingMode, failure: RouteFailure) async throws {
        let (app, appRouter) = try App.make(failure: failure)
        try await app.fixture.test(appRouter, mode) { client in
            let headers = user("ann", idempotencyKey: #""order-9""#)
            let first = try await client.send(.post, "/pay", headers: headers, body: "900")
            #expect(first.status == failure.status)
            if failure.status == .internalServerError {
                #expect(first.body.contains(#""type":"urn:sluice:problem:internal""#))
            }
            let retry = try await client.send(.post, "/pay", headers: headers, body: "900")
            #expect(retry.status == first.status)
            #expect(retry.body == first.body)
            #expect(retry.headers[.idempotentReplayedForTests] == "true")
            #expect(app.runs.current == 1)
        }
    }

    @Test(arguments: testModes, [false, true])
    func aRecordReleasedForARefusalBehindCostsNoRecordQuota(mode: ServingMode, shared: Bool) async throws {
        var options = IdempotencyMiddlewareOptions.payment
        options.recordsPerKey = 2
        let (app, appRouter) = try App.make(
            options: options, limit: try RateLimitOptions(count: 1, per: .seconds(60), burst: 0),
            store: shared ? try PluginStore.shared(MemoryStore()) : .memory)
        try await app.fixture.test(appRouter, mode) { client in
            #expect(try await client.send(.post, "/pay", headers: user("ann", idempotencyKey: "k0"), body: "1").status == .created)
            // Refused by the limit behind: released, and the quota of 2 records is not spent.
            for idem in 1...4 {
                let limited = try await client.send(.post, "/pay", headers: user("ann", idempotencyKey: "k\(idem)"), body: "1")
                #expect(limited.status == .tooManyRequests)
            }
            await app.fixture.clock.advance(by: .seconds(60))
            let second = try await client.send(.post, "/pay", headers: user("ann", idempotencyKey: "k5"), body: "1")
            #expect(second.status == .created)
            #expect(app.runs.current == 2)
        }
    }

    @Test func thePaymentPresetHoldsADayOfRecordsInTheDefaultBudget() {
        let options = IdempotencyMiddlewareOptions.payment
        let capacity = KeyTable<String, IdempotencyRecord<String, Result<StoredResponse, any Error>>>.capacity(
            for: .bytes(256 << 20, extraBytesPerKey: options.storedBodyLimit + 1024))
        #expect(capacity >= 50_000)
    }

    @Test(arguments: testModes)
    func aScopeOver256BytesIs400AndNothingRuns(mode: ServingMode) async throws {
        let (app, appRouter) = try App.make()
        try await app.fixture.test(appRouter, mode) { client in
            var headers = user(String(repeating: "a", count: 250), idempotencyKey: #""order-12""#)
            let long = try await client.send(.post, "/pay", headers: headers, body: "5")
            #expect(long.status == .badRequest)
            #expect(long.body.contains(#""type":"urn:sluice:problem:bad-key""#))
            // "Bearer " and 249 bytes: 256, the longest.
            headers = user(String(repeating: "a", count: 249), idempotencyKey: #""order-12""#)
            #expect(try await client.send(.post, "/pay", headers: headers, body: "5").status == .created)
            #expect(app.runs.current == 1)
        }
    }

    @Test(arguments: testModes)
    func aRequestWithoutAScopeIsNotGoverned(mode: ServingMode) async throws {
        let (app, appRouter) = try App.make()
        try await app.fixture.test(appRouter, mode) { client in
            var headers = HTTPFields()
            headers[.idempotencyKeyForTests] = #""order-7""#
            for _ in 1...2 {
                let plain = try await client.send(.post, "/pay", headers: headers, body: "5")
                #expect(plain.status == .created)
                #expect(plain.headers[.idempotentReplayedForTests] == nil)
            }
            #expect(app.runs.current == 2)
        }
    }

    @Test(arguments: testModes)
    func aSharedStoreKeepsTheResponseAsJSONAndReplaysIt(mode: ServingMode) async throws {
        let (app, appRouter) = try App.make(store: try PluginStore.shared(MemoryStore()))
        try await app.fixture.test(appRouter, mode) { client in
            let headers = user("ann", idempotencyKey: #""order-8""#)
            let first = try await client.send(.post, "/pay", headers: headers, body: "800")
            #expect(first.status == .created)
            let retry = try await client.send(.post, "/pay", headers: headers, body: "800")
            #expect(retry.status == .created)
            #expect(retry.body == first.body)
            #expect(retry.headers[.location] == "/charges/ch_1")
            #expect(retry.headers[.idempotentReplayedForTests] == "true")
            #expect(try await client.send(.post, "/pay", headers: headers, body: "801").status == .unprocessableContent)
            #expect(app.runs.current == 1)
        }
    }

    /// A request refused for its own shape before the route acted (a 400 from validation) is
    /// not stored: the corrected retry, with the same key, runs (Stripe saves nothing for a
    /// request that failed validation); its record cost no quota.
    @Test(arguments: testModes)
    func aValidationRefusalIsNotStoredAndTheCorrectedRetryRuns(mode: ServingMode) async throws {
        var options = IdempotencyMiddlewareOptions.payment
        options.recordsPerKey = 1
        let (app, appRouter) = try App.make(options: options, validates: true)
        try await app.fixture.test(appRouter, mode) { client in
            let headers = user("ann", idempotencyKey: #""order-20""#)
            let refused = try await client.send(.post, "/pay", headers: headers, body: "bad")
            #expect(refused.status == .badRequest)
            #expect(refused.headers[.idempotentReplayedForTests] == nil)
            let corrected = try await client.send(.post, "/pay", headers: headers, body: "900")
            #expect(corrected.status == .created)
            #expect(corrected.body == "charge ch_1 for 900")
            let retry = try await client.send(.post, "/pay", headers: headers, body: "900")
            #expect(retry.body == "charge ch_1 for 900")
            #expect(retry.headers[.idempotentReplayedForTests] == "true")
            #expect(app.runs.current == 1)
        }
    }

    /// A JSON body counts by its canonical form: the same JSON with its members in another
    /// order and other whitespace replays; other JSON is a mismatch. With `.exactBytes`, the
    /// bytes count.
    @Test(arguments: testModes, [IdempotencyMiddlewareOptions.Fingerprint.canonicalJSON, .exactBytes])
    func theSameJSONLaidOutOtherwiseReplays(mode: ServingMode, fingerprint: IdempotencyMiddlewareOptions.Fingerprint) async throws {
        var options = IdempotencyMiddlewareOptions.payment
        options.fingerprint = fingerprint
        let (app, appRouter) = try App.make(options: options)
        try await app.fixture.test(appRouter, mode) { client in
            var headers = user("ann", idempotencyKey: #""order-21""#)
            headers[.contentType] = "application/json; charset=utf-8"
            let first = try await client.send(.post, "/pay", headers: headers, body: #"{"amount":500,"currency":"eur","note":"A\/B"}"#)
            #expect(first.status == .created)
            let relaid = try await client.send(
                .post, "/pay", headers: headers, body: "{ \"note\" : \"\\u0041/B\",\n  \"currency\": \"eur\", \"amount\": 500 }")
            if fingerprint == .canonicalJSON {
                #expect(relaid.status == .created)
                #expect(relaid.headers[.idempotentReplayedForTests] == "true")
                #expect(relaid.body == first.body)
            } else {
                #expect(relaid.status == .unprocessableContent)
            }
            let other = try await client.send(.post, "/pay", headers: headers, body: #"{"amount":501,"currency":"eur","note":"A/B"}"#)
            #expect(other.status == .unprocessableContent)
            #expect(app.runs.current == 1)
        }
    }

    /// The canonical form: members sorted by name, no whitespace, escapes resolved and written
    /// one way, numbers as written; no form for what is not strict JSON or repeats a name.
    @Test func canonicalJSONForms() {
        let cases: [(String, String?)] = [
            (#" {"b": [1, 2.50, -0e+3], "a": {"y": null, "x": true}} "#, #"{"a":{"x":true,"y":null},"b":[1,2.50,-0e+3]}"#),
            (#"{"k":"\u00e9\/\t\u0001"}"#, #"{"k":"é/\u0009\u0001"}"#),
            (#""\ud83d\ude00""#, "\"😀\""),
            (#"[]"#, "[]"),
            (#"{}"#, "{}"),
            (#"{"é":1,"e":2,"z":3}"#, #"{"e":2,"z":3,"é":1}"#),
            (#"{"a":1,"a":2}"#, nil),
            (#"[1,]"#, nil),
            (#"01"#, nil),
            (#"1."#, nil),
            (#""\ud83d""#, nil),
            ("\"a\u{01}b\"", nil),
            (#"{"a":1} x"#, nil),
            (String(repeating: "[", count: 65) + String(repeating: "]", count: 65), nil),
            (String(repeating: "[", count: 64) + String(repeating: "]", count: 64), String(repeating: "[", count: 64) + String(repeating: "]", count: 64)),
        ]
        for (input, expected) in cases {
            let canonical = CanonicalJSON.canonical(Array(input.utf8)).map { String(decoding: $0, as: UTF8.self) }
            #expect(canonical == expected, "\(input)")
        }
    }
}
#endif
