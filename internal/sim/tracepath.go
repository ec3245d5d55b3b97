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

// FlagTracePath resolves a trace flag: its default, relative to the
// project root, is found from wherever gangway runs (FindTrace); a path
// the user gave is used as given.
func FlagTracePath(p string, isDefault bool) string {
	if !isDefault {
		return p
	}
	return FindTrace(p)
}

// LocateTrace finds the relative trace path p from the working directory
// (and the project root above it, FindTrace) or beside the running binary
// (bin/gangway in the repository); "" when it is in neither place.
func LocateTrace(p string) string {
	if c := FindTrace(p); exists(c) {
		return c
	}
	if exe, err := os.Executable(); err == nil {
		if c := filepath.Join(filepath.Dir(exe), "..", p); exists(c) {
			return c
		}
	}
	return ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
