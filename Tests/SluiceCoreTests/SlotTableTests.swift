import SluiceCore
import Testing

/// Tests of ``SlotTable`` against a `Dictionary` as its model: random sets, in-place updates,
/// removals and deletions from a fixed-seed `SplitMix64`, so each run replays the same trace.
@Suite struct SlotTableTests {
    /// A value larger than a few registers, with a reference in it, as the gate's executions are.
    struct Record: Equatable {
        var name: String
        var count: Int
        var tags: [Int]
        var padding: (Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0)

        static func == (lhs: Record, rhs: Record) -> Bool {
            lhs.name == rhs.name && lhs.count == rhs.count && lhs.tags == rhs.tags
        }
    }

    @Test(arguments: [1, 2, 3])
    func matchesADictionary(seed: UInt64) {
        var random = SplitMix64(seed: 0x5107_7AB1 ^ seed)
        var table = SlotTable<Int, Record>()
        var model: [Int: Record] = [:]
        for step in 0..<20_000 {
            let key = Int(random.next() % 64)
            switch random.next() % 5 {
            case 0:
                let record = Record(name: "k\(key)-\(step)", count: step, tags: [step])
                table.set(record, for: key)
                model[key] = record
            case 1:
                let changed = table.update(key) { record -> Int in
                    record.count += 1
                    record.tags.append(step)
                    return record.count
                }
                if model[key] != nil {
                    model[key]?.count += 1
                    model[key]?.tags.append(step)
                }
                #expect(changed == model[key]?.count)
            case 2:
                let removed = table.remove(key)
                #expect(removed == model.removeValue(forKey: key))
            case 3:
                let deleted = table.delete(key)
                #expect(deleted == (model.removeValue(forKey: key) != nil))
            default:
                #expect(table[key] == model[key])
                #expect(table.contains(key) == (model[key] != nil))
            }
            #expect(table.count == model.count)
        }
        for key in model.keys { #expect(table[key] == model[key]) }
        #expect(Set(table.keys) == Set(model.keys))
    }

    @Test func anUpdateOfAMissingKeyChangesNothing() {
        var table = SlotTable<String, Record>()
        let absent: Void? = table.update("absent") { $0.count = 1 }
        #expect(absent == nil)
        table.set(Record(name: "a", count: 1, tags: []), for: "a")
        table.delete("a")
        let deleted: Void? = table.update("a") { $0.count = 2 }
        #expect(deleted == nil)
        #expect(table.isEmpty)
        let again = table.delete("a")
        #expect(!again)
    }
}
