// The Sluice runtime: the typed gate (shards, effects, scopes), plugins and outcomes. It
// re-exports the policies and the loop it is built on.
@_exported import SluiceCore
@_exported import SluiceLibevent
