import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded
import Sluice
import SluiceHummingbird

// What ThrottleMiddleware adds to a request, without sockets: the like route of
// Examples/HummingbirdApp (`POST /like/<post>`, a throttle per user and post, every post a new
// key) called through Hummingbird's router responder in this process, beside the same route
// without middleware and behind a middleware that only calls the rest of the chain. Rounds
// alternate the three; prints each route's time per request (median of the rounds) and what it
// adds to the route without middleware.
//
// Usage: hummingbird-middleware-profile [requests per round] [window ms] [tasks] [rounds]
//   tasks: how many tasks call the responder at once (2 on two cores is what a server sees).
let arguments = CommandLine.arguments.dropFirst().map { Int($0) }
let count = arguments.first.flatMap { $0 } ?? 200_000
let windowMilliseconds = arguments.dropFirst().first.flatMap { $0 } ?? 1_000
let tasks = arguments.dropFirst(2).first.flatMap { $0 } ?? 1
let rounds = arguments.dropFirst(3).first.flatMap { $0 } ?? 5

var plugins = PluginRegistry()
let likes = try ThrottleRule(name: "like", window: .milliseconds(windowMilliseconds), in: &plugins)
let group = try SluiceLoopGroup(loopCount: 1)
let gate = try Gate(group: group, plugins: plugins)

/// As the app's: the user (or everyone anonymous) and the post.
@Sendable func like(_ request: Request, _ context: BasicRequestContext) -> String? {
    context.parameters.get("post").map { "\(request.headers[.authorization] ?? "anonymous") \($0)" }
}

/// A middleware that only calls the rest of the chain: the floor under any middleware.
struct Passthrough: RouterMiddleware {
    func handle(
        _ request: Request, context: BasicRequestContext, next: (Request, BasicRequestContext) async throws -> Response
    ) async throws -> Response {
        try await next(request, context)
    }
}

let router = Router()
router.post("ungoverned/:post") { _, _ in "liked\n" }
router.group("passthrough").add(middleware: Passthrough()).post(":post") { _, _ in "liked\n" }
router.group("like").add(middleware: ThrottleMiddleware(likes, gate: gate, key: like)).post(":post") { _, _ in "liked\n" }
let responder = router.buildResponder()
let context = BasicRequestContext(source: .init(channel: NIOAsyncTestingChannel(), logger: Logger(label: "profile")))

/// Requests `first..<end` of a round on `route`, one after another; the sum of their status codes.
func call(_ route: String, round: Int, _ range: Range<Int>) async throws -> Int {
    var statuses = 0
    for n in range {
        let request = Request(
            head: HTTPRequest(method: .post, scheme: "http", authority: "localhost", path: "/\(route)/\(round)-\(n)"),
            body: RequestBody(buffer: ByteBuffer()))
        statuses &+= Int(try await responder.respond(to: request, context: context).status.code)
    }
    return statuses
}

/// One round of `count` requests on `route`, split between `tasks` tasks: ns per request.
func measure(_ route: String, round: Int) async throws -> Double {
    let start = ContinuousClock.now
    let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
        for task in 0..<tasks {
            group.addTask { try await call(route, round: round, task * count / tasks..<(task + 1) * count / tasks) }
        }
        return try await group.reduce(0, +)
    }
    let elapsed = ContinuousClock.now - start
    guard statuses == 200 * count else {
        print("\(route): not every request was answered 200 (a key was throttled or the table refused it)")
        exit(1)
    }
    return (Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9) / Double(count)
}

let routes = ["ungoverned", "passthrough", "like"]
var times = [[Double]](repeating: [], count: routes.count)
for round in 0..<rounds {
    for (index, route) in routes.enumerated() { times[index].append(try await measure(route, round: round)) }
}
func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
print("\(count) requests per round, \(rounds) rounds, \(tasks) task(s), window \(windowMilliseconds) ms (ns per request)")
for (index, route) in routes.enumerated() {
    let added = median(times[index]) - median(times[0])
    print("\(route.padding(toLength: 12, withPad: " ", startingAt: 0)) median \(Int(median(times[index])))  adds \(Int(added))  rounds \(times[index].map { Int($0) })")
}
group.shutdownGracefully()
