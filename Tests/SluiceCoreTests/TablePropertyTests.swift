import PropertyBased
import SluiceCore
import SluicePolicyModels
import Testing

@Suite struct TablePropertyTests {
    /// KeyTable against a naive model: an array of (key, value, visited) in storage order,
    /// searched linearly, with the clock hand and the sweep's cursor as plain positions.
    @Test func keyTableMatchesNaiveClockTable() async {
        // (kind, key, lifetime, gap)
        // Capacities up to 60 over 81 keys: evictions, removals and sweeps meet tables of tens of keys.
        let ops = zip(Gen.int(in: 0...10), Gen.int(in: 0...80), Gen.int(in: 0...30), Gen.int(in: 0...5)).array(of: 0...200)
        await propertyCheck(count: 300, input: Gen.int(in: 1...60), Gen.bool, ops) { capacity, refuse, ops in
            var real = try! KeyTable<Int, Expiring>(capacity: capacity, whenFull: refuse ? .refuse : .evict)
            var model = NaiveClockTable<Int, Expiring>(capacity: capacity, refuse: refuse)
            var now: Int64 = 0
            for (kind, key, lifetime, gap) in ops {
                now += Int64(gap)
                let instant = Instant(nanoseconds: now)
                switch kind {
                case 0...5:
                    let fresh = Expiring(value: kind * 100 + key, expiresAt: now + Int64(lifetime))
                    let isNew = !model.contains(key)
                    let want = model.lookup(key, now: instant, fresh: fresh)
                    do {
                        let slot = try real.lookup(key, now: instant, orInsert: fresh)
                        guard case .stored(let wantEvicted) = want else {
                            Issue.record("key \(key) stored, the model refuses it")
                            break
                        }
                        #expect(slot.isNew == isNew)
                        #expect(slot.evicted.first?.key == wantEvicted?.key)
                        #expect(slot.evicted.first?.value == wantEvicted?.value)
                        #expect(slot.evicted.allSatisfy { !$0.value.isIdle(at: instant) })
                        #expect(slot.evicted.count <= 1)
                        #expect(real.key(at: slot.index) == key)
                    } catch let error as SluiceError {
                        guard case .refused = want else {
                            Issue.record("key \(key) refused, the model stores it")
                            break
                        }
                        #expect(error.code == .tableBusy)
                    } catch {
                        Issue.record(error)
                    }
                case 6, 7:
                    #expect(real.removeValue(forKey: key) == model.remove(key))
                case 8:
                    let removed = real.sweep(now: instant, maxEntries: lifetime % 4)
                    #expect(removed <= lifetime % 4)
                    #expect(model.sweep(now: instant, maxEntries: lifetime % 4) == removed)
                case 9:
                    if let index = real.index(of: key) { real.touch(index) }
                    model.touch(key)
                default:
                    let removed = real.sweep(now: instant, maxEntries: 1_000)
                    #expect(model.sweep(now: instant, maxEntries: 1_000) == removed)
                    #expect(model.entries.allSatisfy { !$0.value.isIdle(at: instant) })
                }
                #expect(real.keys == model.keys)
                for entry in model.entries {
                    let index = real.index(of: entry.key)
                    #expect(index.map { real[$0] } == entry.value)
                    #expect(index.map { real.isVisited($0) } == entry.visited)
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
