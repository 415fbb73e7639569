#if Hummingbird
import Sluice

/// Idempotency records registered in a `PluginRegistry`, which ``IdempotencyMiddleware``
/// keeps on a shared `Gate`: one record per key and `Idempotency-Key`, holding the first
/// request's response.
public struct IdempotencyRule: Sendable {
    /// The plugin the gate runs the chains with.
    let handle: PluginHandle<IdempotentResponsePlugin>
    /// The options.
    public let options: IdempotencyMiddlewareOptions

    /// Registers idempotency records named `name` in `plugins`.
    ///
    /// - Parameters:
    ///   - name: the plugin's name: 1–64 characters of `a–z 0–9 _ - .`, unique in the registry.
    ///   - options: retention, lease, duplicates in flight, whether the key is required, and
    ///     the body limits.
    ///   - store: where the records live (this process, or a shared store, which keeps the
    ///     stored responses as JSON).
    ///   - budget: the memory the records may hold in this process, split over the gate's
    ///     shards; when it is full, a new record is refused (503 `busy`) rather than an old one
    ///     evicted. `nil`: 256 MiB, each record counted at its largest (the stored body limit and
    ///     1 KiB of head), so that stored bodies cannot outgrow it: it holds budget ÷
    ///     (`storedBodyLimit` + 1 KiB) records, about 51,000 with the `.payment` preset (see
    ///     ``IdempotencyMiddlewareOptions/storedBodyLimit``).
    ///   - plugins: the registry the gate will be made from.
    /// - Throws: `SluiceError` when the name is malformed or taken, or an option is out of range.
    public init(
        name: String, options: IdempotencyMiddlewareOptions = .payment, store: PluginStore = .memory,
        budget: MemoryBudget? = nil, in plugins: inout PluginRegistry
    ) throws(SluiceError) {
        try RuleName.check(name)
        handle = try plugins.register(
            IdempotentResponsePlugin(name: name, options: try options.idempotencyOptions()),
            budget: budget ?? .bytes(256 << 20, extraBytesPerKey: options.storedBodyLimit + 1024), store: store)
        self.options = options
    }
}
#endif
