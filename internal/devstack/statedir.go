package devstack

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// StateDir is where a local stack keeps its state and logs: dir, or when
// dir is "" a new temporary directory named after prefix that cleanup
// removes. Log is the file gangway.log in it, for the components' own log
// lines (the terminal shows progress); cleanup closes it.
func StateDir(dir, prefix string) (path string, log io.Writer, cleanup func(), err error) {
	remove := func() {}
	if dir == "" {
		if dir, err = os.MkdirTemp("", prefix); err != nil {
			return "", nil, nil, fmt.Errorf("state dir: %w", err)
		}
		remove = func() { os.RemoveAll(dir) }
	}
	f, err := os.Create(filepath.Join(dir, "gangway.log"))
	if err != nil {
		remove()
		return "", nil, nil, fmt.Errorf("gangway log: %w", err)
	}
	return dir, f, func() { f.Close(); remove() }, nil
}
