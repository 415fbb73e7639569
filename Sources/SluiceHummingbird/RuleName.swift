#if Hummingbird
import Sluice

/// The names of the middleware rules: plugin names that are also sf-string policy names.
enum RuleName {
    /// Throws unless `name` is 1–64 characters of `a–z 0–9 _ - .` (what `RateLimitFields`
    /// accepts as a policy name).
    static func check(_ name: String) throws(GateError) {
        guard (1...64).contains(name.utf8.count),
            name.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F || $0 == 0x2D || $0 == 0x2E })
        else {
            throw GateError(code: .invalidPlugin, message: "a rule name is 1 to 64 characters of a-z 0-9 _ - .", value: name)
        }
    }
}
#endif
