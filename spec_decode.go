package gangway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	goyaml "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/lexer"
	goyamlparser "github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
	"go.yaml.in/yaml/v3"
)

// maxProblems bounds the problems ParseJobSpec reports, so a hostile or
// badly broken file yields a readable error rather than thousands of lines.
const maxProblems = 50

// ParseJobSpec decodes one job spec of at most MaxSpecBytes from YAML,
// applies Default and runs Validate with opts. Decoding is strict: unknown
// fields, values of the wrong type, duplicate keys, several documents and
// an empty document are all errors.
// Every problem found is reported at once, as a *SpecError whose fields are
// paths in YAML key names ("gang.gpusPerReplica", "env.FOO", "command[2]").
//
// yaml.v3's own KnownFields decoding stops at the first problem and names
// Go types; walking the node tree against the struct lets us name the YAML
// path and keep going.
func ParseJobSpec(data []byte, opts ...ValidateOption) (JobSpec, error) {
	if len(data) > MaxSpecBytes {
		// The user API reads at most one byte more than allowed: the
		// size beyond that is not known, so it is not said.
		return JobSpec{}, docError("job spec is larger than the %s allowed", kib(MaxSpecBytes))
	}
	root, err := parseOneDocument(data)
	if err != nil {
		return JobSpec{}, err
	}
	var spec JobSpec
	d := &specDecoder{covered: map[string]bool{}, coveredWithin: map[string]bool{}}
	d.decode(root, reflect.ValueOf(&spec).Elem(), "")
	spec.Default()
	var verr error
	if d.decoded <= maxDecodedBytes { // else the spec is cut short: Validate would only mislead
		verr = spec.Validate(opts...)
	}
	if len(d.problems) == 0 && verr == nil {
		return spec, nil
	}

	// A field that did not decode is reported once, by the decoder: its
	// zero value would otherwise draw a second, misleading complaint
	// ("gang.replicas: want an integer, got string "two"" and then "must be
	// between 1 and 256, got 0"). Validation problems on other fields are
	// still reported, so one round trip shows everything to fix.
	all := d.problems
	var se *SpecError
	if errors.As(verr, &se) {
		for _, p := range se.Problems {
			if !d.isCovered(p.Field) {
				all = append(all, p)
			}
		}
	}
	if dropped := d.dropped + max(0, len(all)-maxProblems); dropped > 0 {
		all = append(all[:min(len(all), maxProblems)], FieldError{Message: fmt.Sprintf("... and %d more problems", dropped)})
	}
	return JobSpec{}, &SpecError{Problems: all}
}

// parseOneDocument returns the single document's root node; an empty input
// or a second non-empty document is an error. An empty trailing document
// ("---" at the end of the file) is harmless and ignored.
func parseOneDocument(data []byte) (root *yaml.Node, err error) {
	// The spec comes from users; a parser bug must not take the caller down.
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, docError("invalid YAML: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, syntaxError(data, err)
		}
		if isEmptyDocument(&doc) {
			continue
		}
		if root != nil {
			return nil, docError("several YAML documents (a second one starts at line %d); submit one job per file", doc.Line)
		}
		root = doc.Content[0]
	}
	if root == nil {
		return nil, docError("empty job spec: want a YAML mapping with at least name, team, command and gang")
	}
	if root.Kind != yaml.MappingNode {
		return nil, docError("want a YAML mapping of job spec fields, got %s", describe(root))
	}
	return root, nil
}

// syntaxError reports a YAML syntax error at its line and column.
// yaml.v3 names the line where the enclosing block or flow starts (a
// missing "]" on line 3 of a mapping begun on line 1 is "line 1"), so the
// position comes from a second parser, goccy/go-yaml, which points at the
// offending token; the message stays yaml.v3's. Where the two disagree
// (goccy finds no error), or the file is too large or nests too deeply for
// goccy to parse in reasonable time (maxPositionTokens, maxPositionDepth),
// yaml.v3's own line stands.
func syntaxError(data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var gerr error
	if tokens := lexer.Tokenize(string(data)); len(tokens) <= maxPositionTokens && nestingBound(tokens) <= maxPositionDepth {
		_, gerr = goyamlparser.Parse(tokens, 0, goyamlparser.AllowDuplicateMapKey()) // yaml.v3 parses them; the decoder reports them
	}
	line, rest := "", msg
	if r, ok := strings.CutPrefix(msg, "line "); ok {
		if l, m, ok := strings.Cut(r, ": "); ok {
			line, rest = l, m
		}
	}
	var se *goyaml.SyntaxError
	switch {
	case errors.As(gerr, &se) && se.Token != nil && se.Token.Position != nil:
		pos := se.Token.Position
		return docError("invalid YAML at line %d, column %d: %s", pos.Line, pos.Column, rest)
	case line != "":
		return docError("invalid YAML at line %s: %s", line, rest)
	default:
		return docError("invalid YAML: %s", msg)
	}
}

