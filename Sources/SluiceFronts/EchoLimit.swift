import SluiceCore

extension RateLimitOptions {
    /// The per-connection limit of the fronts' echo: at most `burst` requests back to back and
    /// `rate` per second (GCRA).
    ///
    /// - Throws: `SluiceError` with code `.invalidOption` when `rate` or `burst` is
    ///   below 1, or they make no valid limit.
    public static func echo(rate: Int, burst: Int) throws(SluiceError) -> RateLimitOptions {
        guard rate >= 1 else {
            throw SluiceError(code: .invalidOption, message: "the echo rate must be at least 1 per second", value: "\(rate)")
        }
        guard burst >= 1 else {
            throw SluiceError(code: .invalidOption, message: "the echo burst must be at least 1", value: "\(burst)")
        }
        do {
            // GCRA's burst counts the requests beyond the first (redis-cell's max_burst).
            return try RateLimitOptions(count: rate, per: .seconds(1), burst: burst - 1)
        } catch {
            throw SluiceError(code: .invalidOption, message: error.message, value: "\(rate)/s burst \(burst)")
        }
    }
}
