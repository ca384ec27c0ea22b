package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
)

// DefaultStateDir returns where examples/scenario-agent keeps its sessions
// unless told otherwise (--state-dir): the directory "acpcompact/scenario-agent"
// in the user's state directory. Go has os.UserConfigDir and
// os.UserCacheDir but no state directory, so it is:
//
//   - $XDG_STATE_HOME, when set to an absolute path (on any system);
//   - otherwise, on macOS, ~/Library/Application Support (os.UserConfigDir:
//     macOS has no separate place for state);
//   - on Windows, %LocalAppData% (os.UserCacheDir there: state that stays
//     on this machine, not the roaming %AppData%);
//   - elsewhere (Linux, the BSDs), ~/.local/state, the XDG default.
func DefaultStateDir() (string, error) {
	base, err := userStateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "acpcompact", "scenario-agent"), nil
}

func userStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return d, nil
	}
	switch runtime.GOOS {
	case "darwin", "ios":
		return os.UserConfigDir()
	case "windows":
		return os.UserCacheDir()
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	if home == "" {
		return "", errors.New("no home directory")
	}
	return filepath.Join(home, ".local", "state"), nil
}
