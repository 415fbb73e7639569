#if Hummingbird
import HTTPTypes
import Hummingbird
import Sluice
import SluiceHummingbird
import Synchronization

// The rules are made once, before the gate, and registered in its plugins; every middleware
// shares the gate, which decides on the thread that handles the request (no hop).
var plugins = PluginRegistry()
let payments = try IdempotencyRule(name: "pay", options: .payment, in: &plugins)
let payLimit = try RateLimitRule(name: "pay-limit", limit: RateLimitOptions(count: 10, per: .seconds(60), burst: 4), in: &plugins)
let likes = try ThrottleRule(name: "like", window: .seconds(1), in: &plugins)
let searches = try RateLimitRule(name: "search", limit: RateLimitOptions(count: 5, per: .seconds(1), burst: 9), in: &plugins)
let group = try SluiceLoopGroup(loopCount: 1)
let gate = try Gate(group: group, plugins: plugins)

/// Who is calling: the bearer token stands in for the user an authentication middleware names.
@Sendable func user(_ request: Request, _ context: BasicRequestContext) -> String? {
    request.headers[.authorization]
}

/// What a like is throttled by: the user (or everyone anonymous) and the post.
@Sendable func like(_ request: Request, _ context: BasicRequestContext) -> String? {
    context.parameters.get("post").map { "\(request.headers[.authorization] ?? "anonymous") \($0)" }
}

struct Payment: Decodable {
    let amount: Int
}

struct Charge: ResponseEncodable {
    let charge: String
    let amount: Int
}

let charges = Atomic<Int>(0)
let router = Router()

// POST /pay: idempotency first, so that a replay is answered before the rate limit and spends
// none of its quota; the route runs once per Authorization and Idempotency-Key.
router.group("pay")
    .add(middleware: IdempotencyMiddleware(payments, gate: gate, key: user))
    .add(middleware: RateLimitMiddleware(payLimit, gate: gate, key: user))
    .post { request, context -> EditedResponse<Charge> in
        let payment = try await request.decode(as: Payment.self, context: context)
        guard payment.amount > 0 else { throw HTTPError(.badRequest, message: "amount must be positive") }
        let number = charges.wrappingAdd(1, ordering: .relaxed).newValue
        return EditedResponse(status: .created, response: Charge(charge: "ch_\(number)", amount: payment.amount))
    }

// POST /like/<post>: one like per user and post per second, the others 429.
router.group("like")
    .add(middleware: ThrottleMiddleware(likes, gate: gate, key: like))
    .post(":post") { _, _ in "liked\n" }

// The baseline bench.sh measures /like against: the route without middleware.
router.post("like-ungoverned/:post") { _, _ in "liked\n" }

// GET /search?q=…: a rate limit per user (5 per second, bursts of 10); anonymous callers share one.
router.group("search")
    .add(middleware: RateLimitMiddleware(searches, gate: gate) { request, _ in request.headers[.authorization] ?? "anonymous" })
    .get { request, _ in "results for \(request.uri.queryParameters["q"] ?? "")\n" }

let port = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 8080
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), services: [gate])
try await app.runService()
group.shutdownGracefully()
#endif
