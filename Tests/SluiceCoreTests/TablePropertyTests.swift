import PropertyBased
import SluiceCore
import Testing

@Suite struct TablePropertyTests {
    /// KeyTable against a naive model: an array of (key, value) ordered from most to least recently
    /// used, searched linearly.
    @Test func keyTableMatchesNaiveRecencyList() async {
        // (kind, key, lifetime, gap)
        let ops = zip(Gen.int(in: 0...9), Gen.int(in: 0...24), Gen.int(in: 0...30), Gen.int(in: 0...5)).array(of: 0...120)
        await propertyCheck(count: 300, input: Gen.int(in: 1...10), Gen.bool, ops) { capacity, refuse, ops in
            var real = try! KeyTable<Int, Expiring>(capacity: capacity, whenFull: refuse ? .refuse : .evictLeastRecentlyUsed)
            var model: [(key: Int, value: Expiring)] = []
            var now: Int64 = 0
            for (kind, key, lifetime, gap) in ops {
                now += Int64(gap)
                let instant = Instant(nanoseconds: now)
                switch kind {
                case 0...5:
                    let fresh = Expiring(value: kind * 100 + key, expiresAt: now + Int64(lifetime))
                    var wantEvicted: (key: Int, value: Expiring)? = nil
                    var wantThrow = false
                    if let i = model.firstIndex(where: { $0.key == key }) {
                        var entry = model.remove(at: i)
                        if entry.value.isIdle(at: instant) { entry.value = fresh }
                        model.insert(entry, at: 0)
                    } else {
                        if model.count == capacity {
                            if model.last!.value.isIdle(at: instant) {
                                model.removeLast()
                            } else if model.contains(where: { $0.value.isIdle(at: instant) }) {
                                // Before a live key is evicted or the new key refused, a sweep
                                // drops idle keys; with ≤ 10 entries it sees them all.
                                model.removeAll { $0.value.isIdle(at: instant) }
                            } else if !refuse {
                                wantEvicted = model.removeLast()
                            } else {
                                wantThrow = true
                            }
                        }
                        if !wantThrow { model.insert((key, fresh), at: 0) }
                    }
                    do {
                        let slot = try real.lookup(key, now: instant, orInsert: fresh)
                        #expect(!wantThrow)
                        #expect(slot.evicted.first?.key == wantEvicted?.key)
                        #expect(slot.evicted.first?.value == wantEvicted?.value)
                        #expect(slot.evicted.count <= 1)
                        #expect(real.key(at: slot.index) == key)
                    } catch let error as SluiceError {
                        #expect(wantThrow)
                        #expect(error.code == .tableBusy)
                    } catch {
                        Issue.record(error)
                    }
                case 6, 7:
                    let want = model.firstIndex { $0.key == key }.map { model.remove(at: $0).value }
                    #expect(real.removeValue(forKey: key) == want)
                case 8:
                    let removed = real.sweep(now: instant, maxEntries: lifetime % 4)
                    #expect(removed <= lifetime % 4)
                    // Whatever the sweep dropped was idle; mirror it.
                    let kept = model.filter { real.index(of: $0.key) != nil }
                    #expect(model.count - kept.count == removed)
                    #expect(model.filter { real.index(of: $0.key) == nil }.allSatisfy { $0.value.isIdle(at: instant) })
                    model = kept
                default:
                    let removed = real.sweep(now: instant, maxEntries: 1_000)
                    let before = model.count
                    model.removeAll { $0.value.isIdle(at: instant) }
                    #expect(removed == before - model.count)
                }
                #expect(real.keysByRecency == model.map(\.key))
                for entry in model {
                    #expect(real.index(of: entry.key).map { real[$0] } == entry.value)
                }
            }
        }
    }

    /// ScopeTree against a naive model: a parent array and a flat list of effects; "in the subtree"
    /// is decided by walking parents, "under a key" by comparing keys.
    @Test func scopeTreeMatchesNaiveModel() async {
        // (kind, pick, id); the key of a registration is `pick % 3`.
        let ops = zip(Gen.int(in: 0...11), Gen.int(in: 0...15), Gen.int(in: 0...2)).array(of: 0...80)
        await propertyCheck(count: 300, input: ops) { ops in
            var real = ScopeTree<Int, Int>()
            var parents: [Int?] = [nil]  // scope i's parent; index == ScopeID.rawValue
            var open: [Bool] = [true]
            var effects: [(scope: Int, key: Int, id: Int, state: ScopeTree<Int, Int>.EffectState, token: EffectToken)] = []
            func inSubtree(_ scope: Int, of root: Int) -> Bool {
                var node: Int? = scope
                while let n = node {
                    if n == root { return true }
                    node = parents[n]
                }
                return false
            }
            for (kind, pick, id) in ops {
                let scope = pick % parents.count
                let scopeID = ScopeID(rawValue: UInt64(scope))
                let key = pick % 3
                switch kind {
                case 0, 1:
                    let made = try? real.openScope(in: scopeID)
                    #expect((made != nil) == open[scope])
                    if let made {
                        #expect(Int(made.rawValue) == parents.count)
                        parents.append(scope)
                        open.append(true)
                    }
                case 2, 3:
                    let token = try? real.register(id: id, key: key, in: scopeID)
                    #expect((token != nil) == open[scope])
                    if let token { effects.append((scope, key, id, .pending, token)) }
                case 4 where !effects.isEmpty:
                    let i = pick % effects.count
                    let want = effects[i].state == .pending
                    #expect(real.start(effects[i].token) == want)
                    if want { effects[i].state = .running }
                case 5, 6:
                    var want: [EffectToken] = []
                    for i in effects.indices where effects[i].id == id && effects[i].state != .cancelled && open[effects[i].scope] && inSubtree(effects[i].scope, of: scope) {
                        effects[i].state = .cancelled
                        want.append(effects[i].token)
                    }
                    #expect(real.cancel(id: id, in: scopeID) == want)
                case 7:
                    var want: [EffectToken] = []
                    if open[scope] {
                        for i in effects.indices where effects[i].state != .cancelled && open[effects[i].scope] && inSubtree(effects[i].scope, of: scope) {
                            effects[i].state = .cancelled
                            want.append(effects[i].token)
                        }
                        for s in parents.indices where inSubtree(s, of: scope) { open[s] = false }
                    }
                    #expect(real.close(scopeID) == want)
                case 8 where !effects.isEmpty:
                    let i = pick % effects.count
                    real.finished(effects[i].token)
                    effects.remove(at: i)
                case 9, 10:
                    // By key, across scopes (closed ones too); every ID when `id` is 2.
                    let wanted: Int? = id == 2 ? nil : id
                    var want: [EffectToken] = []
                    for i in effects.indices where effects[i].key == key && effects[i].state != .cancelled && (wanted == nil || effects[i].id == wanted) {
                        effects[i].state = .cancelled
                        want.append(effects[i].token)
                    }
                    #expect(real.cancel(id: wanted, key: key) == want)
                default:
                    break
                }
                for effect in effects {
                    #expect(real.state(of: effect.token) == effect.state)
                    #expect(real.isCancelled(effect.token) == (effect.state == .cancelled))
                }
                for key in 0..<3 {
                    #expect(real.effects(forKey: key) == effects.filter { $0.key == key }.map(\.token))
                }
                #expect(real.effectCount == effects.count)
                #expect(real.scopeCount == open.filter { $0 }.count)
            }
        }
    }
}
