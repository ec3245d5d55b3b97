package accounting

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/gangwayhq/gangway"
)

// daysThen matches "7d", "1.5d" and "1d12h": days, then an optional Go
// duration.
var daysThen = regexp.MustCompile(`^(\d+(?:\.\d+)?)d(.*)$`)

// ParseWhen reads a report window bound: a duration before now (Go
// syntax, plus a d suffix for days: 7d, 36h, 1d12h), an RFC 3339 time, or a
// date (UTC midnight). The result is in UTC.
func ParseWhen(v string, now time.Time) (time.Time, error) {
	bad := func() (time.Time, error) {
		return time.Time{}, fmt.Errorf("want a duration ago (7d, 36h, 1d12h), an RFC 3339 time or a date (2006-01-02), got %q", v)
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	var ago time.Duration
	rest := v
	if m := daysThen.FindStringSubmatch(v); m != nil {
		days, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return bad()
		}
		ago, rest = time.Duration(days*float64(24*time.Hour)), m[2]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil || d < 0 {
			return bad()
		}
		ago += d
	}
	return now.Add(-ago).UTC(), nil
}

// ParseQuery reads a report's grouping and window as users give them (the
// --by, --since and --until of `gangway cost`): since and until by
// ParseWhen, until "" for now. An error begins with the name of the value
// that is wrong ("since: want ...").
func ParseQuery(by, since, until string, now time.Time) (Query, error) {
	g, err := gangway.ParseCostGroupBy(by)
	if err != nil {
		return Query{}, fmt.Errorf("by: %w", err)
	}
	q := Query{By: g, Until: now.UTC()}
	if q.Since, err = ParseWhen(since, now); err != nil {
		return Query{}, fmt.Errorf("since: %w", err)
	}
	if until != "" {
		if q.Until, err = ParseWhen(until, now); err != nil {
			return Query{}, fmt.Errorf("until: %w", err)
		}
	}
	if !q.Since.Before(q.Until) {
		return Query{}, fmt.Errorf("since %s is not before until %s", q.Since.Format(time.RFC3339), q.Until.Format(time.RFC3339))
	}
	return q, nil
}

// DefaultSince is the start of a report window nobody gave.
const DefaultSince = "7d"
