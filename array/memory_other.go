//go:build !linux

package array

// machineBytes is 0, unknown, where the system does not tell: only Go's
// own allocation limit is checked.
func machineBytes() uint64 { return 0 }
