/// The names of policies and stages: what they are called in replies and in the draft-11
/// `RateLimit-Policy` and `RateLimit` fields (an sf-string), so 1–64 characters of
/// `a–z 0–9 _ - .`.
public enum PolicyName {
    /// Whether `name` is 1–64 characters of `a–z 0–9 _ - .`.
    @inlinable
    public static func isValid(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy {
                ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F || $0 == 0x2D || $0 == 0x2E
            }
    }
}
