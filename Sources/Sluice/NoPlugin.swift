import SluiceCore

/// A plugin no gate runs: the type of "no lane to favour" in ``GateShard/performActions()``.
@usableFromInline
struct NoPlugin: GatePlugin {
    @usableFromInline let name = ""
    @usableFromInline let policy = GatePolicy.unrestricted

    @usableFromInline func key(for input: Void) -> String { "" }

    @usableFromInline func run(_ input: Void, context: EffectContext) async throws {}
}
