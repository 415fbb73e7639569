/// Parses a duration option: a number with an optional unit `ms`, `s` (default), `m` or `h`,
/// e.g. `10`, `2.5s`, `500ms`, `1m`. Must be positive.
public func parseDuration(_ text: String) throws(LoadError) -> Duration {
    let lower = text.lowercased()
    let units: [(suffix: String, nanoseconds: Double)] = [
        ("ms", 1e6), ("s", 1e9), ("m", 60e9), ("h", 3600e9),
    ]
    var number = Substring(lower)
    var scale = 1e9
    for unit in units where lower.hasSuffix(unit.suffix) {
        number = lower.dropLast(unit.suffix.count)
        scale = unit.nanoseconds
        break
    }
    guard let value = Double(number), value.isFinite, value > 0 else {
        throw LoadError("a duration must be a positive number with an optional unit ms, s, m or h", input: text)
    }
    let nanoseconds = value * scale
    guard nanoseconds < 1e18 else { throw LoadError("duration too long", input: text) }
    return .nanoseconds(Int64(nanoseconds))
}
