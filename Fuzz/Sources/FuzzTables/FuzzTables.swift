import FuzzModels
import FuzzSupport
import SluiceCore

// fuzz-tables: the bookkeeping structures under the policies. The first byte picks one:
//
// 0. `KeyTable` with an entry budget (capacity 1–10, evicting or refusing), Int keys, against a
//    naive clock table (the model of the project's property tests: the storage order, visited
//    bits, the clock hand and the sweep's cursor, searched linearly): lookups (with lazy expiry),
//    inserts, removals, touches, partial and full sweeps, side-state charges and releases.
//    Storage order, visited bits, values, evictions, refusals and counters match; a sweep drops
//    only idle entries; charges are bounded by `chargeLimit(capacity:)`.
// 1. `KeyTable` with a byte budget, String keys short and long (a long key's heap bytes count):
//    the bytes used never exceed the budget, the count never exceeds the capacity, only idle
//    keys vanish unless evicted, evictions take live keys and only in an evicting table, the key
//    looked up is held afterwards, and a refused key leaves every live key in place (the
//    evictions a refusal makes are never reported to the caller).
// 2. `SlotTable` against a `Dictionary`: sets, in-place updates, removals, reads.
// 3. `ScopeTree` against a naive model (a parent array and a flat list of effects; "in the
//    subtree" decided by walking parents): opening scopes (some closing by themselves when
//    empty), registering effects (numbered by the tree or by the caller), starting, cancelling
//    by ID in a subtree, all in a subtree, by key across scopes, closing scopes, finishing
//    effects; every answer, the scopes reported closed, and every effect's state, tag, key, ID
//    and scope match.

// MARK: - Entry-budget KeyTable

struct Expiring: KeyedState, Hashable {
    var value: Int
    var expiresAt: Int64
    func isIdle(at now: Instant) -> Bool { now.nanoseconds >= expiresAt }
}

