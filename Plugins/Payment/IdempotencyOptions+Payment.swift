import Sluice

extension IdempotencyOptions {
    /// Payments: records kept 24 hours, a 30 s lease, duplicates join the running charge, and
    /// declined charges are replayed like successful ones.
    public static let payment: IdempotencyOptions = {
        // Literal positive periods: valid.
        guard
            let options = try? IdempotencyOptions(
                retention: .seconds(24 * 60 * 60), lease: .seconds(30), concurrent: .join, cacheErrors: true)
        else { preconditionFailure("a 24 h retention with a 30 s lease is valid") }
        return options
    }()
}
