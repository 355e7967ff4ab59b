//go:build !linux

package cuda

// threadID is 0 where thread ids are not available: no capture can run,
// so no call waits for one.
func threadID() int64 { return 0 }

// threadIDLocked is 0: stream capture is not supported here.
func threadIDLocked() int64 { return 0 }
