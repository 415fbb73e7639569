import SluiceLibevent

/// A request on its way to the gate: the plugin, the typed input, and what the gate computed
/// from it (the key and the loop that owns it), with the effect ID and scope it runs under.
///
/// Make one with ``Gate/request(_:_:id:in:)``; submit it from any task with
/// ``Gate/submit(_:)``, or from any thread without suspending with ``Gate/submitNow(_:later:)``.
public struct GateRequest<Plugin: GatePlugin>: Sendable {
    /// The plugin.
    public let plugin: PluginHandle<Plugin>
    /// The input.
    public let input: Plugin.Input
    /// The key (``GatePlugin/key(for:)`` of the input).
    public let key: String
    /// The effect ID it runs under.
    public let effectID: EffectID
    /// The scope its caller waits in.
    public let scope: GateScope
    /// The loop of the shard that owns the key: it drives the key's timers and runs its effects'
    /// tasks (a decision runs on the caller's thread).
    public let loop: SluiceLoop
    /// The shard that owns the key.
    @usableFromInline let shardIndex: Int

    @inlinable
    init(
        plugin: PluginHandle<Plugin>, input: Plugin.Input, key: String, effectID: EffectID, scope: GateScope,
        loop: SluiceLoop, shardIndex: Int
    ) {
        self.plugin = plugin
        self.input = input
        self.key = key
        self.effectID = effectID
        self.scope = scope
        self.loop = loop
        self.shardIndex = shardIndex
    }
}
