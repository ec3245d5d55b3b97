package capacity

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
)

// TestReasonsWrittenAsDifferences: SetReasons writes only what changed
// since its View's last write, yet what Redis holds is always exactly the
// last set written, whoever wrote it: two Views (two dispatch servers,
// leading in turn) write random sets, Redis is flushed now and then, and
// a caller changes a set's slices after writing it.
func TestReasonsWrittenAsDifferences(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	reasons := []gangway.Waiting{
		{Reason: "InsufficientFreeGPUs", Detail: "needs 8 GPUs, 4 free", Retry: true},
		{Reason: "InsufficientFreeGPUs", Detail: "needs 8 GPUs, 4 free", Retry: true, ETA: &gangway.ETA{P50: at, P90: at.Add(time.Hour), At: at}},
		{Reason: "InsufficientFreeGPUs", Detail: "needs 8 GPUs, 4 free", Retry: true, ETA: &gangway.ETA{P50: at, P90: at.Add(2 * time.Hour), At: at}},
		{Reason: "Reserved", Retry: true, ReservationStart: at, ReservedNodes: []string{"a", "b"}, WaitsFor: []gangway.JobID{"x"}},
		{Reason: "Reserved", Retry: true, ReservationStart: at, ReservedNodes: []string{"a", "c"}, WaitsFor: []gangway.JobID{"x"}},
		{Reason: "NeverFits", Detail: "needs 16 GPUs per replica"},
		{Reason: "InsufficientFreeGPUs", Retry: true, Cloud: &gangway.CloudOption{Pool: "aws", Instances: 1, PricePerGPUHour: 2}},
		{Reason: "InsufficientFreeGPUs", Retry: true, Cloud: &gangway.CloudOption{Pool: "aws", Instances: 2, PricePerGPUHour: 2}},
	}
	jobs := []gangway.JobID{"j1", "j2", "j3", "j4", "j5", "j6"}
	rapid.Check(t, func(rt *rapid.T) {
		prefix := newView(rdb, Options{}).k.nodes
		prefix = strings.TrimSuffix(prefix, ":nodes")
		views := []*View{New(rdb, Options{Prefix: prefix}), New(rdb, Options{Prefix: prefix})}
		for step := range rapid.IntRange(1, 30).Draw(rt, "steps") {
			if rapid.IntRange(0, 9).Draw(rt, "flush") == 0 {
				must(rt, devstacktest.FlushAll(ctx, rdb))
			}
			set := map[gangway.JobID]gangway.Waiting{}
			for _, id := range jobs {
				if i := rapid.IntRange(-1, len(reasons)-1).Draw(rt, "reason of "+id); i >= 0 {
					set[id] = cloneWaiting(reasons[i])
				}
			}
			v := views[rapid.IntRange(0, 1).Draw(rt, "view")]
			must(rt, v.SetReasons(ctx, set))
			got, err := views[0].Reasons(ctx)
			must(rt, err)
			if diff := cmp.Diff(set, got); diff != "" {
				rt.Fatalf("step %d: Redis holds (-set +got):\n%s", step, diff)
			}
		}
	})
}

// TestReasonsCacheOwnsItsCopy: a caller changing the slices and pointers
// of a set it wrote, and writing it again, has the change written.
func TestReasonsCacheOwnsItsCopy(t *testing.T) {
	ctx := t.Context()
	v := newView(startRedis(t), Options{})
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	set := map[gangway.JobID]gangway.Waiting{
		"a": {Reason: "Reserved", Retry: true, ReservedNodes: []string{"n1"}, ETA: &gangway.ETA{P50: at, P90: at, At: at}},
	}
	for _, id := range []string{"b", "c", "d"} {
		set[id] = gangway.Waiting{Reason: "NeverFits"} // so that one change is written as a difference
	}
	must(t, v.SetReasons(ctx, set))             // whole
	for _, node := range []string{"n2", "n3"} { // as differences
		set["a"].ReservedNodes[0] = node
		set["a"].ETA.P50 = set["a"].ETA.P50.Add(time.Hour)
		must(t, v.SetReasons(ctx, set))
		got, err := v.Reasons(ctx)
		must(t, err)
		if diff := cmp.Diff(set, got); diff != "" {
			t.Errorf("%s: Redis holds (-set +got):\n%s", node, diff)
		}
	}
}

