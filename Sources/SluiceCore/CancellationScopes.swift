/// Names a node of a ``ScopeTree`` (the server, a connection or session, …).
public struct ScopeID: Hashable, Sendable, CustomStringConvertible {
    /// The tree's number for the scope (64 bits: a long-running server never wraps it).
    public var rawValue: UInt64

    /// A scope ID with the given number.
    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public var description: String { "scope#\(rawValue)" }
}

/// Names one registered effect in a ``ScopeTree``.
public struct EffectToken: Hashable, Sendable, CustomStringConvertible {
    /// The number of the effect.
    public var rawValue: UInt64

    /// An effect token with the given number.
    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public var description: String { "effect#\(rawValue)" }
}

/// Cancellation scopes that mirror effect IDs: pure bookkeeping.
///
/// Scopes form a tree (server → connection or session → …). An effect is registered under
/// `(scope, key, id)` *before* its task starts, and the task calls ``start(_:)`` first thing: if a
/// cancellation reached it in between, `start` answers `false` and the effect does not run — a
/// cancel that arrives before the effect started still wins. Effects can be cancelled by ID in a
/// scope and everything below it (``cancel(id:in:)``), all at once in a subtree
/// (``cancelAll(in:)``, ``close(_:removedScope:)``), or by key across every scope
/// (``cancel(id:key:)``). Cancelling returns tokens; the runtime turns them into `Task`
/// cancellations. Every registered token must eventually be reported through
/// ``finished(_:removedScope:)``.
///
/// The lists are intrusive (each effect links to its neighbours in its scope and under its key),
/// kept in dictionaries keyed by token, scope and key: registering and finishing an effect
/// allocates nothing once the dictionaries have grown to the working set.
public struct ScopeTree<Key: Hashable, EffectID: Hashable> {
    /// The lifecycle of one effect.
    public enum EffectState: Hashable, Sendable {
        /// Registered, its task not yet started.
        case pending
        /// Started and not cancelled.
        case running
        /// Cancelled (before or after it started).
        case cancelled
    }

    @usableFromInline
    struct Scope {
        @usableFromInline var parent: ScopeID?
        @usableFromInline var firstChild: ScopeID?
        @usableFromInline var previousSibling: ScopeID?
        @usableFromInline var nextSibling: ScopeID?
        @usableFromInline var firstEffect: EffectToken?
        @usableFromInline let removeWhenEmpty: Bool

        @inlinable
        init(removeWhenEmpty: Bool) {
            self.removeWhenEmpty = removeWhenEmpty
        }

        @inlinable
        var isEmpty: Bool { firstChild == nil && firstEffect == nil }
    }

    @usableFromInline
    struct Effect {
        /// `nil` once its scope has been closed.
        @usableFromInline var scope: ScopeID?
        @usableFromInline let key: Key
        @usableFromInline let id: EffectID
        @usableFromInline var state: EffectState
        @usableFromInline let tag: UInt32
        @usableFromInline var previousInScope: EffectToken?
        @usableFromInline var nextInScope: EffectToken?
        @usableFromInline var previousForKey: EffectToken?
        @usableFromInline var nextForKey: EffectToken?

        @inlinable
        init(
            scope: ScopeID?, key: Key, id: EffectID, state: EffectState, tag: UInt32,
            previousInScope: EffectToken?, nextInScope: EffectToken?,
            previousForKey: EffectToken?, nextForKey: EffectToken?
        ) {
            self.scope = scope
            self.key = key
            self.id = id
            self.state = state
            self.tag = tag
            self.previousInScope = previousInScope
            self.nextInScope = nextInScope
            self.previousForKey = previousForKey
            self.nextForKey = nextForKey
        }
    }

    @usableFromInline var scopes = SlotTable<ScopeID, Scope>()
    @usableFromInline var effects = SlotTable<EffectToken, Effect>()
    @usableFromInline var keyHeads: [Key: EffectToken] = [:]
    @usableFromInline var nextScope: UInt64 = 1
    @usableFromInline var nextToken: UInt64 = 1

