//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd || solaris

package sessionlog

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes the advisory lock of a log's writer on f, without
// waiting: flock(2), exclusive, non-blocking. It is held by f's open file
// description, so it ends when f is closed (or its process ends, however
// it ends), and a second open of the file in the same process conflicts
// with it as another process's does. errHeld says another holds it.
func lockFile(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return errHeld
		}
		return err
	}
}

// unlockFile does nothing: closing f releases the lock.
func unlockFile(*os.File) error { return nil }
