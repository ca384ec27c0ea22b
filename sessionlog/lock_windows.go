//go:build windows

package sessionlog

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// The lock is one byte far past any log's end: LockFileEx locks are
// mandatory on Windows, and a lock on the log's bytes would keep readers
// (Store.Read, in this process or another) from reading them.
const (
	lockOffsetHigh = 0x7fffffff
	lockOffsetLow  = 0
)

// lockFile takes the lock of a log's writer on f, without waiting:
// LockFileEx, exclusive, failing at once. It is owned by f's handle, so a
// second open of the file in the same process conflicts with it as
// another process's does; the system releases it when its process ends.
// errHeld says another holds it.
func lockFile(f *os.File) error {
	ol := windows.Overlapped{Offset: lockOffsetLow, OffsetHigh: lockOffsetHigh}
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return errHeld
	}
	return err
}

// unlockFile releases the lock before f is closed: Windows releases the
// locks of a closed handle only eventually.
func unlockFile(f *os.File) error {
	ol := windows.Overlapped{Offset: lockOffsetLow, OffsetHigh: lockOffsetHigh}
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}
