package api

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gangwayhq/gangway"
)

// TokenPrefix starts every API token, so a verifier can tell one from a
// JWT without trying it.
const TokenPrefix = "gw_"

// TokenFile verifies API tokens against a token file: one line a token,
//
//	sha256:HEX USER TEAMS ROLE CREATED
//
// where HEX is the SHA-256 of the token, TEAMS is comma-separated ("-" for
// none), ROLE is admin or user and CREATED an RFC 3339 time. The token
// itself is never stored: it has 256 random bits, so its hash is as good a
// secret to keep as a salted one, and a leaked file gives no token. Lines
// starting with '#' are comments; deleting a token's line revokes it. The
// file is read again whenever it changes, so tokens created or revoked
// take effect without a restart.
type TokenFile struct {
	path string

	mu      sync.Mutex
	stamp   fileStamp
	entries []tokenEntry
}

type fileStamp struct {
	mod  time.Time
	size int64
}

type tokenEntry struct {
	hash [sha256.Size]byte
	id   Identity
}

// OpenTokenFile reads the token file at path; a missing file is a file
// with no tokens yet (`gangway token create` makes it).
func OpenTokenFile(path string) (*TokenFile, error) {
	f := &TokenFile{path: path}
	if err := f.reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Verify returns the identity of the token's line. Every line is compared,
// in constant time, whichever matches.
func (f *TokenFile) Verify(_ context.Context, token string) (Identity, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		return Identity{}, ErrNotMine
	}
	f.mu.Lock()
	// A file that no longer parses keeps the tokens it had: an edit in
	// progress must not lock everyone out.
	_ = f.reloadLocked()
	entries := f.entries
	f.mu.Unlock()
	sum := sha256.Sum256([]byte(token))
	var found *tokenEntry
	for i := range entries {
		if subtle.ConstantTimeCompare(sum[:], entries[i].hash[:]) == 1 {
			found = &entries[i]
		}
	}
	if found == nil {
		return Identity{}, errors.New("unknown or revoked API token")
	}
	return found.id, nil
}

func (f *TokenFile) reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloadLocked()
}

func (f *TokenFile) reloadLocked() error {
	st, err := os.Stat(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		f.entries, f.stamp = nil, fileStamp{}
		return nil
	}
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	stamp := fileStamp{st.ModTime(), st.Size()}
	if stamp == f.stamp && f.entries != nil {
		return nil
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	entries, err := ParseTokenFile(string(data))
	if err != nil {
		return fmt.Errorf("token file %s: %w", f.path, err)
	}
	f.entries, f.stamp = entries, stamp
	if f.entries == nil {
		f.entries = []tokenEntry{}
	}
	return nil
}

// userName is what a token's user may be: a login name or an e-mail
// address.
var userName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$`)

// ParseTokenFile reads a token file's lines; an error names the line and
// what is wrong with it.
func ParseTokenFile(text string) ([]tokenEntry, error) {
	var out []tokenEntry
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e, err := parseTokenLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

func parseTokenLine(line string) (tokenEntry, error) {
	f := strings.Fields(line)
	if len(f) != 5 {
		return tokenEntry{}, fmt.Errorf("want 5 fields (sha256:HEX USER TEAMS ROLE CREATED), got %d", len(f))
	}
	var e tokenEntry
	hexHash, ok := strings.CutPrefix(f[0], "sha256:")
	raw, err := hex.DecodeString(hexHash)
	if !ok || err != nil || len(raw) != sha256.Size {
		return tokenEntry{}, errors.New("hash: want sha256: and 64 hex digits")
	}
	copy(e.hash[:], raw)
	if !userName.MatchString(f[1]) {
		return tokenEntry{}, fmt.Errorf("user: want a login name or an e-mail address, got %q", f[1])
	}
	teams, err := parseTeams(f[2])
	if err != nil {
		return tokenEntry{}, err
	}
	if f[3] != "admin" && f[3] != "user" {
		return tokenEntry{}, fmt.Errorf("role: want admin or user, got %q", f[3])
	}
	if _, err := time.Parse(time.RFC3339, f[4]); err != nil {
		return tokenEntry{}, fmt.Errorf("created: want an RFC 3339 time, got %q", f[4])
	}
	e.id = Identity{User: f[1], Teams: teams, Admin: f[3] == "admin", Via: "token"}
	return e, nil
}

// parseTeams reads "a,b" ("-" or "" for none); each a team name.
func parseTeams(s string) ([]string, error) {
	if s == "-" || s == "" {
		return nil, nil
	}
	var teams []string
	for t := range strings.SplitSeq(s, ",") {
		if !gangway.IsDNSLabel(t) {
			return nil, fmt.Errorf("teams: want team names (DNS labels) separated by commas, got %q", t)
		}
		teams = append(teams, t)
	}
	return teams, nil
}

// NewToken is a new API token: the prefix and 32 random bytes.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// TokenID is the short name of a token in the file and in messages: the
// first 12 hex digits of its hash (not a secret).
func TokenID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:6])
}

// CreateToken makes a token for user, acting for teams (admin: for
// everything), appends its hash to the token file at path (created 0600
// if missing) and returns the token: the only time it is seen.
func CreateToken(path, user string, teams []string, admin bool, now time.Time) (string, error) {
	if !userName.MatchString(user) {
		return "", fmt.Errorf("--user: want a login name or an e-mail address, got %q", user)
	}
	if _, err := parseTeams(strings.Join(teams, ",")); err != nil {
		return "", fmt.Errorf("--teams: %w", err)
	}
	token := NewToken()
	sum := sha256.Sum256([]byte(token))
	role, teamList := "user", strings.Join(teams, ",")
	if admin {
		role = "admin"
	}
	if teamList == "" {
		teamList = "-"
	}
	line := fmt.Sprintf("sha256:%s %s %s %s %s\n", hex.EncodeToString(sum[:]), user, teamList, role, now.UTC().Format(time.RFC3339))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return "", fmt.Errorf("token file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	return token, nil
}