    /// The root scope (the server); it exists until closed.
    public let root = ScopeID(rawValue: 0)

    /// A tree holding only the root scope.
    @inlinable
    public init() {
        scopes.set(Scope(removeWhenEmpty: false), for: ScopeID(rawValue: 0))
    }

    /// Whether `scope` is open.
    @inlinable
    public func isOpen(_ scope: ScopeID) -> Bool {
        scopes.contains(scope)
    }

    /// The number of open scopes.
    public var scopeCount: Int { scopes.count }

    /// The number of effects registered and not yet finished.
    public var effectCount: Int { effects.count }

    /// The state of an effect, or `nil` once it has finished (or was never registered).
    @inlinable
    public func state(of token: EffectToken) -> EffectState? {
        effects[token]?.state
    }

    /// Whether the effect has been cancelled (and has not yet finished).
    @inlinable
    public func isCancelled(_ token: EffectToken) -> Bool {
        effects[token]?.state == .cancelled
    }

    /// The tag given when the effect was registered.
    @inlinable
    public func tag(of token: EffectToken) -> UInt32? {
        effects[token]?.tag
    }

    /// The key the effect was registered under.
    @inlinable
    public func key(of token: EffectToken) -> Key? {
        effects[token]?.key
    }

    /// The effect's ID.
    @inlinable
    public func id(of token: EffectToken) -> EffectID? {
        effects[token]?.id
    }

    /// The scope the effect is registered in, or `nil` once that scope has been closed.
    @inlinable
    public func scope(of token: EffectToken) -> ScopeID? {
        effects[token]?.scope
    }

    /// Opens a child scope of `parent`.
    ///
    /// - Parameter parent: the scope the new one opens in.
    /// - Parameter removeWhenEmpty: the scope closes by itself once it holds no effect and no
    ///   child scope (reported through ``finished(_:removedScope:)``): for scopes that mirror
    ///   something living elsewhere and can be opened again when needed.
    /// - Throws: ``SluiceError/Code/unknownScope`` if `parent` is closed.
    @inlinable
    public mutating func openScope(in parent: ScopeID, removeWhenEmpty: Bool = false) throws(SluiceError) -> ScopeID {
        guard scopes.contains(parent) else { throw Self.unknown(parent) }
        let scope = ScopeID(rawValue: nextScope)
        nextScope &+= 1
        var node = Scope(removeWhenEmpty: removeWhenEmpty)
        node.parent = parent
        node.nextSibling = scopes[parent]?.firstChild
        if let sibling = node.nextSibling { scopes.update(sibling) { $0.previousSibling = scope } }
        scopes.update(parent) { $0.firstChild = scope }
        scopes.set(node, for: scope)
        return scope
    }

    /// Registers a pending effect under `id` and `key` in `scope`, numbered by the tree.
    ///
    /// - Throws: ``SluiceError/Code/unknownScope`` if `scope` is closed.
    @inlinable
    public mutating func register(id: EffectID, key: Key, in scope: ScopeID, tag: UInt32 = 0) throws(SluiceError) -> EffectToken {
        let token = EffectToken(rawValue: nextToken)
        try register(token, id: id, key: key, in: scope, tag: tag)
        nextToken &+= 1
        return token
    }

    /// Registers a pending effect with a token the caller numbered (unique among the effects
    /// not yet finished).
    ///
    /// - Throws: ``SluiceError/Code/unknownScope`` if `scope` is closed.
    @inlinable
    public mutating func register(_ token: EffectToken, id: EffectID, key: Key, in scope: ScopeID, tag: UInt32 = 0) throws(SluiceError) {
        // The scope's head becomes this effect; `nil` when the scope is closed.
        guard let nextInScope = scopes.update(scope, { node -> EffectToken? in
            defer { node.firstEffect = token }
            return node.firstEffect
        }) else { throw Self.unknown(scope) }
        assert(!effects.contains(token), "ScopeTree.register: \(token) is already registered")
        let nextForKey = keyHeads.updateValue(token, forKey: key)
        if let nextForKey { effects.update(nextForKey) { $0.previousForKey = token } }
        if let nextInScope { effects.update(nextInScope) { $0.previousInScope = token } }
        effects.set(
            Effect(
                scope: scope, key: key, id: id, state: .pending, tag: tag,
                previousInScope: nil, nextInScope: nextInScope,
                previousForKey: nil, nextForKey: nextForKey),
            for: token)
    }

