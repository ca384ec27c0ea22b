//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd || solaris || windows)

package sessionlog

import "os"

// lockFile takes no lock where the package has none to take (AIX, Plan 9,
// js/wasm, WASI): there, one process at a time must write a session's log
// by agreement, as the package doc says.
func lockFile(*os.File) error { return nil }

func unlockFile(*os.File) error { return nil }