func fuzzEntryTable(_ input: inout FuzzInput) {
    let capacity = 1 + input.below(10)
    let refuse = input.bool()
    var real = try! KeyTable<Int, Expiring>(capacity: capacity, whenFull: refuse ? .refuse : .evict)
    var list = NaiveClockTable<Int, Expiring>(capacity: capacity, refuse: refuse)
    var charges = 0
    var inserted = 0
    var evicted = 0
    var refused = 0
    var clock: Int64 = 0
    let chargeLimit = KeyTable<Int, Expiring>.chargeLimit(capacity: capacity)
    require(chargeLimit == Swift.max(64, capacity * 16), "chargeLimit(capacity: \(capacity)) is \(chargeLimit)")

    var operations = 0
    while !input.isExhausted, operations < 800 {
        operations += 1
        let code = input.byte()
        let key = Int(input.byte()) % 24
        clock += Int64(code >> 5)
        let now = Instant(nanoseconds: clock)
        switch code & 15 {
        case 0...5:
            let insertOnly = code & 15 == 5
            if insertOnly && list.entries.contains(where: { $0.key == key }) { break }
            let fresh = Expiring(value: Int(code) * 1_000 + key, expiresAt: clock + Int64(input.below(31)))
            let isNew = !list.entries.contains { $0.key == key }
            let want = list.lookup(key, now: now, fresh: fresh)
            var wantEvicted: (key: Int, value: Expiring)? = nil
            var wantThrow = false
            switch want {
            case .stored(let evicted): wantEvicted = evicted
            case .refused: wantThrow = true
            }
            do {
                let slot = insertOnly
                    ? try real.insert(key, fresh, now: now)
                    : try real.lookup(key, now: now, orInsert: fresh)
                require(!wantThrow, "key \(key) taken, the list.entries refuses it")
                require(slot.evicted.count == (wantEvicted == nil ? 0 : 1), "evicted \(slot.evicted.map(\.key)), the list.entries \(String(describing: wantEvicted?.key))")
                if let wantEvicted {
                    require(slot.evicted[0].key == wantEvicted.key && slot.evicted[0].value == wantEvicted.value, "evicted \(slot.evicted[0]), the list.entries \(wantEvicted)")
                    evicted += 1
                }
                require(real.key(at: slot.index) == key && real[slot.index] == list.value(of: key), "the entry looked up")
                if isNew { inserted += 1 }
            } catch {
                require(error.code == .tableBusy, "lookup threw \(error)")
                require(wantThrow, "key \(key) refused, the list.entries takes it")
                refused += 1
            }
        case 6:
            let want = list.remove(key)
            require(real.removeValue(forKey: key) == want, "removeValue(forKey: \(key))")
        case 7:
            guard let index = real.index(of: key) else {
                require(!list.entries.contains { $0.key == key }, "index(of: \(key)) is nil, the list.entries holds it")
                break
            }
            let removed = real.remove(at: index)
            require(removed.key == key && removed.value == list.remove(key), "remove(at:) of \(key)")
        case 8:
            guard let index = real.index(of: key) else { break }
            real.touch(index)
            require(list.contains(key), "touched \(key), which the model does not hold")
            list.touch(key)
        case 9:
            let maxEntries = key % 4
            let removed = real.sweep(now: now, maxEntries: maxEntries)
            require(removed <= maxEntries, "a sweep of \(maxEntries) removed \(removed)")
            require(list.sweep(now: now, maxEntries: maxEntries) == removed, "a sweep says \(removed) removed")
        case 10:
            let removed = real.sweep(now: now, maxEntries: 1_000)
            require(removed == list.sweep(now: now, maxEntries: 1_000), "a full sweep removed \(removed)")
            require(list.entries.allSatisfy { !$0.value.isIdle(at: now) }, "a full sweep left idle keys")
        case 11, 12:
            let taken = real.charge(bytes: 1 << 20, now: now)
            if charges < chargeLimit {
                require(taken, "charge \(charges + 1) of \(chargeLimit) refused")
                charges += 1
            } else {
                require(!taken, "charge \(charges + 1) over the limit \(chargeLimit) taken")
                // The refused charge swept for idle keys first.
                _ = list.sweep(now: now, maxEntries: 32)
            }
        case 13:
            if charges > 0 {
                real.release(bytes: 1 << 20)
                charges -= 1
            }
        default:
            require(real.index(of: key).map { real[$0] } == list.entries.first { $0.key == key }?.value, "index(of: \(key))")
        }
        require(real.keys == list.keys, "storage \(real.keys), the model \(list.keys)")
        require(real.count == list.entries.count && real.count <= capacity, "count \(real.count), the list.entries \(list.entries.count)")
        for entry in list.entries {
            let index = real.index(of: entry.key)
            require(index.map { real[$0] } == entry.value, "value of \(entry.key)")
            require(index.map { real.isVisited($0) } == entry.visited, "visited bit of \(entry.key)")
        }
        require(real.stats.evicted == evicted, "stats.evicted \(real.stats.evicted), the list.entries \(evicted)")
        require(real.stats.refused == refused, "stats.refused \(real.stats.refused), the list.entries \(refused)")
        require(real.stats.inserted == inserted, "stats.inserted \(real.stats.inserted), the list.entries \(inserted)")
    }
}

// MARK: - Byte-budget KeyTable

