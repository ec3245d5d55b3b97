package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// SetReasons replaces every pending reason with reasons (job → why it
// waits). The dispatch loop calls it once per cycle with the whole set.
func (v *View) SetReasons(ctx context.Context, reasons map[gangway.JobID]gangway.Waiting) error {
	fields := make(map[string]any, len(reasons))
	for id, w := range reasons {
		b, err := json.Marshal(w)
		if err != nil {
			return fmt.Errorf("set reasons: encode %s: %w", id, err)
		}
		fields[id] = b
	}
	_, err := v.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, v.k.reasons)
		if len(fields) > 0 {
			p.HSet(ctx, v.k.reasons, fields)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set reasons: %w", err)
	}
	return nil
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
