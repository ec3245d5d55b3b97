package sim

import (
	"os"
	"path/filepath"
)

// FindTrace resolves a relative trace path such as the default
// "../shared/traces/openb/...": relative to the working directory if it
// exists there, else to the nearest project root above it (a directory
// with a go.mod) where it exists; else p as given.
func FindTrace(p string) string {
	if filepath.IsAbs(p) || exists(p) {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return p
	}
	for {
		if exists(filepath.Join(dir, "go.mod")) {
			if c := filepath.Join(dir, p); exists(c) {
				return c
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return p
		}
		dir = parent
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