func fuzzByteTable(_ input: inout FuzzInput) {
    let bytes = 512 + Int(input.uint64(bytes: 2)) % 16_384
    let extra = input.below(4) * 16
    let evicting = input.bool()
    let budget = MemoryBudget.bytes(bytes, extraBytesPerKey: extra)
    let table: KeyTable<String, Expiring>
    do {
        table = try KeyTable<String, Expiring>(budget: budget, whenFull: evicting ? .evict : .refuse)
    } catch {
        require(KeyTable<String, Expiring>.capacity(for: budget) < 1, "a budget of \(bytes) bytes refused: \(error)")
        return
    }
    var real = table
    let limit = bytes
    require(real.byteLimit == limit, "byteLimit \(String(describing: real.byteLimit))")
    require(real.bytesUsed <= limit, "an empty table uses \(real.bytesUsed) of \(limit) bytes")
    var held: [String] = []
    var charged: [Int] = []
    var clock: Int64 = 0

    func name(_ code: UInt8, _ length: UInt8) -> String {
        let n = Int(code) % 32
        return length < 128 ? "k\(n)" : "key-\(n)-" + String(repeating: "x", count: Int(length) * 4)
    }

    var operations = 0
    while !input.isExhausted, operations < 600 {
        operations += 1
        let code = input.byte()
        let argument = input.byte()
        let length = input.byte()
        clock += Int64(code >> 6)
        let now = Instant(nanoseconds: clock)
        let live = Set(held.filter { key in real.index(of: key).map { !real[$0].isIdle(at: now) } ?? false })
        switch code & 7 {
        case 0...3:
            let key = name(argument, length)
            let fresh = Expiring(value: Int(code), expiresAt: clock + Int64(argument % 16))
            do {
                let slot = try real.lookup(key, now: now, orInsert: fresh)
                require(real.key(at: slot.index) == key, "the entry looked up")
                let evictedKeys = slot.evicted.map(\.key)
                require(evicting || evictedKeys.isEmpty, "a refusing table evicted \(evictedKeys)")
                require(slot.evicted.allSatisfy { !$0.value.isIdle(at: now) }, "evicted idle keys")
                require(evictedKeys.allSatisfy { live.contains($0) && $0 != key }, "evicted \(evictedKeys), not live keys held before")
                let gone = held.filter { real.index(of: $0) == nil }
                for vanished in gone where !evictedKeys.contains(vanished) {
                    require(!live.contains(vanished), "live key \(vanished) vanished, not evicted")
                }
                held = [key] + held.filter { $0 != key && real.index(of: $0) != nil }
            } catch {
                require(error.code == .tableBusy, "lookup threw \(error)")
                let lost = held.filter { live.contains($0) && real.index(of: $0) == nil }
                require(lost.isEmpty, "refusing \(key.utf8.count)-byte key evicted live keys \(lost) without reporting them")
                held = held.filter { real.index(of: $0) != nil }
            }
        case 4:
            let key = name(argument, length)
            real.removeValue(forKey: key)
            held.removeAll { $0 == key }
        case 5:
            let amount = Int(argument) * 8
            let before = real.bytesUsed
            if real.charge(bytes: amount, now: now) {
                charged.append(amount)
            } else {
                require(real.bytesUsed + amount > limit || before + amount > limit, "a charge of \(amount) refused with \(real.bytesUsed) of \(limit) used")
            }
            let gone = held.filter { real.index(of: $0) == nil }
            require(gone.allSatisfy { !live.contains($0) }, "a charge dropped live keys")
            held.removeAll { gone.contains($0) }
        case 6:
            if let amount = charged.popLast() { real.release(bytes: amount) }
        default:
            let removed = real.sweep(now: now, maxEntries: Int(argument) % 8)
            let gone = held.filter { real.index(of: $0) == nil }
            require(gone.count == removed && gone.allSatisfy { !live.contains($0) }, "a sweep dropped \(gone), \(removed) by its count")
            held.removeAll { gone.contains($0) }
        }
        require(real.bytesUsed <= limit, "\(real.bytesUsed) bytes used, budget \(limit)")
        require(real.count <= real.capacity, "\(real.count) keys, capacity \(real.capacity)")
        require(Set(real.keys) == Set(held) && real.count == held.count, "keys \(real.keys), the model \(held)")
    }
}

// MARK: - SlotTable

func fuzzSlotTable(_ input: inout FuzzInput) {
    var real = SlotTable<Int, [Int]>()
    var model: [Int: [Int]] = [:]
    var operations = 0
    while !input.isExhausted, operations < 2_000 {
        operations += 1
        let code = input.byte()
        let key = Int(code >> 2) % 40
        let value = Int(input.byte())
        switch code & 3 {
        case 0, 1:
            real.set([value, key], for: key)
            model[key] = [value, key]
        case 2:
            let got = real.update(key) { stored -> Int in
                stored.append(value)
                return stored.count
            }
            model[key]?.append(value)
            require(got == model[key]?.count, "update(\(key)) answered \(String(describing: got))")
        default:
            require(real.remove(key) == model.removeValue(forKey: key), "remove(\(key))")
        }
        require(real.count == model.count && real.isEmpty == model.isEmpty, "count \(real.count), the model \(model.count)")
        require(Set(real.keys) == Set(model.keys), "keys")
        require(real[key] == model[key] && real.contains(key) == (model[key] != nil), "value of \(key)")
    }
    for (key, value) in model {
        require(real[key] == value, "value of \(key) at the end")
    }
}

// MARK: - ScopeTree

typealias Tree = ScopeTree<Int, Int>

struct ModelScope {
    var parent: Int?
    var open = true
    var removeWhenEmpty: Bool
}

struct ModelEffect {
    var token: EffectToken
    var scope: Int?
    var key: Int
    var id: Int
    var state: Tree.EffectState
    var tag: UInt32
}

