import SluiceCore

extension Gate {
    /// Executions cancelled so far.
    public var cancelledCount: Int { counters.cancelled.current }

    /// A snapshot over every shard.
    public func statistics() async -> GateStatistics {
        var statistics = GateStatistics(cancelled: counters.cancelled.current)
        for shard in shards {
            let snapshot = await perform(on: shard) { shard in
                // The metrics a scrape reads after this are as current as these statistics.
                for lane in shard.lanes { lane.reportMetrics() }
                return (shard.keyCountByLane, shard.executionCount, shard.waiterCount, shard.scopeCount - 1, shard.tableStats,
                 shard.lanes.map(\.shadowRefusalCounts))
            }
            guard let snapshot else { continue }
            statistics.keys += snapshot.0.reduce(0, +)
            statistics.executions += snapshot.1
            statistics.waiters += snapshot.2
            statistics.scopes += snapshot.3
            for (index, keys) in snapshot.0.enumerated() {
                statistics.keysByPlugin[plugins[index].name, default: 0] += keys
            }
            for (index, counts) in snapshot.5.enumerated() {
                for (stage, count) in counts {
                    statistics.shadowRefusals[plugins[index].name, default: [:]][stage, default: 0] += count
                }
            }
            for (index, stats) in snapshot.4.enumerated() {
                guard let stats else { continue }
                let name = plugins[index].name
                var total = statistics.tables[name] ?? KeyTableStats()
                total.inserted += stats.inserted
                total.evicted += stats.evicted
                total.expired += stats.expired
                total.refused += stats.refused
                total.refusedCharges += stats.refusedCharges
                statistics.tables[name] = total
            }
        }
        return statistics
    }
}
