import CoreMetrics
import Logging
import Synchronization

/// Watches the epochs a plugin's shared store grants its fences in (see ``FencingToken``), for
/// every shard of the plugin at once: a change of epoch means the store came back without its
/// data. Each change is one episode: counted (`sluice_store_data_loss_total{plugin}`) and
/// logged once, whichever shard saw it first; the shards then mark their answers for one
/// retention (``RunInfo/Guarantee/storeDataLost``).
final class StoreEpochWatch: Sendable {
    private let epoch = Mutex<UInt64?>(nil)
    private let episodeCount = Atomic<Int>(0)
    private let plugin: String
    private let losses: Counter
    private let logger: Logger

    init(plugin: String, logger: Logger = Logger(label: "sluice.store")) {
        self.plugin = plugin
        self.losses = Counter(label: "sluice_store_data_loss_total", dimensions: [("plugin", plugin)])
        self.logger = logger
    }

    /// Episodes seen so far (any thread).
    var episodes: Int { episodeCount.load(ordering: .acquiring) }

    /// Notes that `store` granted a fence in `epoch`; returns the episodes seen so far.
    func observe(_ epoch: UInt64, store: String) -> Int {
        let earlier = self.epoch.withSanitizedLock { known -> UInt64? in
            defer { known = epoch }
            if let current = known, current != epoch { return current }
            return nil
        }
        guard let earlier else { return episodes }
        let count = episodeCount.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue
        losses.increment()
        logger.error(
            "the store lost its data: its epoch changed, so records completed before may run again when retried",
            metadata: ["plugin": "\(plugin)", "store": "\(store)", "epoch": "\(earlier) -> \(epoch)"])
        return count
    }
}