// maxPositionTokens and maxPositionDepth bound the files syntaxError has
// goccy parse. Its parser recurses once a level and builds each node's
// path anew, so its time and memory grow with the square of the depth (a
// 256 KiB "[[[[..." or "- - - ..." still ran after 40 s),
// and faster than the number of tokens (a 256 KiB mapping of 32,000 keys,
// each with an anchor, took seconds). Job specs nest a few levels and hold
// a few hundred tokens.
const (
	maxPositionTokens = 20000
	maxPositionDepth  = 100
)

// nestingBound is an upper bound on how deeply tokens nest: in block
// context a line's indentation plus its "- ", "? " and ": " indicators
// (a nested block collection is indented further or opened by one of
// them on the same line), plus the open flow collections ([ and {).
func nestingBound(tokens token.Tokens) int {
	bound, flow, line, base := 0, 0, -1, 0
	for _, tk := range tokens {
		if tk.Position == nil {
			continue
		}
		if flow == 0 && tk.Position.Line != line {
			line, base = tk.Position.Line, tk.Position.Column
		}
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			flow++
		case token.SequenceEndType, token.MappingEndType:
			flow = max(0, flow-1)
		case token.SequenceEntryType, token.MappingKeyType, token.MappingValueType:
			if flow == 0 {
				base++
			}
		}
		bound = max(bound, base+flow)
	}
	return bound
}

