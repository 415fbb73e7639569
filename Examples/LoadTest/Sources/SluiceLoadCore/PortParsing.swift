/// Parses a `--port` value: one port, or a comma-separated list of ports (`7000,7001,7002`), one
/// per `sluice-echo` instance. Spaces around an entry are ignored. Every entry must be a decimal
/// number in 1…65535 and appear once.
///
/// - Throws: ``LoadError`` naming the offending entry (or the whole list, for an empty entry).
public func parsePortList(_ text: String) throws(LoadError) -> [Int] {
    var ports: [Int] = []
    let entries = text.split(separator: ",", omittingEmptySubsequences: false)
    for (position, entry) in entries.enumerated() {
        let trimmed = entry.trimmingSpaces
        guard !trimmed.isEmpty else {
            let which = entries.count == 1 ? "no port given" : "entry \(position + 1) of the list is empty"
            throw LoadError("--port: \(which) (use a port or a comma-separated list such as 7000,7001)", input: text)
        }
        guard trimmed.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw LoadError("--port: not a port number", input: String(trimmed))
        }
        // Digits only: an overlong number does not fit an Int and is out of range as well.
        guard let port = Int(trimmed), (1...65535).contains(port) else {
            throw LoadError("--port must be 1...65535", input: String(trimmed))
        }
        guard !ports.contains(port) else {
            throw LoadError("--port: port listed twice", input: String(trimmed))
        }
        ports.append(port)
    }
    return ports
}
