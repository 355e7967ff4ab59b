package cuda

import (
	"runtime"
	"syscall"
)

// threadID is the calling OS thread's id.
func threadID() int64 { return int64(syscall.Gettid()) }

// threadIDLocked locks the calling goroutine to its OS thread and returns
// the thread's id.
func threadIDLocked() int64 {
	runtime.LockOSThread()
	return threadID()
}