    /// Called by the effect's task before it does anything.
    ///
    /// - Returns: `true` if the effect may run; `false` if it was cancelled before it started (or is
    ///   unknown): the task must not run it, and still reports ``finished(_:removedScope:)``.
    @inlinable
    public mutating func start(_ token: EffectToken) -> Bool {
        guard effects[token]?.state == .pending else { return false }
        effects.update(token) { $0.state = .running }
        return true
    }

    /// Cancels every effect registered under `id` in `scope` and in all scopes below it.
    ///
    /// - Returns: the effects cancelled by this call (pending and running), in token order.
    ///   Pending ones will refuse to ``start(_:)``; running ones need their task cancelled.
    @inlinable
    public mutating func cancel(id: EffectID, in scope: ScopeID) -> [EffectToken] {
        cancel(in: scope) { $0.id == id }
    }

    /// Cancels every effect in `scope` and below, whatever its ID; the scopes stay open.
    @inlinable
    public mutating func cancelAll(in scope: ScopeID) -> [EffectToken] {
        cancel(in: scope) { _ in true }
    }

    /// Cancels the effects registered under `key` with this `id` (every ID when `nil`), in
    /// whatever scope they live.
    ///
    /// - Returns: the effects cancelled by this call, in token order.
    @inlinable
    public mutating func cancel(id: EffectID?, key: Key) -> [EffectToken] {
        var cancelled: [EffectToken] = []
        var cursor = keyHeads[key]
        while let token = cursor, let effect = effects[token] {
            cursor = effect.nextForKey
            if effect.state != .cancelled, id == nil || effect.id == id {
                effects.update(token) { $0.state = .cancelled }
                cancelled.append(token)
            }
        }
        return cancelled.sorted { $0.rawValue < $1.rawValue }
    }

    /// The effects registered under `key` and not yet finished, in token order.
    @inlinable
    public func effects(forKey key: Key) -> [EffectToken] {
        var tokens: [EffectToken] = []
        var cursor = keyHeads[key]
        while let token = cursor, let effect = effects[token] {
            tokens.append(token)
            cursor = effect.nextForKey
        }
        return tokens.sorted { $0.rawValue < $1.rawValue }
    }

    /// Closes `scope` and every scope below it, cancelling their effects (a connection closed).
    /// The effects stay registered (outside any scope) until they report
    /// ``finished(_:removedScope:)``.
    ///
    /// - Parameter scope: the scope to close.
    /// - Parameter removedScope: called for every scope that closes, `scope` and its descendants
    ///   first, then ancestors that closed by themselves because they became empty.
    /// - Returns: the effects cancelled by this call, in token order.
    @inlinable
    public mutating func close(_ scope: ScopeID, removedScope: (ScopeID) -> Void = { _ in }) -> [EffectToken] {
        guard let node = scopes[scope] else { return [] }
        let doomed = subtree(of: scope)
        var cancelled: [EffectToken] = []
        for member in doomed {
            var cursor = scopes[member]?.firstEffect
            while let token = cursor, let effect = effects[token] {
                cursor = effect.nextInScope
                if effect.state != .cancelled {
                    effects.update(token) { $0.state = .cancelled }
                    cancelled.append(token)
                }
                effects.update(token) { effect in
                    effect.scope = nil
                    effect.previousInScope = nil
                    effect.nextInScope = nil
                }
            }
        }
        unlinkChild(scope, node)
        for member in doomed {
            scopes.remove(member)
            removedScope(member)
        }
        if let parent = node.parent { removeIfEmpty(parent, removedScope) }
        return cancelled.sorted { $0.rawValue < $1.rawValue }
    }