struct ScopeModel {
    var scopes = [ModelScope(parent: nil, removeWhenEmpty: false)]
    var effects: [ModelEffect] = []

    func inSubtree(_ scope: Int, of root: Int) -> Bool {
        var node: Int? = scope
        while let n = node {
            if n == root { return true }
            node = scopes[n].parent
        }
        return false
    }

    func isEmpty(_ scope: Int) -> Bool {
        !scopes.indices.contains { scopes[$0].open && scopes[$0].parent == scope }
            && !effects.contains { $0.scope == scope }
    }

    /// Closes `scope` and its ancestors while each is an empty scope that closes by itself.
    mutating func closeIfEmpty(_ scope: Int?) -> [Int] {
        var closed: [Int] = []
        var current = scope
        while let s = current, scopes[s].open, scopes[s].removeWhenEmpty, isEmpty(s) {
            scopes[s].open = false
            closed.append(s)
            current = scopes[s].parent
        }
        return closed
    }

    /// Cancels the effects that match in open scopes of `scope`'s subtree.
    mutating func cancel(in scope: Int, where matches: (ModelEffect) -> Bool) -> [EffectToken] {
        var cancelled: [EffectToken] = []
        for i in effects.indices {
            guard let s = effects[i].scope, effects[i].state != .cancelled, inSubtree(s, of: scope), matches(effects[i]) else { continue }
            effects[i].state = .cancelled
            cancelled.append(effects[i].token)
        }
        return cancelled.sorted { $0.rawValue < $1.rawValue }
    }
}

