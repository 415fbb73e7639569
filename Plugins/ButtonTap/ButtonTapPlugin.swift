import Sluice
import Synchronization

/// Button taps: the first tap of a key in each window runs, the others in the window reply
/// `THROTTLED retry-after-ms=<n>` (a leading-only throttle per key).
///
/// `TAP <key>` → `OK tap=<n>`, where `n` counts this key's taps that ran.
public struct ButtonTapPlugin: GatePlugin {
    public let name = "tap"
    public let verb = "TAP"
    public let policy: GatePolicy
    /// Taps that ran, over all keys (`taps` in `STATS`).
    public let taps = PluginCounter("taps")
    private let perKey = TapTally()

    /// A plugin throttling each key to one tap per `window`.
    ///
    /// - Throws: `SluiceError` with code `invalidOption` when `window` is not positive.
    public init(window: Duration = ThrottleOptions.buttonTap.interval) throws(SluiceError) {
        policy = .throttle(try ThrottleOptions(interval: window, leading: true, trailing: false))
    }

    public func parse(_ arguments: Substring) throws(RequestError) -> String {
        guard let fields = RequestLine.fields(arguments, count: 1), let key = RequestLine.key(fields[0]) else {
            throw .usage
        }
        return key
    }

    public func key(for input: String) -> String { input }

    public func handle(_ input: String, context: EffectContext) async throws -> Int {
        taps.increment()
        return perKey.record(input)
    }

    public func reply(for output: Int) -> PluginReply {
        PluginReply("OK tap=\(output)")
    }

    public var counters: [PluginCounter] { [taps] }

    /// A tap's effect finishes at once: there is nothing for `CANCEL` to reach.
    public var isCancellable: Bool { false }
}

/// How many taps of each key ran.
final class TapTally: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    /// Counts one more tap of `key`; returns the new count.
    func record(_ key: String) -> Int {
        counts.withLock { counts in
            let next = counts[key, default: 0] + 1
            counts[key] = next
            return next
        }
    }
}
