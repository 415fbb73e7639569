import Sluice
import SluicePayment
import SluicePluginTesting
import Testing

/// The plugin of the "Policy chains" article, compiled and run: idempotency on (account, key),
/// then a GCRA per account, a GCRA per client address, and at most four charges in flight per
/// account.
struct Charge: Sendable {
    let account: String
    let idempotencyKey: String
    let address: String
    let amount: Int
}

struct ChargePlugin: GatePlugin {
    let name = "charge"
    let policy = GatePolicy.idempotent(.payment)
    let limits: [LimitStage<Charge>]

    init() throws {
        limits = [
            try .rate("account", RateLimitOptions(count: 10, per: .seconds(60), burst: 4)) { $0.account },
            try .rate("address", RateLimitOptions(count: 30, per: .seconds(60), burst: 9)) { $0.address },
            try .concurrency("account-in-flight", limit: 4) { $0.account },
        ]
    }

    func key(for charge: Charge) -> String { charge.account }

    func identity(for charge: Charge) -> RequestIdentity {
        let account = charge.account
        return RequestIdentity(
            record: "\(account.utf8.count):\(account)\(charge.idempotencyKey)", fingerprint: String(charge.amount))
    }

    func run(_ charge: Charge, context: EffectContext) async throws -> String {
        try await context.sleep(for: .milliseconds(200))  // the processor
        let record = try context.commit()
        return "charged \(charge.amount) as \(record?.record ?? "")"
    }
}

func describe(_ outcome: GateOutcome<String>, report: (String) -> Void) {
    switch outcome {
    case .ran(let receipt, let info):
        report("\(receipt); remaining \(info.limits.map { "\($0.stage)=\($0.decision.remaining)" })")
    case .limited(let refusal):
        report("refused by \(refusal.stage); retry after \(refusal.retryAfter.map { "\($0)" } ?? "a running charge ends")")
    default:
        report("\(outcome)")
    }
}

@Suite struct PolicyChainExampleTests {
    @Test func theArticlesChargeChain() async throws {
        var plugins = PluginRegistry()
        let charges = try plugins.register(try ChargePlugin())
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let gate = harness.gate
        var lines: [String] = []
        func report(_ line: String) { lines.append(line) }

        let charge = Charge(account: "acct-1", idempotencyKey: "k-1", address: "203.0.113.7", amount: 500)
        let ticket = await gate.start(gate.request(charges, charge))
        await harness.advance(by: .milliseconds(200))
        let outcome = await ticket.outcome

        describe(outcome, report: report)

        #expect(lines == ["charged 500 as 6:acct-1k-1; remaining [\"account=4\", \"address=9\"]"])
        // The retry replays: it spends nothing.
        let replay = await gate.submit(charges, charge)
        #expect(replay.runInfo?.source == .replayed && replay.runInfo?.limits == [])
    }
}
