import SluiceCore

// The options the decisions are measured with: the presets of the built-in plugins
// (SluiceButtonTap, SluiceSearch, SluicePayment), restated here so that these benchmarks need
// SluiceCore alone, and a per-connection echo limit.
extension ThrottleOptions {
    static let buttonTap = try! ThrottleOptions(interval: .seconds(1))
}

extension DebounceOptions {
    static let search = try! DebounceOptions(quiet: .milliseconds(100), maxWait: .seconds(1))
}

extension RateLimitOptions {
    static let perConnectionEcho = try! RateLimitOptions(count: 100, per: .seconds(1), burst: 20)
}

extension IdempotencyOptions {
    static let payment = try! IdempotencyOptions(
        retention: .seconds(24 * 60 * 60), lease: .seconds(30), concurrent: .join, cacheErrors: true)
}
