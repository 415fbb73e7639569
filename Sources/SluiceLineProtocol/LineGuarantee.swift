import Sluice

/// The words of the line protocol's ` guarantee=` field.
public enum LineGuarantee {
    /// The word for `guarantee`: `local` (this instance decided alone while its shared store was
    /// unavailable), `store-data-lost` (the shared store lost its data less than a retention
    /// ago), or `nil` for the full guarantee (no field).
    public static func word(for guarantee: RunInfo.Guarantee) -> String? {
        switch guarantee {
        case .store: nil
        case .local: "local"
        case .storeDataLost: "store-data-lost"
        }
    }
}
