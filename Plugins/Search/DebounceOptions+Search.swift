import Sluice

extension DebounceOptions {
    /// Search-as-you-type: run the latest query 100 ms after typing stops, and at least once a
    /// second while typing continues.
    public static let search: DebounceOptions = {
        // Literal periods, the quiet one positive and shorter than the longest wait: valid.
        guard let options = try? DebounceOptions(quiet: .milliseconds(100), maxWait: .seconds(1)) else {
            preconditionFailure("a 100 ms debounce waiting at most 1 s is valid")
        }
        return options
    }()
}
