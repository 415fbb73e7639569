import Sluice
import SluiceButtonTap
import SluicePage
import SluicePayment
import SluiceRateLimit
import SluiceSearch

/// Sluice embedded in plain async Swift: no socket, no line protocol, typed outcomes only.
public enum EmbeddingExample {
    /// Runs every example and reports what happened, one line each.
    public static func run(report: (String) -> Void = { print($0) }) async throws {
        // The loops (one shard each) and the plugins. The gate opens no socket of its own.
        let group = try SluiceLoopGroup(loopCount: 2)
        defer { group.shutdownGracefully() }
        var plugins = PluginRegistry()
        let tap = try plugins.register(ButtonTapPlugin(window: .seconds(60)))
        let pay = try plugins.register(PaymentPlugin(processor: SimulatedProcessor(latency: .milliseconds(50))))
        let search = try plugins.register(SearchPlugin(quiet: .seconds(5), maxWait: .seconds(10)))
        let limit = try plugins.register(RateLimitPlugin(count: 6, per: .seconds(60), burst: 1))
        let page = try plugins.register(PagePlugin(latency: .seconds(5)))
        let gate = try Gate(group: group, plugins: plugins)

        // A like button: the first tap of a minute runs, the next one is throttled.
        for attempt in 1...2 {
            switch await gate.submit(tap, "like:post-7") {
            case .ran(let count, _): report("tap \(attempt): ran, tap number \(count)")
            case .throttled: report("tap \(attempt): throttled")
            default: report("tap \(attempt): unexpected")
            }
        }

        // A payment runs once; a retry gets the same typed result back, marked as a replay.
        let payment = PaymentPlugin.Payment(key: "acct-1", idem: "order-42", amount: 1_999)
        let charged = await gate.submit(pay, payment)
        let retried = await gate.submit(pay, payment)
        let sameCharge = charged.output == retried.output
        report("payment: \(charged.runInfo?.source == .executed ? "executed" : "?"), retry: \(retried.runInfo?.source == .replayed ? "replayed" : "?"), same charge: \(sameCharge)")
        let otherAmount = await gate.submit(pay, PaymentPlugin.Payment(key: "acct-1", idem: "order-42", amount: 5))
        if case .mismatch = otherAmount { report("payment with another amount: mismatch") }

        // A debounced search, cancelled by its effect ID in the session's scope before it ran.
        let session = gate.openScope()
        let typing = await gate.start(gate.request(search, .init(key: "search-box", query: "swi"), id: "search", in: session))
        await gate.cancel(id: "search", in: session)
        if case .cancelled(let reason) = await typing.outcome { report("search: cancelled (\(reason))") }
        gate.close(session)

        // A GCRA rate limit: a burst of two, then the limiter says when to come back.
        for attempt in 1...3 {
            switch await gate.submit(limit, .init(key: "api-key-9")) {
            case .ran(_, let info): report("limit \(attempt): allowed, remaining \(info.rateLimit?.remaining ?? -1)")
            case .limited(let decision):
                let seconds = decision.retryAfter.map { $0.components.seconds + ($0.components.attoseconds > 0 ? 1 : 0) }
                report("limit \(attempt): limited, retry within \(seconds.map { "\($0) s" } ?? "never")")
            default: report("limit \(attempt): unexpected")
            }
        }

        // A shared page load: two requests for the same page while it loads share one load.
        let first = await gate.start(gate.request(page, .init(key: "feed", page: 0)))
        let second = await gate.start(gate.request(page, .init(key: "feed", page: 0)))
        let (led, joined) = (await first.outcome, await second.outcome)
        report("page: \(led.output?.items.joined(separator: ",") ?? "-"), loads: \(page.plugin.loads.current), second joined: \(joined.runInfo?.source == .joined)")

        await gate.shutdown()
    }
}
