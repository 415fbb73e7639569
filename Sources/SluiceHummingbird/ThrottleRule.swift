#if Hummingbird
import Sluice
import SluiceHTTP

/// A throttle registered in a `PluginRegistry` (the first request of each window per key runs,
/// the others are refused), which ``ThrottleMiddleware`` decides with on a shared `Gate`.
public struct ThrottleRule: Sendable {
    /// The plugin the gate decides with.
    let handle: PluginHandle<KeyThrottlePlugin>
    /// The fields of the rule: `RateLimit-Policy: "<name>";q=1;w=<window>`.
    public let fields: RateLimitFields
    /// The window.
    public let window: Duration

    /// Registers a throttle named `name` in `plugins`: one request per `window` per key.
    ///
    /// - Parameters:
    ///   - name: the plugin's name and the policy's name in the fields: 1–64 characters of
    ///     `a–z 0–9 _ - .`, unique in the registry.
    ///   - window: the window; a key's first request in it wins.
    ///   - store: where the throttle's state lives (this process, or a shared store).
    ///   - plugins: the registry the gate will be made from.
    /// - Throws: `GateError` when the name is malformed or taken, the window is not positive,
    ///   or the store cannot hold the throttle.
    public init(name: String, window: Duration, store: PluginStore = .memory, in plugins: inout PluginRegistry) throws(GateError) {
        try RuleName.check(name)
        let options: ThrottleOptions
        do {
            options = try ThrottleOptions(interval: window, leading: true, trailing: false)
        } catch {
            throw GateError(code: .invalidConfiguration, message: error.message, value: error.value)
        }
        handle = try plugins.register(KeyThrottlePlugin(name: name, options: options), store: store)
        fields = .throttle(name: name, window: window)
        self.window = window
    }
}
#endif