func fuzzScopeTree(_ input: inout FuzzInput) {
    var real = Tree()
    var model = ScopeModel()
    var callerTokens: UInt64 = 1 << 40
    var operations = 0
    while !input.isExhausted, operations < 600 {
        operations += 1
        let code = input.byte()
        let pick = Int(input.byte())
        let id = Int(code >> 4) % 3
        let scope = pick % model.scopes.count
        let scopeID = ScopeID(rawValue: UInt64(scope))
        let key = (pick >> 3) % 3
        switch code & 15 {
        case 0, 1:
            let removeWhenEmpty = code & 16 != 0
            do {
                let made = try real.openScope(in: scopeID, removeWhenEmpty: removeWhenEmpty)
                require(model.scopes[scope].open, "opened a scope in closed \(scope)")
                require(Int(made.rawValue) == model.scopes.count, "new scope \(made), expected \(model.scopes.count)")
                model.scopes.append(ModelScope(parent: scope, removeWhenEmpty: removeWhenEmpty))
            } catch {
                require(error.code == .unknownScope && !model.scopes[scope].open, "openScope in \(scope) threw \(error)")
            }
        case 2, 3, 4:
            let tag = UInt32(code) &* 2_654_435_761
            do {
                let token: EffectToken
                if code & 15 == 4 {
                    token = EffectToken(rawValue: callerTokens)
                    try real.register(token, id: id, key: key, in: scopeID, tag: tag)
                    callerTokens += 1
                } else {
                    token = try real.register(id: id, key: key, in: scopeID, tag: tag)
                }
                require(model.scopes[scope].open, "registered in closed scope \(scope)")
                require(!model.effects.contains { $0.token == token }, "token \(token) given twice")
                model.effects.append(ModelEffect(token: token, scope: scope, key: key, id: id, state: .pending, tag: tag))
            } catch {
                require(error.code == .unknownScope && !model.scopes[scope].open, "register in \(scope) threw \(error)")
            }
        case 5:
            guard !model.effects.isEmpty else { break }
            let i = pick % model.effects.count
            let want = model.effects[i].state == .pending
            require(real.start(model.effects[i].token) == want, "start \(model.effects[i].token)")
            if want { model.effects[i].state = .running }
        case 6, 7:
            let want = model.cancel(in: scope) { $0.id == id }
            let got = real.cancel(id: id, in: scopeID)
            require(got == want, "cancel(id: \(id), in: \(scope)) gave \(got), the model \(want)")
        case 8:
            let want = model.cancel(in: scope) { _ in true }
            let got = real.cancelAll(in: scopeID)
            require(got == want, "cancelAll(in: \(scope)) gave \(got), the model \(want)")
        case 9, 10:
            let wanted: Int? = id == 2 ? nil : id
            var want: [EffectToken] = []
            for i in model.effects.indices
            where model.effects[i].key == key && model.effects[i].state != .cancelled && (wanted == nil || model.effects[i].id == wanted) {
                model.effects[i].state = .cancelled
                want.append(model.effects[i].token)
            }
            want.sort { $0.rawValue < $1.rawValue }
            let got = real.cancel(id: wanted, key: key)
            require(got == want, "cancel(id: \(String(describing: wanted)), key: \(key)) gave \(got), the model \(want)")
        case 11, 12:
            var closedByTree: [Int] = []
            let got = real.close(scopeID) { closedByTree.append(Int($0.rawValue)) }
            var want: [EffectToken] = []
            var wantClosed: [Int] = []
            if model.scopes[scope].open {
                let doomed = model.scopes.indices.filter { model.scopes[$0].open && model.inSubtree($0, of: scope) }
                for i in model.effects.indices {
                    guard let s = model.effects[i].scope, doomed.contains(s) else { continue }
                    if model.effects[i].state != .cancelled {
                        model.effects[i].state = .cancelled
                        want.append(model.effects[i].token)
                    }
                    model.effects[i].scope = nil
                }
                want.sort { $0.rawValue < $1.rawValue }
                for s in doomed { model.scopes[s].open = false }
                let ancestors = model.closeIfEmpty(model.scopes[scope].parent)
                require(closedByTree.first == scope, "close(\(scope)) reported \(closedByTree) closed")
                require(Set(closedByTree.prefix(doomed.count)) == Set(doomed), "close(\(scope)) reported \(closedByTree), the subtree is \(doomed)")
                require(Array(closedByTree.dropFirst(doomed.count)) == ancestors, "close(\(scope)) reported \(closedByTree), the ancestors closing are \(ancestors)")
                wantClosed = doomed + ancestors
            }
            require(got == want, "close(\(scope)) cancelled \(got), the model \(want)")
            require(closedByTree.count == wantClosed.count, "close(\(scope)) reported \(closedByTree), the model \(wantClosed)")
        case 13, 14:
            guard !model.effects.isEmpty else { break }
            let effect = model.effects.remove(at: pick % model.effects.count)
            var closedByTree: [Int] = []
            real.finished(effect.token) { closedByTree.append(Int($0.rawValue)) }
            let want = effect.scope.map { model.closeIfEmpty($0) } ?? []
            require(closedByTree == want, "finishing \(effect.token) closed \(closedByTree), the model \(want)")
            require(real.state(of: effect.token) == nil, "\(effect.token) still known after finishing")
        default:
            // Finishing an effect twice, or one never registered, changes nothing.
            real.finished(EffectToken(rawValue: UInt64(pick) + (1 << 50)))
        }
        for effect in model.effects {
            let token = effect.token
            require(real.state(of: token) == effect.state, "state of \(token): \(String(describing: real.state(of: token))), the model \(effect.state)")
            require(real.isCancelled(token) == (effect.state == .cancelled), "isCancelled(\(token))")
            require(real.tag(of: token) == effect.tag && real.key(of: token) == effect.key && real.id(of: token) == effect.id, "tag, key and ID of \(token)")
            require(real.scope(of: token) == effect.scope.map { ScopeID(rawValue: UInt64($0)) }, "scope of \(token): \(String(describing: real.scope(of: token))), the model \(String(describing: effect.scope))")
        }
        for key in 0..<3 {
            let want = model.effects.filter { $0.key == key }.map(\.token).sorted { $0.rawValue < $1.rawValue }
            require(real.effects(forKey: key) == want, "effects(forKey: \(key)): \(real.effects(forKey: key)), the model \(want)")
        }
        require(real.effectCount == model.effects.count, "effectCount \(real.effectCount), the model \(model.effects.count)")
        require(real.scopeCount == model.scopes.filter(\.open).count, "scopeCount \(real.scopeCount)")
        for s in model.scopes.indices {
            require(real.isOpen(ScopeID(rawValue: UInt64(s))) == model.scopes[s].open, "isOpen(\(s))")
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    switch input.below(4) {
    case 0: fuzzEntryTable(&input)
    case 1: fuzzByteTable(&input)
    case 2: fuzzSlotTable(&input)
    default: fuzzScopeTree(&input)
    }
    return 0
}
