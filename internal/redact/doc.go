// Package redact hides the secrets a URL may carry (the password in
// redis://:secret@host) wherever Gangway prints one: in errors, logs and
// messages. Config values travel intact; only their printed form is
// redacted.
package redact
