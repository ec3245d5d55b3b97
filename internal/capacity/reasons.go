package capacity

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// SetReasons replaces every pending reason with reasons (job → why it
// waits). The dispatch loop calls it once per cycle with the whole set.
//
// Most reasons are the same from one cycle to the next, so it writes only
// the difference from the set this View wrote last: the reasons that
// changed, and the deletion of those no longer in the set. That is only
// right while nobody else has written P:reasons since, so every write also
// stamps P:reasons-stamp, and the difference is applied only where the
// stamp is still this View's own (reasons_update.lua); otherwise, after a
// failed write, and on the first call, the whole set is written.
func (v *View) SetReasons(ctx context.Context, reasons map[gangway.JobID]gangway.Waiting) error {
	c := &v.reasons
	c.mu.Lock()
	defer c.mu.Unlock()
	stamp := c.next()
	if c.stamp != "" {
		ok, err := v.updateReasons(ctx, c, stamp, reasons)
		if err != nil {
			c.forget()
			return fmt.Errorf("set reasons: %w", err)
		}
		if ok {
			return nil
		}
	}
	if err := v.writeReasons(ctx, c, stamp, reasons); err != nil {
		c.forget()
		return fmt.Errorf("set reasons: %w", err)
	}
	return nil
}

// reasonCache is the set of reasons a View last wrote, and the stamp it
// wrote to P:reasons-stamp with them.
type reasonCache struct {
	mu      sync.Mutex
	id      string // this View's, in its stamps
	seq     int
	stamp   string // "" to write whole
	written map[gangway.JobID]gangway.Waiting
}

// next is a stamp no other write of reasons has used: the View's random ID
// and a sequence number.
func (c *reasonCache) next() string {
	if c.id == "" {
		c.id = rand.Text()
	}
	c.seq++
	return c.id + "." + strconv.Itoa(c.seq)
}

func (c *reasonCache) forget() { c.stamp, c.written = "", nil }

// wholeAbove: when more than this share of the set changed, writing it
// whole is cheaper than one command per change.
const wholeAbove = 0.5

// updateReasons writes the difference between reasons and c.written, if
// P:reasons-stamp is still c.stamp; false (nothing written) if it is not,
// or if so much changed that the whole set should be written instead.
func (v *View) updateReasons(ctx context.Context, c *reasonCache, stamp string, reasons map[gangway.JobID]gangway.Waiting) (bool, error) {
	var set []gangway.JobID
	for id, w := range reasons {
		if old, ok := c.written[id]; !ok || !sameWaiting(old, w) {
			set = append(set, id)
		}
	}
	var drop []gangway.JobID
	for id := range c.written {
		if _, ok := reasons[id]; !ok {
			drop = append(drop, id)
		}
	}
	if float64(len(set)+len(drop)) > wholeAbove*float64(max(len(reasons), len(c.written))) {
		return false, nil
	}
	args := make([]any, 0, 3+2*len(set)+len(drop))
	args = append(args, c.stamp, stamp, len(set))
	enc := reasonEncoder{}
	for _, id := range set {
		b, err := enc.encode(reasons[id])
		if err != nil {
			return false, fmt.Errorf("encode %s: %w", id, err)
		}
		args = append(args, id, b)
	}
	for _, id := range drop {
		args = append(args, id)
	}
	ok, err := reasonsUpdateScript.Run(ctx, v.rdb, []string{v.k.reasons, v.k.reasonsStamp}, args...).Int()
	if err != nil || ok == 0 {
		return false, err
	}
	for _, id := range set {
		c.written[id] = cloneWaiting(reasons[id])
	}
	for _, id := range drop {
		delete(c.written, id)
	}
	c.stamp = stamp
	return true, nil
}

// writeReasons replaces P:reasons with reasons, stamped.
func (v *View) writeReasons(ctx context.Context, c *reasonCache, stamp string, reasons map[gangway.JobID]gangway.Waiting) error {
	fields := make(map[string]any, len(reasons))
	written := make(map[gangway.JobID]gangway.Waiting, len(reasons))
	enc := reasonEncoder{}
	for id, w := range reasons {
		b, err := enc.encode(w)
		if err != nil {
			return fmt.Errorf("encode %s: %w", id, err)
		}
		fields[id] = b
		written[id] = cloneWaiting(w)
	}
	_, err := v.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, v.k.reasons)
		if len(fields) > 0 {
			p.HSet(ctx, v.k.reasons, fields)
		}
		p.Set(ctx, v.k.reasonsStamp, stamp, 0)
		return nil
	})
	if err != nil {
		return err
	}
	c.stamp, c.written = stamp, written
	return nil
}

