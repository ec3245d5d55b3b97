package redact

import (
	"errors"
	"net/url"
	"strings"
)

// hidden replaces what is redacted, as net/url's URL.Redacted writes it.
const hidden = "xxxxx"

// URL returns raw fit to print: a URL's password replaced by "xxxxx", as
// url.URL.Redacted does. When raw does not parse, or parses with no user
// info although it holds an '@' (a password with an unescaped '#' or '/'
// is read as a fragment or path), everything from the scheme to the last
// '@' is replaced, since the password may be anywhere in it.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && (u.User != nil || !strings.Contains(raw, "@")) {
		return u.Redacted()
	}
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 && i < at {
		start = i + len("://")
	}
	return raw[:start] + hidden + raw[at:]
}

// errHidden stands for what url.Parse found wrong in a URL with user info:
// its message quotes the offending part ("invalid port \":pa\" after
// host"), which may be a piece of the password.
var errHidden = errors.New("malformed URL (the details are not shown: they may hold its password)")

// Error redacts the *url.Error in err's chain, in place, and returns err.
// url.Parse quotes the whole input in its errors, so a password that makes
// a URL malformed would otherwise be printed with it (redis.ParseURL
// returns those errors as they are). Call it before wrapping err:
// fmt.Errorf writes the wrapped text when it is called.
func Error(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && strings.Contains(ue.URL, "@") {
		ue.URL = URL(ue.URL)
		ue.Err = errHidden
	}
	return err
}
