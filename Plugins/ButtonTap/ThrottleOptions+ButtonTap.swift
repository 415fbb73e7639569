import Sluice

extension ThrottleOptions {
    /// A button tap: leading only, one run per second; taps inside the second are dropped with a
    /// `retryAfter`.
    public static let buttonTap: ThrottleOptions = {
        // A literal positive interval: the initializer cannot refuse it.
        guard let options = try? ThrottleOptions(interval: .seconds(1)) else { preconditionFailure("a 1 s throttle is valid") }
        return options
    }()
}
