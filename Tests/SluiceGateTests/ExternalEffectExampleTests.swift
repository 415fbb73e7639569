import Sluice
import SluicePluginTesting
import Synchronization
import Testing

/// The guide's effect that changes the world outside, written against the public API: a checkout
/// prices the order (cancellable, changes nothing), passes its commit point, then charges a
/// provider with the record's identity as the provider's idempotency key and the fence beside it.
struct CheckoutPlugin: GatePlugin {
    struct Payment: Sendable {
        let account: String
        let order: String
        let cents: Int
    }

    struct Receipt: Sendable, Codable, Equatable {
        let chargeID: String
        let cents: Int
    }

    /// Prices an order; changes nothing.
    struct Pricing: Sendable {
        func quote(_ payment: Payment) async throws -> Int { payment.cents }
    }

    /// A provider that keeps its charges by idempotency key and refuses an older fence, as a
    /// good payment provider does.
    final class Provider: Sendable {
        private struct Charges {
            var byKey: [String: (fence: UInt64, charge: String)] = [:]
            var made = 0
        }

        private let charges = Mutex(Charges())

        /// The calls that charged.
        var made: Int { charges.withSanitizedLock { $0.made } }

        /// The charge kept for `key`, if any.
        func charge(of key: String) -> String? { charges.withSanitizedLock { $0.byKey[key]?.charge } }

        func charge(_ payment: Payment, cents: Int, idempotencyKey: String?, fence: UInt64?) async throws -> Receipt {
            guard let idempotencyKey, let fence else {
                throw CommitRefusal(code: .downstreamUnavailable, message: "the provider needs an idempotency key", value: payment.order)
            }
            return try charges.withSanitizedLock { charges in
                if let kept = charges.byKey[idempotencyKey] {
                    guard fence >= kept.fence else {
                        throw CommitRefusal(code: .staleFence, message: "a newer owner charged this record", value: idempotencyKey)
                    }
                    return Receipt(chargeID: kept.charge, cents: cents)
                }
                charges.made += 1
                let charge = "ch_\(charges.made)"
                charges.byKey[idempotencyKey] = (fence, charge)
                return Receipt(chargeID: charge, cents: cents)
            }
        }
    }

    let name = "checkout"
    let policy: GatePolicy
    let pricing = Pricing()
    let provider: Provider

    init(provider: Provider) throws {
        policy = .idempotent(try IdempotencyOptions(retention: .seconds(60), lease: .seconds(5)))
        self.provider = provider
    }

    func key(for input: Payment) -> String { input.account }

    func identity(for input: Payment) -> RequestIdentity {
        RequestIdentity(record: "\(input.account.utf8.count):\(input.account)\(input.order)", fingerprint: String(input.cents))
    }

    func run(_ payment: Payment, context: EffectContext) async throws -> Receipt {
        let quote = try await pricing.quote(payment)  // cancellable, changes nothing
        let record = try context.commit()  // the commit point
        return try await provider.charge(
            payment, cents: quote, idempotencyKey: record?.downstreamKey, fence: record?.fence.value)
    }
}

@Suite struct ExternalEffectExampleTests {
    /// The checkout charges once, under the record's identity; a retry is a replay of the same
    /// receipt and the provider is not called again.
    @Test func theCheckoutChargesOnceUnderItsRecordsIdentity() async throws {
        let provider = CheckoutPlugin.Provider()
        var plugins = PluginRegistry()
        let checkout = try plugins.register(try CheckoutPlugin(provider: provider))
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let payment = CheckoutPlugin.Payment(account: "acct", order: "order-1", cents: 250)
        let first = await harness.gate.submit(checkout, payment)
        guard case .ran(let receipt, let info) = first else {
            Issue.record("expected a charge, got \(first.kind)")
            return
        }
        #expect(info.source == .executed)
        #expect(provider.made == 1)
        #expect(provider.charge(of: "checkout:4:acctorder-1") == receipt.chargeID)
        let retry = await harness.gate.submit(checkout, payment)
        guard case .ran(let replayed, let retryInfo) = retry else {
            Issue.record("expected a replay, got \(retry.kind)")
            return
        }
        #expect(retryInfo.source == .replayed)
        #expect(replayed == receipt)
        #expect(provider.made == 1)
    }
}
