//go:build unix

package sessionlog

import "os"

// syncDir makes a new directory entry durable (SyncEach).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