func isEmptyDocument(doc *yaml.Node) bool {
	if len(doc.Content) == 0 {
		return true
	}
	n := doc.Content[0]
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func docError(format string, args ...any) error {
	return &SpecError{Problems: []FieldError{{Message: fmt.Sprintf(format, args...)}}}
}

// maxDecodedBytes bounds what the decoder reads out of the node tree, each
// scalar counted with its length plus one and each collection as one.
// Without aliases a spec within MaxSpecBytes stays well inside it (an
// escape such as "\L" is the one thing that decodes longer than it is
// written); aliases can repeat a long anchored value thousands of times,
// which would cost the checks after decoding minutes for a 256 KiB file.
const maxDecodedBytes = 2 * MaxSpecBytes

// specDecoder walks a YAML node tree against a Go value, collecting
// problems instead of stopping at the first.
type specDecoder struct {
	problems []FieldError
	dropped  int
	// covered holds the paths the decoder already complained about, and
	// the paths its did-you-mean hints point at; coveredWithin the paths
	// that contain one of them ("gang" for "gang.replicas").
	covered       map[string]bool
	coveredWithin map[string]bool
	// decoded counts toward maxDecodedBytes; past it, decoding stops.
	decoded int
}

func (d *specDecoder) add(path string, format string, args ...any) {
	d.cover(path)
	if len(d.problems) >= maxProblems {
		d.dropped++
		return
	}
	d.problems = append(d.problems, FieldError{Field: path, Message: fmt.Sprintf(format, args...)})
}

// cover records that path was reported on, or pointed at by a hint.
func (d *specDecoder) cover(path string) {
	if path == "" || d.covered[path] {
		return
	}
	d.covered[path] = true
	for _, parent := range pathParents(path) {
		d.coveredWithin[parent] = true
	}
}

// spend counts n's share of maxDecodedBytes and reports whether decoding
// may go on; the first node past the bound is reported at its path.
func (d *specDecoder) spend(n *yaml.Node, path string) bool {
	if d.decoded > maxDecodedBytes {
		return false
	}
	d.decoded++
	if n.Kind == yaml.ScalarNode {
		d.decoded += len(n.Value)
	}
	if d.decoded > maxDecodedBytes {
		d.add(path, "its aliases (*name) expand the job spec past %s; write the values out instead", kib(maxDecodedBytes))
		return false
	}
	return true
}

// isCovered reports whether field is, contains or lies within a path the
// decoder already reported.
func (d *specDecoder) isCovered(field string) bool {
	if d.covered[field] || d.coveredWithin[field] {
		return true
	}
	for _, parent := range pathParents(field) {
		if d.covered[parent] {
			return true
		}
	}
	return false
}

// pathParents returns the paths that contain path, nearest last:
// "gang", "gang.gpuModel" for "gang.gpuModel[1]". A quoted key
// (`env["A.B"]`) is one step, whatever it holds.
func pathParents(path string) []string {
	var out []string
	for i := 0; i < len(path); i++ {
		switch path[i] {
		case '.':
			out = append(out, path[:i])
		case '[':
			if i > 0 {
				out = append(out, path[:i])
			}
			if q, err := strconv.QuotedPrefix(path[i+1:]); err == nil {
				i += len(q)
			}
		}
	}
	return out
}

var durationType = reflect.TypeFor[Duration]()

// quantityPaths are string fields that also take a bare YAML number, as
// Kubernetes quantities do: "cpu: 16" is as natural as "cpu: \"16\"".
var quantityPaths = map[string]bool{"gang.cpu": true, "gang.memory": true, "gang.gpuShare": true}

// decode stores n into v. A YAML null (or an absent field) leaves a struct
// field at its zero value; elsewhere null is a type error.
func (d *specDecoder) decode(n *yaml.Node, v reflect.Value, path string) {
	n = resolveAlias(n)
	if !d.spend(n, path) {
		return
	}
	if v.Type() == durationType {
		d.decodeDuration(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.String:
		if quantityPaths[path] && (isScalar(n, "!!int") || isScalar(n, "!!float")) {
			v.SetString(n.Value) // cpu: 16 means "16"; Validate parses it
			return
		}
		if !isScalar(n, "!!str") {
			d.add(path, "want a string, got %s%s", describe(n), quoteHint(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if !isScalar(n, "!!bool") || n.Decode(&b) != nil {
			d.add(path, "want true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int:
		var i int64
		if !isScalar(n, "!!int") || n.Decode(&i) != nil || v.OverflowInt(i) {
			d.add(path, "want an integer, got %s", describe(n))
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		var f float64
		if !(isScalar(n, "!!float") || isScalar(n, "!!int")) || n.Decode(&f) != nil {
			d.add(path, "want a number, got %s", describe(n))
			return
		}
		v.SetFloat(f)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.add(path, "want a list, got %s", describe(n))
			return
		}
		if len(n.Content) == 0 {
			return // nil, as omitempty JSON brings it back
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, elem := range n.Content {
			d.decode(elem, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	default:
		// Only reachable if JobSpec grows a field of a kind added here.
		d.add(path, "internal error: cannot decode into %s", v.Type())
	}
}

func (d *specDecoder) decodeDuration(n *yaml.Node, v reflect.Value, path string) {
	var dur time.Duration
	var err error
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!str" || n.ShortTag() == "!!int") {
		dur, err = time.ParseDuration(n.Value)
	} else {
		err = errors.New("not a string")
	}
	if err != nil {
		d.add(path, "want a duration such as \"90s\" or \"2h30m\" (units h, m, s, ms), got %s", describe(n))
		return
	}
	v.Set(reflect.ValueOf(Duration{dur}))
}

func (d *specDecoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.add(path, "want a mapping, got %s", describe(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.add(path, "internal error: cannot decode into %s", v.Type())
		return
	}
	if len(n.Content) == 0 {
		return // nil, as omitempty JSON brings it back
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolveAlias(n.Content[i]), n.Content[i+1]
		if !d.checkKey(k, path, seen) {
			continue
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, elem, keyPath(path, k.Value))
		m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
	}
	v.Set(m)
}

func (d *specDecoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.add(path, "want a mapping, got %s", describe(n))
		return
	}
	fields := yamlFields(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolveAlias(n.Content[i]), n.Content[i+1]
		if !d.checkKey(k, path, seen) {
			continue
		}
		idx, ok := fields[k.Value]
		if !ok {
			d.unknownField(k.Value, v.Type(), path)
			continue
		}
		if r := resolveAlias(val); r.Kind == yaml.ScalarNode && r.ShortTag() == "!!null" {
			continue // "gang:" with nothing after it means "not set"
		}
		d.decode(val, v.Field(idx), joinPath(path, k.Value))
	}
}

// checkKey reports keys that are not plain scalars, merge keys and
// duplicates; it returns whether the entry should be decoded.
func (d *specDecoder) checkKey(k *yaml.Node, path string, seen map[string]int) bool {
	if !d.spend(k, path) {
		return false
	}
	switch {
	case k.Kind != yaml.ScalarNode:
		d.add(path, "keys must be strings, got %s at line %d", describe(k), k.Line)
		return false
	case k.ShortTag() == "!!merge":
		d.add(joinPath(path, k.Value), "merge keys (<<) are not supported; write the fields out")
		return false
	}
	if line, dup := seen[k.Value]; dup {
		d.add(keyPath(path, k.Value), "duplicate key (first at line %d)", line)
		return false
	}
	seen[k.Value] = k.Line
	return true
}

func (d *specDecoder) unknownField(key string, t reflect.Type, path string) {
	full := keyPath(path, key)
	fields := yamlFields(t)
	names := slices.Sorted(maps.Keys(fields))
	if guess := closest(key, names); guess != "" {
		d.add(full, "unknown field (did you mean %s?)", guess)
		d.cover(joinPath(path, guess))
		return
	}
	// A field written one level too high, such as "replicas" at the top
	// instead of under gang.
	for _, name := range names {
		ft := t.Field(fields[name]).Type
		if ft.Kind() != reflect.Struct || ft == durationType {
			continue
		}
		for sub := range yamlFields(ft) {
			if strings.EqualFold(sub, key) {
				d.add(full, "unknown field (did you mean %s?)", joinPath(name, sub))
				d.cover(joinPath(path, joinPath(name, sub)))
				return
			}
		}
	}
	d.add(full, "unknown field")
}

// fieldsByType caches yamlFields: a file of thousands of unknown keys
// looks each one up.
var fieldsByType sync.Map // reflect.Type -> map[string]int

// yamlFields maps YAML key names to struct field indexes. The map is
// shared: callers must not change it.
func yamlFields(t reflect.Type) map[string]int {
	if m, ok := fieldsByType.Load(t); ok {
		return m.(map[string]int)
	}
	out := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = strings.ToLower(f.Name)
		}
		out[name] = i
	}
	fieldsByType.Store(t, out)
	return out
}

// closest returns the candidate a mistyped key most likely meant: the same
// word in another case, or one a few edits away. "" if none is close.
func closest(key string, candidates []string) string {
	best, bestDist := "", 0
	keyLen := utf8.RuneCountInString(key)
	for _, c := range candidates {
		if strings.EqualFold(c, key) {
			return c
		}
		cLen := utf8.RuneCountInString(c)
		limit := max(2, cLen/4)
		if keyLen > cLen+limit || cLen > keyLen+limit {
			continue // the lengths alone differ by more than limit edits
		}
		dist := editDistance(strings.ToLower(key), strings.ToLower(c))
		if dist <= limit && (best == "" || dist < bestDist || dist == bestDist && c < best) {
			best, bestDist = c, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// resolveAlias follows *alias references to the anchored node. The parser
// rejects undefined and self-referencing anchors, so this terminates; the
// bound is a second guard.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isScalar(n *yaml.Node, tag string) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == tag
}

// describe names what a node holds, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
	default:
		return "an unexpected YAML node"
	}
	v := n.Value
	if r := []rune(v); len(r) > 40 {
		v = string(r[:40]) + "…"
	}
	switch tag := n.ShortTag(); tag {
	case "!!str":
		return fmt.Sprintf("string %q", v)
	case "!!int":
		return "integer " + v
	case "!!float":
		return "float " + v
	case "!!bool":
		return "boolean " + v
	case "!!null":
		return "null"
	case "!!timestamp":
		return "timestamp " + v
	case "!!binary":
		return "binary data"
	default:
		return fmt.Sprintf("%s %q", tag, v)
	}
}

// quoteHint suggests quoting a scalar YAML read as something other than a
// string, the usual cause: env: {PORT: 8080}.
func quoteHint(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode || n.Value == "" {
		return ""
	}
	switch n.ShortTag() {
	case "!!int", "!!float", "!!bool", "!!timestamp":
		return fmt.Sprintf(" (quote it: %q)", n.Value)
	}
	return ""
}

// String writes d the way a spec would: "24h", "90s", "2h30m" (Go's own
// format, less the zero trailing units "24h0m0s" carries).
func (d Duration) String() string {
	s := d.Duration.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration string such as "90s" or "2h30m", for
// callers that decode a JobSpec with yaml.Unmarshal rather than
// ParseJobSpec.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: duration: want a string such as \"90s\", got %s", n.Line, describe(n))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: duration: %w", n.Line, err)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes d as a JSON string, so specs in Temporal payloads read
// the same as the YAML the user wrote.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string; null leaves d unchanged.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"90s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	d.Duration = v
	return nil
}