// reasonEncoder encodes reasons, each distinct one once: many jobs wait
// for the same thing, with the same estimate. Only reasons without slices
// are remembered, by a comparable copy of their fields.
type reasonEncoder map[waitingKey][]byte

type waitingKey struct {
	reason, detail   string
	retry            bool
	start            time.Time
	eta              gangway.ETA
	cloud            gangway.CloudOption
	hasETA, hasCloud bool
	moveLost         float64
}

func (enc reasonEncoder) encode(w gangway.Waiting) ([]byte, error) {
	if len(w.ReservedNodes) > 0 || len(w.WaitsFor) > 0 || len(w.Moving) > 0 {
		return json.Marshal(w)
	}
	k := waitingKey{reason: w.Reason, detail: w.Detail, retry: w.Retry, start: w.ReservationStart,
		hasETA: w.ETA != nil, hasCloud: w.Cloud != nil, moveLost: w.MoveLostGPUSeconds}
	if w.ETA != nil {
		k.eta = *w.ETA
	}
	if w.Cloud != nil {
		k.cloud = *w.Cloud
	}
	if b, ok := enc[k]; ok {
		return b, nil
	}
	b, err := json.Marshal(w)
	if err == nil {
		enc[k] = b
	}
	return b, err
}

// sameWaiting reports whether a and b are stored alike.
func sameWaiting(a, b gangway.Waiting) bool {
	return a.Reason == b.Reason && a.Detail == b.Detail && a.Retry == b.Retry &&
		a.ReservationStart.Equal(b.ReservationStart) && slices.Equal(a.ReservedNodes, b.ReservedNodes) &&
		sameETA(a.ETA, b.ETA) && slices.Equal(a.WaitsFor, b.WaitsFor) &&
		(a.Cloud == nil) == (b.Cloud == nil) && (a.Cloud == nil || *a.Cloud == *b.Cloud) &&
		slices.Equal(a.Moving, b.Moving) && a.MoveLostGPUSeconds == b.MoveLostGPUSeconds
}

func sameETA(a, b *gangway.ETA) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.P50.Equal(b.P50) && a.P90.Equal(b.P90) && a.At.Equal(b.At) && a.Beyond == b.Beyond && a.Cloud == b.Cloud
}

// cloneWaiting is w sharing no memory with it, so a caller reusing its
// slices or pointers cannot change what the cache remembers.
func cloneWaiting(w gangway.Waiting) gangway.Waiting {
	w.ReservedNodes, w.WaitsFor, w.Moving = slices.Clone(w.ReservedNodes), slices.Clone(w.WaitsFor), slices.Clone(w.Moving)
	if w.ETA != nil {
		e := *w.ETA
		w.ETA = &e
	}
	if w.Cloud != nil {
		c := *w.Cloud
		w.Cloud = &c
	}
	return w
}

// Waiting returns why the job is still pending, as of the last dispatch
// cycle; the zero Waiting if there is no reason on record.
func (v *View) Waiting(ctx context.Context, jobID gangway.JobID) (gangway.Waiting, error) {
	r, err := v.rdb.HGet(ctx, v.k.reasons, jobID).Result()
	if errors.Is(err, redis.Nil) {
		return gangway.Waiting{}, nil
	}
	if err != nil {
		return gangway.Waiting{}, fmt.Errorf("reason %s: %w", jobID, err)
	}
	return decodeWaiting(r), nil
}

// Reasons returns every pending job's reason as of the last dispatch
// cycle, in one read: what the web view's queue shows beside each entry.
func (v *View) Reasons(ctx context.Context) (map[gangway.JobID]gangway.Waiting, error) {
	all, err := v.rdb.HGetAll(ctx, v.k.reasons).Result()
	if err != nil {
		return nil, fmt.Errorf("reasons: %w", err)
	}
	out := make(map[gangway.JobID]gangway.Waiting, len(all))
	for id, r := range all {
		out[id] = decodeWaiting(r)
	}
	return out, nil
}

// decodeWaiting reads a stored reason. Versions before typed reasons
// stored the text "<reason code>: <detail>"; such a value (until the next
// cycle replaces it) is split back into code and detail, with Retry as
// placement defines it for the code.
func decodeWaiting(s string) gangway.Waiting {
	var w gangway.Waiting
	if s == "" {
		return w
	}
	if strings.HasPrefix(s, "{") && json.Unmarshal([]byte(s), &w) == nil {
		return w
	}
	code, detail, ok := strings.Cut(s, ": ")
	if !ok || strings.ContainsAny(code, " \t") {
		code, detail = "", s // free text: no code to recover
	}
	return gangway.Waiting{Reason: code, Detail: detail, Retry: placement.Reason(code).Retry()}
}
