import Sluice
import SluiceCore
import Testing

/// The policy an instance decides with alone when its shared store does not answer
/// (`StoreFailureMode.local`): limits divided over the instances, every other option kept.
@Suite struct LocalPolicyTests {
    @Test func theLocalPolicyDividesTheLimitsAndKeepsTheChoiceWhenFull() throws {
        let store = try PluginStore.shared(MemoryStore(), whenUnavailable: .local, instances: 2)
        let rate = try RateLimitOptions(count: 10, per: .seconds(1), burst: 3, whenFull: .refuse)
        guard case .rateLimit(let local) = try store.localPolicy(for: .rateLimit(rate)) else {
            Issue.record("not a rate limit")
            return
        }
        #expect(local.count == 5 && local.limit == 2 && local.period == .seconds(1))
        #expect(local.whenFull == .refuse)
        let throttle = try ThrottleOptions(interval: .seconds(1), trailing: true, whenFull: .remember)
        guard case .throttle(let localThrottle) = try store.localPolicy(for: .throttle(throttle)) else {
            Issue.record("not a throttle")
            return
        }
        #expect(localThrottle.interval == .seconds(2) && localThrottle.trailing)
        #expect(localThrottle.whenFull == .remember)
    }
}
