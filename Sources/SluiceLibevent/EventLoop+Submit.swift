extension EventLoop {
    /// Runs `body` on the loop thread and returns its result.
    public func submit<Result: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> Result
    ) async throws(Failure) -> Result {
        if inEventLoop { return try body() }
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Swift.Result<Result, Failure>, Never>) in
            execute {
                do throws(Failure) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try outcome.get()
    }
}
