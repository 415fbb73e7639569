import SluiceCore

/// A shard's cancellation scopes (DESIGN §5) with the indexes the gate needs: the tree is
/// server → connection → key for connection-scoped effects (searches, taps) and server → key
/// for key-scoped ones (payments, which outlive their connection). `CANCEL <key>` finds every
/// scope named by the key; closing a connection closes its subtree.
struct ScopeBook {
    private(set) var tree = ScopeTree<String>()
    private var connectionScopes: [UInt64: ScopeID] = [:]
    private var connectionKeyScopes: [UInt64: [String: ScopeID]] = [:]
    private var rootKeyScopes: [String: ScopeID] = [:]
    private var scopesByKey: [String: [ScopeID]] = [:]
    private var scopeInfo: [ScopeID: ScopeInfo] = [:]

    private struct ScopeInfo {
        let key: String
        let connection: UInt64?
        var effects: Int
    }

    /// Registers a pending effect under `effectID` in the key's scope: below the connection's
    /// scope when `connection` is given, below the root otherwise. Scopes open on first use.
    mutating func register(effectID: String, key: String, connection: UInt64?) -> (scope: ScopeID, effect: EffectToken)? {
        let scope: ScopeID
        do {
            scope = try keyScope(key: key, connection: connection)
            let effect = try tree.register(id: effectID, in: scope)
            scopeInfo[scope]!.effects += 1
            return (scope, effect)
        } catch {
            return nil
        }
    }

    /// Marks a registered effect as started; `false` if a cancel reached it first.
    mutating func start(_ effect: EffectToken) -> Bool {
        tree.start(effect)
    }

    /// Cancels the effects registered under `id` in `scope` and below.
    mutating func cancel(id: String, in scope: ScopeID) -> [EffectToken] {
        tree.cancel(id: id, in: scope)
    }

    /// Cancels every effect in `scope` and below.
    mutating func cancelAll(in scope: ScopeID) -> [EffectToken] {
        tree.cancelAll(in: scope)
    }

    /// The effect ended: forgets it, and closes its key scope when that is now empty.
    mutating func finished(_ effect: EffectToken, in scope: ScopeID) {
        tree.finished(effect)
        guard var info = scopeInfo[scope] else { return }
        info.effects -= 1
        if info.effects > 0 {
            scopeInfo[scope] = info
            return
        }
        _ = tree.close(scope)
        forget(scope, info)
    }

    /// Every open scope named by `key` (connection-scoped and key-scoped).
    func scopes(forKey key: String) -> [ScopeID] {
        scopesByKey[key] ?? []
    }

    /// Closes a connection's scope and everything below it; returns the effects it cancelled.
    mutating func closeConnection(_ connection: UInt64) -> [EffectToken] {
        guard let scope = connectionScopes.removeValue(forKey: connection) else { return [] }
        let cancelled = tree.close(scope)
        for (_, keyScope) in connectionKeyScopes.removeValue(forKey: connection) ?? [:] {
            if let info = scopeInfo[keyScope] { forget(keyScope, info) }
        }
        return cancelled
    }

    private mutating func keyScope(key: String, connection: UInt64?) throws(SluiceError) -> ScopeID {
        if let connection {
            if let scope = connectionKeyScopes[connection]?[key] { return scope }
            let parent: ScopeID
            if let existing = connectionScopes[connection] {
                parent = existing
            } else {
                parent = try tree.openScope(in: tree.root)
                connectionScopes[connection] = parent
            }
            let scope = try tree.openScope(in: parent)
            connectionKeyScopes[connection, default: [:]][key] = scope
            remember(scope, ScopeInfo(key: key, connection: connection, effects: 0))
            return scope
        }
        if let scope = rootKeyScopes[key] { return scope }
        let scope = try tree.openScope(in: tree.root)
        rootKeyScopes[key] = scope
        remember(scope, ScopeInfo(key: key, connection: nil, effects: 0))
        return scope
    }

    private mutating func remember(_ scope: ScopeID, _ info: ScopeInfo) {
        scopeInfo[scope] = info
        scopesByKey[info.key, default: []].append(scope)
    }

    private mutating func forget(_ scope: ScopeID, _ info: ScopeInfo) {
        scopeInfo[scope] = nil
        if var list = scopesByKey[info.key] {
            list.removeAll { $0 == scope }
            scopesByKey[info.key] = list.isEmpty ? nil : list
        }
        if let connection = info.connection {
            connectionKeyScopes[connection]?[info.key] = nil
        } else {
            rootKeyScopes[info.key] = nil
        }
    }
}
