import SluiceLibevent

/// A request on its way to the gate: the plugin, the typed input, and what the gate computed
/// from it (the key and the shard that owns it), with the effect ID and scope it runs under.
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
    /// The effect ID its caller named, or `nil` for the plugin's own.
    ///
    /// Kept apart from the plugin's, so that a request under its plugin's ID (most are) holds
    /// one reference fewer: making, copying and dropping a request each cost an atomic
    /// reference count operation per reference it holds.
    @usableFromInline let namedEffectID: EffectID?
    /// The scope its caller waits in.
    public let scope: GateScope
    /// The shard that owns the key (whose loop drives the key's timers and runs its effects'
    /// tasks; a decision runs on the caller's thread).
    @usableFromInline let shardIndex: Int

    /// The effect ID it runs under: the one its caller named, or the plugin's
    /// (``PluginHandle/effectID``).
    @inlinable
    public var effectID: EffectID { namedEffectID ?? plugin.effectID }

    @inlinable
    init(
        plugin: PluginHandle<Plugin>, input: Plugin.Input, key: String, effectID: EffectID?, scope: GateScope,
        shardIndex: Int
    ) {
        self.plugin = plugin
        self.input = input
        self.key = key
        self.namedEffectID = effectID
        self.scope = scope
        self.shardIndex = shardIndex
    }
}