    /// The effect ended (completed, failed, cancelled, or refused to start): forget it.
    ///
    /// - Parameter token: the effect that ended.
    /// - Parameter removedScope: called for each scope that closed by itself because this was
    ///   its last effect (scopes opened with `removeWhenEmpty`).
    @inlinable
    public mutating func finished(_ token: EffectToken, removedScope: (ScopeID) -> Void = { _ in }) {
        guard let effect = effects.remove(token) else { return }
        if let previous = effect.previousForKey {
            effects.update(previous) { $0.nextForKey = effect.nextForKey }
        } else if let next = effect.nextForKey {
            keyHeads[effect.key] = next
        } else {
            keyHeads[effect.key] = nil
        }
        if let next = effect.nextForKey { effects.update(next) { $0.previousForKey = effect.previousForKey } }
        guard let scope = effect.scope else { return }
        if let next = effect.nextInScope { effects.update(next) { $0.previousInScope = effect.previousInScope } }
        if let previous = effect.previousInScope {
            effects.update(previous) { $0.nextInScope = effect.nextInScope }
        } else if scopes.update(scope, { node -> Bool in
            node.firstEffect = effect.nextInScope
            return node.removeWhenEmpty && node.isEmpty
        }) == true {
            // Its last effect: the scope closes by itself (and maybe its ancestors).
            removeIfEmpty(scope, removedScope)
        }
    }

    // MARK: - Walking

    /// `scope` and every scope below it.
    @usableFromInline
    func subtree(of scope: ScopeID) -> [ScopeID] {
        // Iterative depth-first walk (a deep tree must not overflow the stack).
        guard scopes.contains(scope) else { return [] }
        var visited: [ScopeID] = []
        var stack = [scope]
        while let node = stack.popLast() {
            visited.append(node)
            var child = scopes[node]?.firstChild
            while let current = child {
                stack.append(current)
                child = scopes[current]?.nextSibling
            }
        }
        return visited
    }

    @usableFromInline
    mutating func cancel(in scope: ScopeID, where matches: (Effect) -> Bool) -> [EffectToken] {
        var cancelled: [EffectToken] = []
        for member in subtree(of: scope) {
            var cursor = scopes[member]?.firstEffect
            while let token = cursor, let effect = effects[token] {
                cursor = effect.nextInScope
                if effect.state != .cancelled, matches(effect) {
                    effects.update(token) { $0.state = .cancelled }
                    cancelled.append(token)
                }
            }
        }
        return cancelled.sorted { $0.rawValue < $1.rawValue }
    }

    @usableFromInline
    mutating func unlinkChild(_ scope: ScopeID, _ node: Scope) {
        if let previous = node.previousSibling {
            scopes.update(previous) { $0.nextSibling = node.nextSibling }
        } else if let parent = node.parent {
            scopes.update(parent) { $0.firstChild = node.nextSibling }
        }
        if let next = node.nextSibling { scopes.update(next) { $0.previousSibling = node.previousSibling } }
    }

    /// Closes `scope` and then its ancestors while each is an empty `removeWhenEmpty` scope.
    @usableFromInline
    mutating func removeIfEmpty(_ scope: ScopeID, _ removedScope: (ScopeID) -> Void) {
        var current = scope
        while let node = scopes[current], node.removeWhenEmpty, node.isEmpty {
            unlinkChild(current, node)
            scopes.remove(current)
            removedScope(current)
            guard let parent = node.parent else { return }
            current = parent
        }
    }

    @usableFromInline
    static func unknown(_ scope: ScopeID) -> SluiceError {
        SluiceError(code: .unknownScope, message: "The scope is closed or was never opened.", value: scope.description)
    }
}

extension ScopeTree: Sendable where Key: Sendable, EffectID: Sendable {}
extension ScopeTree.Scope: Sendable {}
extension ScopeTree.Effect: Sendable where Key: Sendable, EffectID: Sendable {}
