import SluiceCore

/// What an execution holding a shared record does with the record when its effect ends, and how
/// the lane retries the store's side of it. Pure rules: the lane carries them out.
enum SharedRecordEnding: Hashable, Sendable {
    /// Store the result under the lease. Duplicates in this process replay it while the write is
    /// on its way, and the lease is renewed until the store takes or refuses it.
    case write
    /// Give the record back, so that a retry runs. `refundsQuota` says whether the key's quota of
    /// new records gets its unit back. It does when the effect ran and ended in an outcome the
    /// options do not keep. It does not when the effect was cancelled or committed nothing.
    case release(refundsQuota: Bool)

    /// How an execution that ended gives back or stores its record.
    /// - Parameters:
    ///   - failed: it ended with an error (or was cancelled).
    ///   - failureOutput: it returned an output that its plugin counts as a failure.
    ///   - cancelled: it was cancelled before it ended.
    ///   - committedNothing: its error says that it changed nothing (a commit refused, a
    ///     downstream that did not answer and keeps its changes by record).
    ///   - cacheErrors: whether the options keep failures as results.
    static func of(failed: Bool, failureOutput: Bool, cancelled: Bool, committedNothing: Bool, cacheErrors: Bool) -> Self {
        if !failed {
            // An output that ran is stored, unless it is a failure the options do not keep.
            return failureOutput && !cacheErrors ? .release(refundsQuota: true) : .write
        }
        if cancelled || committedNothing { return .release(refundsQuota: false) }
        return cacheErrors ? .write : .release(refundsQuota: true)
    }

    /// How long to wait before trying a write or a release again, after `attempt` tries failed:
    /// 50 ms, doubling to 2 s.
    static func retryDelay(after attempt: Int) -> Duration {
        .milliseconds(min(2_000, 50 << min(max(attempt, 0), 6)))
    }

    /// How many times a release is sent at most; after that the lease runs out by itself.
    static var releaseAttempts: Int { 6 }
}