// TestSameWaiting: every field of a Waiting counts.
func TestSameWaiting(t *testing.T) {
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	base := gangway.Waiting{Reason: "Reserved", Detail: "d", Retry: true, ReservationStart: at,
		ReservedNodes: []string{"a"}, ETA: &gangway.ETA{P50: at, P90: at, At: at}, WaitsFor: []gangway.JobID{"x"},
		Cloud: &gangway.CloudOption{Pool: "aws"}, Moving: []gangway.JobID{"m"}, MoveLostGPUSeconds: 1}
	changes := map[string]func(w *gangway.Waiting){
		"reason":    func(w *gangway.Waiting) { w.Reason = "Fragmented" },
		"detail":    func(w *gangway.Waiting) { w.Detail = "e" },
		"retry":     func(w *gangway.Waiting) { w.Retry = false },
		"start":     func(w *gangway.Waiting) { w.ReservationStart = at.Add(time.Second) },
		"nodes":     func(w *gangway.Waiting) { w.ReservedNodes = []string{"b"} },
		"eta nil":   func(w *gangway.Waiting) { w.ETA = nil },
		"eta p50":   func(w *gangway.Waiting) { w.ETA.P50 = at.Add(time.Minute) },
		"eta p90":   func(w *gangway.Waiting) { w.ETA.P90 = at.Add(time.Minute) },
		"eta at":    func(w *gangway.Waiting) { w.ETA.At = at.Add(time.Minute) },
		"beyond":    func(w *gangway.Waiting) { w.ETA.Beyond = true },
		"eta cloud": func(w *gangway.Waiting) { w.ETA.Cloud = true },
		"waits for": func(w *gangway.Waiting) { w.WaitsFor = nil },
		"cloud nil": func(w *gangway.Waiting) { w.Cloud = nil },
		"cloud":     func(w *gangway.Waiting) { w.Cloud.Instances = 3 },
		"moving":    func(w *gangway.Waiting) { w.Moving = append(w.Moving, "n") },
		"lost":      func(w *gangway.Waiting) { w.MoveLostGPUSeconds = 2 },
	}
	if !sameWaiting(base, cloneWaiting(base)) {
		t.Error("a Waiting and its clone differ")
	}
	for name, change := range changes {
		w := cloneWaiting(base)
		change(&w)
		if sameWaiting(base, w) {
			t.Errorf("%s: changed, yet the same", name)
		}
	}
}

// TestReasonEncoder: a reason encoded from the encoder's memory is the
// one json.Marshal gives, for reasons alike and not.
func TestReasonEncoder(t *testing.T) {
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	reasons := []gangway.Waiting{
		{Reason: "InsufficientFreeGPUs", Detail: "needs 8", Retry: true},
		{Reason: "InsufficientFreeGPUs", Detail: "needs 8", Retry: true, ETA: &gangway.ETA{P50: at, P90: at, At: at}},
		{Reason: "InsufficientFreeGPUs", Detail: "needs 8", Retry: true, ETA: &gangway.ETA{P50: at, P90: at, At: at, Beyond: true}},
		{Reason: "InsufficientFreeGPUs", Detail: "needs 8", Retry: true, ETA: &gangway.ETA{P50: at, P90: at.Add(time.Hour), At: at}},
		{Reason: "InsufficientFreeGPUs", Detail: "needs 8", Retry: true, Cloud: &gangway.CloudOption{Pool: "aws"}},
		{Reason: "InsufficientFreeGPUs", Detail: "needs 8", Retry: true, Cloud: &gangway.CloudOption{Pool: "gcp"}},
		{Reason: "Reserved", Retry: true, ReservationStart: at, ReservedNodes: []string{"a"}},
		{Reason: "Reserved", Retry: true, ReservationStart: at, ReservedNodes: []string{"b"}},
		{Reason: "NeverFits", MoveLostGPUSeconds: 3},
	}
	enc := reasonEncoder{}
	for round := range 2 {
		for i, w := range reasons {
			got, err := enc.encode(cloneWaiting(w))
			must(t, err)
			want, err := json.Marshal(w)
			must(t, err)
			if string(got) != string(want) {
				t.Errorf("round %d, reason %d: encoded %s, want %s", round, i, got, want)
			}
		}
	}
}

// TestReasonComparisonCoversEveryField: sameWaiting, cloneWaiting and the
// encoder's key list gangway.Waiting's fields (and its ETA's and cloud
// option's) by hand, so a field added there must be added to them: for a
// Waiting with each field, one at a time, set to a value other than its
// zero, no two compare alike or encode alike.
func TestReasonComparisonCoversEveryField(t *testing.T) {
	variants := []gangway.Waiting{{}}
	wt := reflect.TypeFor[gangway.Waiting]()
	for i := range wt.NumField() {
		f := wt.Field(i)
		if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
			for k := -1; k < f.Type.Elem().NumField(); k++ {
				var w gangway.Waiting
				p := reflect.New(f.Type.Elem())
				if k >= 0 {
					setNonZero(t, p.Elem().Field(k))
				}
				reflect.ValueOf(&w).Elem().Field(i).Set(p)
				variants = append(variants, w)
			}
			continue
		}
		var w gangway.Waiting
		setNonZero(t, reflect.ValueOf(&w).Elem().Field(i))
		variants = append(variants, w)
	}
	enc := reasonEncoder{}
	encoded := map[string]int{}
	for i, a := range variants {
		b, err := enc.encode(a)
		must(t, err)
		if j, ok := encoded[string(b)]; ok {
			t.Errorf("variants %d and %d encode alike: %s", j, i, b)
		}
		encoded[string(b)] = i
		if !sameWaiting(a, cloneWaiting(a)) {
			t.Errorf("variant %d differs from its clone: %+v", i, a)
		}
		for j, b := range variants[:i] {
			if sameWaiting(a, b) {
				t.Errorf("variants %d and %d compare alike: %+v, %+v", j, i, b, a)
			}
		}
	}
}

// setNonZero sets v, a field of a reason, to a value other than its zero.
func setNonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)))
	case v.Kind() == reflect.String:
		v.SetString("x")
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.CanInt():
		v.SetInt(3)
	case v.CanFloat():
		v.SetFloat(1.5)
	case v.Kind() == reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		setNonZero(t, s.Index(0))
		v.Set(s)
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			setNonZero(t, v.Field(i))
		}
	default:
		t.Fatalf("a reason field of kind %s: teach setNonZero, sameWaiting, cloneWaiting and waitingKey about it", v.Kind())
	}
}
