import SluiceCore
import Synchronization

/// The plugins a ``Gate`` runs, in registration order.
///
/// ```swift
/// var plugins = PluginRegistry()
/// let tap = try plugins.register(ButtonTapPlugin(), budget: .bytes(64 << 20))
/// let gate = try Gate(group: group, plugins: plugins)
/// let outcome = await gate.submit(tap, "user42")
/// ```
public struct PluginRegistry: Sendable {
    let identity = RegistryIdentity()
    private(set) var plugins: [RegisteredPlugin] = []

    /// An empty registry.
    public init() {}

    /// Adds a plugin.
    ///
    /// - Parameters:
    ///   - plugin: the plugin; its name must be unique in the registry.
    ///   - budget: the memory its per-key state may hold, split evenly over the gate's shards:
    ///     its policy table with the keys' own bytes, plus the side state of waiting and running
    ///     requests (held requests, timers, joined callers).
    ///   - tallyBudget: the memory of its per-key tallies (``EffectContext/incrementTally(by:)``),
    ///     split the same way; the table is created on first use.
    ///   - store: where its policy's state lives: this process's memory (the default), or a
    ///     ``SharedStore`` several instances share (see ``PluginStore``).
    /// - Returns: the handle to submit requests with.
    /// - Throws: `SluiceError` with code `.duplicatePlugin` when the name is taken,
    ///   `.invalidPlugin` for an empty or malformed name, `.invalidOption` when a
    ///   shared store cannot hold the plugin's policy (see ``PluginStore``), or `.registryInUse`
    ///   once a gate was made from the registry (it would not know the plugin).
    @discardableResult
    public mutating func register<Plugin: GatePlugin>(
        _ plugin: Plugin,
        budget: MemoryBudget = .bytes(16 << 20),
        tallyBudget: MemoryBudget = .bytes(4 << 20),
        store: PluginStore = .memory
    ) throws(SluiceError) -> PluginHandle<Plugin> {
        let name = plugin.name
        if identity.isInUse {
            throw SluiceError(
                code: .registryInUse,
                message: "a gate was made from this registry already and would not know the plugin: register every plugin before making the gate",
                value: name)
        }
        guard !name.isEmpty, name.utf8.count <= 64, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw SluiceError(code: .invalidPlugin, message: "a plugin name is 1 to 64 visible ASCII characters", value: name)
        }
        if plugins.contains(where: { $0.name == name }) {
            throw SluiceError(code: .duplicatePlugin, message: "a plugin with this name is registered", value: name)
        }
        if store.shared != nil {
            switch plugin.policy {
            case .throttle(let options) where options.leading && !options.trailing:
                break
            case .rateLimit:
                break
            case .idempotent:
                guard StoredResult.canStore(Plugin.Output.self) else {
                    throw SluiceError(
                        code: .invalidOption,
                        message: "an idempotent plugin on a shared store needs a Codable output (the store keeps its results)",
                        value: name)
                }
            default:
                throw SluiceError(
                    code: .invalidOption,
                    message: "a shared store holds leading throttles, rate limits and idempotency records only",
                    value: "\(name): \(plugin.policy)")
            }
        }
        _ = try store.localPolicy(for: plugin.policy)
        let handle = PluginHandle(plugin: plugin, index: plugins.count, registry: identity)
        plugins.append(RegisteredPlugin(handle: handle, budget: budget, tallyBudget: tallyBudget, store: store))
        return handle
    }

    /// The registered plugins' names, in order.
    public var names: [String] { plugins.map(\.name) }
}

/// A plugin registered in a ``PluginRegistry``: what requests are submitted with, typed by the
/// plugin's input and output. Copying a handle copies one reference.
public struct PluginHandle<Plugin: GatePlugin>: Sendable {
    @usableFromInline let storage: PluginHandleStorage<Plugin>

    init(plugin: Plugin, index: Int, registry: RegistryIdentity) {
        storage = PluginHandleStorage(plugin: plugin, index: index, registry: registry)
    }

    /// The plugin.
    @inlinable
    public var plugin: Plugin { storage.plugin }

    /// Its position in the registry.
    @inlinable
    public var index: Int { storage.index }

    /// The effect ID its requests use unless the caller names another: the plugin's name.
    @inlinable
    public var effectID: EffectID { storage.effectID }

    /// The plugin's name.
    public var name: String { storage.plugin.name }

    @inlinable
    var registry: RegistryIdentity { storage.registry }
}

/// What a ``PluginHandle`` refers to.
@usableFromInline
final class PluginHandleStorage<Plugin: GatePlugin>: Sendable {
    @usableFromInline let plugin: Plugin
    @usableFromInline let index: Int
    @usableFromInline let effectID: EffectID
    @usableFromInline let registry: RegistryIdentity

    init(plugin: Plugin, index: Int, registry: RegistryIdentity) {
        self.plugin = plugin
        self.index = index
        self.effectID = EffectID(plugin.name)
        self.registry = registry
    }
}

/// Tells registries apart, so a handle from one cannot be used with a gate built from another,
/// and remembers that a gate was made from its registry (which then takes no more plugins).
@usableFromInline
final class RegistryIdentity: Sendable {
    private let inUse = Atomic<Bool>(false)

    /// Whether a gate was made from the registry.
    var isInUse: Bool { inUse.load(ordering: .acquiring) }

    /// A gate is made from the registry.
    func markInUse() {
        inUse.store(true, ordering: .releasing)
    }
}

/// A plugin with its types erased, as the gate stores it.
struct RegisteredPlugin: Sendable {
    let name: String
    let policy: GatePolicy
    let budget: MemoryBudget
    let tallyBudget: MemoryBudget
    /// The stages of its limits (``GatePlugin/limits``).
    let limitStages: [ChainStage]
    /// Makes the plugin's state for one shard, with what all its shards share: the watch over its
    /// store's epochs and its limits' tables.
    let makeLane: @Sendable (_ shardCount: Int, _ epochWatch: StoreEpochWatch, _ limits: PluginLimits) throws(SluiceError) -> any GateLane

    init<Plugin: GatePlugin>(
        handle: PluginHandle<Plugin>, budget: MemoryBudget, tallyBudget: MemoryBudget, store: PluginStore
    ) {
        self.name = handle.plugin.name
        self.policy = handle.plugin.policy
        self.budget = budget
        self.tallyBudget = tallyBudget
        self.limitStages = handle.plugin.limits.map(\.stage)
        // One watch over the store's epochs for all the plugin's shards (made again for each
        // gate made from the registry).
        self.makeLane = {
            (shardCount: Int, epochWatch: StoreEpochWatch, limits: PluginLimits) throws(SluiceError) -> any GateLane in
            try PluginLane(
                handle: handle, budget: budget.divided(by: shardCount), tallyBudget: tallyBudget.divided(by: shardCount),
                store: store, epochWatch: epochWatch, limits: limits)
        }
    }
}

extension MemoryBudget {
    /// This budget split evenly over `parts` shards.
    func divided(by parts: Int) -> MemoryBudget {
        MemoryBudget(
            entries: entries.map { max(1, $0 / parts) },
            bytes: bytes.map { max(1, $0 / parts) },
            extraBytesPerKey: extraBytesPerKey)
    }
}
