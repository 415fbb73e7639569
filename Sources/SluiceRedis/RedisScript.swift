/// A Lua script the store runs with `EVALSHA` (by its SHA-1), falling back to `EVAL` — which
/// loads it again — when Redis answers `NOSCRIPT` (after a restart or `SCRIPT FLUSH`).
struct RedisScript: Sendable {
    /// The script's text.
    let source: String
    /// Its SHA-1, as Redis names it.
    let sha: String

    init(_ source: String) {
        self.source = source
        self.sha = SHA1.hex(source)
    }

    /// The `EVALSHA` command for `keys` and `arguments`.
    func evalsha(keys: [[UInt8]], arguments: [[UInt8]]) -> [[UInt8]] {
        [Array("EVALSHA".utf8), Array(sha.utf8), Array(String(keys.count).utf8)] + keys + arguments
    }

    /// The `EVAL` command, which runs the script and loads it.
    func eval(keys: [[UInt8]], arguments: [[UInt8]]) -> [[UInt8]] {
        [Array("EVAL".utf8), Array(source.utf8), Array(String(keys.count).utf8)] + keys + arguments
    }
}
