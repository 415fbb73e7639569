#if Hummingbird
import Sluice
import SluiceCore

/// The names of the middleware rules: plugin names that are also sf-string policy names.
enum RuleName {
    /// Throws unless `name` is 1–64 characters of `a–z 0–9 _ - .` (what `RateLimitFields`
    /// accepts as a policy name).
    static func check(_ name: String) throws(SluiceError) {
        guard PolicyName.isValid(name) else {
            throw SluiceError(code: .invalidPlugin, message: "a rule name is 1 to 64 characters of a-z 0-9 _ - .", value: name)
        }
    }
}
#endif
