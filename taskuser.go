package gangway

import (
	"fmt"
	"regexp"
	"slices"
)

// TaskUsers is a site's policy of the Unix users jobs run as (config
// jobs.users and jobs.defaultUser): each team's jobs run as one of its
// users, the first unless the spec picks another (runAs). The zero value
// is the policy of a site that isolates nothing: every task runs as the
// agent's own user, and a spec may not ask for another.
type TaskUsers struct {
	// Teams lists the users each team's jobs may run as; the first is the
	// team's default.
	Teams map[string][]string `yaml:"users" json:"users,omitempty"`
	// Default is the user of jobs of teams Teams does not list; "" means
	// such jobs are refused (when Teams is not empty).
	Default string `yaml:"defaultUser" json:"defaultUser,omitempty"`
}

// Enabled reports whether tasks run as users of their own rather than as
// the agent's.
func (u TaskUsers) Enabled() bool { return len(u.Teams) > 0 || u.Default != "" }

// For returns the user a job of team that asks for runAs ("" for its
// team's default) runs as, "" meaning the agent's own user (the policy is
// not Enabled), or an error saying why the job may not run so.
func (u TaskUsers) For(team, runAs string) (string, error) {
	if !u.Enabled() {
		if runAs != "" {
			return "", fmt.Errorf("runAs %q is not allowed: this site runs every task as the agent's user (no jobs.users)", runAs)
		}
		return "", nil
	}
	allowed, listed := u.Teams[team]
	if !listed {
		if u.Default == "" {
			return "", fmt.Errorf("team %q has no Unix user to run its tasks as (jobs.users lists none, and jobs.defaultUser is unset)", team)
		}
		allowed = []string{u.Default}
	}
	if runAs == "" {
		if len(allowed) == 0 {
			return "", fmt.Errorf("team %q has an empty list of Unix users in jobs.users", team)
		}
		return allowed[0], nil
	}
	if !slices.Contains(allowed, runAs) {
		return "", fmt.Errorf("runAs %q is not one of team %s's users %v", runAs, team, allowed)
	}
	return runAs, nil
}

// unixUserRE is the portable user name syntax (useradd's default
// NAME_REGEX without the trailing '$'), at most 32 bytes.
var unixUserRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// IsUnixUser reports whether s is a valid Unix user name.
func IsUnixUser(s string) bool { return unixUserRE.MatchString(s) }

// WithTaskUsers checks a spec's team and runAs against the site's task
// users at submit: a spec whose job could not run as any allowed user is
// refused before anything is queued.
func WithTaskUsers(u TaskUsers) ValidateOption {
	return func(o *validateOptions) { o.users = &u }
}
